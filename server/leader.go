// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Leader election of the controllers among the servers of one datastore.
const (
	// LeaseNamespace and LeaseName name the Lease, in the root space.
	LeaseNamespace = "kube-system"
	LeaseName      = "kubestellar-controllers"
	// A dead leader's lease runs out after leaseDuration; the others try
	// every retryPeriod, so one takes over within about 12 s.
	leaseDuration = 10 * time.Second
	renewDeadline = 7 * time.Second
	retryPeriod   = 2 * time.Second
)

// lead runs the controllers whenever this server holds the lease, until ctx
// is done.
func (s *Server) lead(ctx context.Context, client kubernetes.Interface, run func(context.Context) error) {
	logger := klog.FromContext(ctx)
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s_%s_%s", host, s.cfg.BaseURL(), rand.String(6))
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, LeaseNamespace, LeaseName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		logger.Error(err, "cannot elect a leader; controllers not started")
		return
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, Name: LeaseName, ReleaseOnCancel: true,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					logger.Info("leading: starting the controllers", "identity", id)
					if err := run(ctx); err != nil {
						logger.Error(err, "cannot start the controllers")
					}
				},
				OnStoppedLeading: func() {
					logger.Info("no longer leading: controllers stopped", "identity", id)
				},
				OnNewLeader: func(leader string) {
					if leader != id {
						logger.Info("another server leads the controllers", "leader", leader)
					}
				},
			},
		})
	}
}
