// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncerconnected

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Each server of a cluster on a shared datastore keeps a Lease of its own
// in the root space's kube-system, so that the others know it is alive: a
// SyncTarget whose tunnel a dead server held is then said not connected.
const (
	// ServerLeaseLabel marks the servers' Leases.
	ServerLeaseLabel  = "kubestellar.io/server"
	serverLeasePrefix = "kubestellar-server-"
	serverLeaseTTL    = 15 * time.Second
	serverLeaseRenew  = 5 * time.Second
	// deadServerSweep is how often the leader looks for tunnels of dead
	// servers.
	deadServerSweep = 10 * time.Second
)

func serverLeaseName(self string) string {
	sum := sha256.Sum256([]byte(self))
	return serverLeasePrefix + hex.EncodeToString(sum[:])[:12]
}

// KeepServerLease renews the Lease of the server whose advertised URL is
// self until ctx ends, with Kubernetes' lease controller (the one that
// keeps kube-apiserver's identity Lease and the kubelet's node Lease).
func KeepServerLease(ctx context.Context, client kubernetes.Interface, self string) {
	labelled := func(l *coordinationv1.Lease) error {
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[ServerLeaseLabel] = "true"
		return nil
	}
	lease.NewController(clock.RealClock{}, client, self, int32(serverLeaseTTL.Seconds()), nil, serverLeaseRenew,
		serverLeaseName(self), metav1.NamespaceSystem, labelled).Run(ctx)
}

// serverLeases returns, for each server that has a Lease, whether it is
// fresh.
func serverLeases(ctx context.Context, client kubernetes.Interface, now time.Time) (map[string]bool, error) {
	list, err := client.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: ServerLeaseLabel + "=true"})
	if err != nil {
		return nil, err
	}
	alive := map[string]bool{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			continue
		}
		ttl := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		alive[*l.Spec.HolderIdentity] = now.Before(l.Spec.RenewTime.Add(ttl))
	}
	return alive, nil
}

// SweepDeadServers says, every deadServerSweep until ctx ends, that
// SyncTargets whose tunnel a dead server held are not connected: a server
// that was killed could not say so itself. A server is dead when its Lease
// ran out; one with no Lease at all (older, or not yet started) only once
// the SyncTarget has said connected for two Lease lifetimes. The leader
// runs it; self is its advertised URL.
func SweepDeadServers(ctx context.Context, clients Clients, client kubernetes.Interface, self string) {
	logger := klog.FromContext(ctx)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := sweepDeadServersOnce(ctx, clients, client, self, time.Now()); err != nil && ctx.Err() == nil {
			logger.Error(err, "cannot look for tunnels of servers that died")
		}
	}, deadServerSweep)
}

func sweepDeadServersOnce(ctx context.Context, clients Clients, client kubernetes.Interface, self string, now time.Time) error {
	alive, err := serverLeases(ctx, client, now)
	if err != nil {
		return err
	}
	targets, err := connectedSyncTargets(ctx, clients)
	if err != nil {
		return err
	}
	for _, st := range targets {
		holder := st.Status.TunnelServer
		if holder == "" || holder == self {
			continue
		}
		fresh, hasLease := alive[holder]
		if fresh || (!hasLease && now.Sub(st.cond.LastTransitionTime.Time) < 2*serverLeaseTTL) {
			continue
		}
		klog.FromContext(ctx).Info("the server holding a SyncTarget's tunnel is gone: recording the tunnel closed",
			"syncTarget", st.inv+"/"+st.Name, "server", holder)
		// Recorded as that server would have: only if it still holds it.
		if err := writeCondition(ctx, clients, nil, holder, time.Time{}, st.inv, st.Name, false); err != nil {
			return fmt.Errorf("SyncTarget %s/%s: %w", st.inv, st.Name, err)
		}
	}
	return nil
}
