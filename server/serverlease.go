// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
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

// keepServerLease renews this server's Lease until ctx ends.
func keepServerLease(ctx context.Context, client kubernetes.Interface, self string) {
	logger := klog.FromContext(ctx)
	leases := client.CoordinationV1().Leases(LeaseNamespace)
	name := serverLeaseName(self)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: LeaseNamespace, Labels: map[string]string{ServerLeaseLabel: "true"}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(self), LeaseDurationSeconds: ptr.To(int32(serverLeaseTTL.Seconds())),
					AcquireTime: &now, RenewTime: &now},
			}
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		} else if err == nil {
			lease.Spec.RenewTime = &now
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "cannot renew this server's lease", "lease", LeaseNamespace+"/"+name)
		}
	}, serverLeaseRenew)
}

// serverLeases returns, for each server that has a Lease, whether it is
// fresh.
func serverLeases(ctx context.Context, client kubernetes.Interface, now time.Time) (map[string]bool, error) {
	list, err := client.CoordinationV1().Leases(LeaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: ServerLeaseLabel + "=true"})
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

// sweepDeadServers says, every deadServerSweep until ctx ends, that
// SyncTargets whose tunnel a dead server held are not connected: a server
// that was killed could not say so itself. A server is dead when its Lease
// ran out; one with no Lease at all (older, or not yet started) only once
// the SyncTarget has said connected for two Lease lifetimes. The leader
// runs it.
func (t *tunnelConditions) sweepDeadServers(ctx context.Context, clients *spaceClients, client kubernetes.Interface) {
	logger := klog.FromContext(ctx)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := t.sweepDeadServersOnce(ctx, clients, client, time.Now()); err != nil && ctx.Err() == nil {
			logger.Error(err, "cannot look for tunnels of servers that died")
		}
	}, deadServerSweep)
}

func (t *tunnelConditions) sweepDeadServersOnce(ctx context.Context, clients *spaceClients, client kubernetes.Interface, now time.Time) error {
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
		if holder == "" || holder == t.self {
			continue
		}
		fresh, hasLease := alive[holder]
		if fresh || (!hasLease && now.Sub(st.cond.LastTransitionTime.Time) < 2*serverLeaseTTL) {
			continue
		}
		klog.FromContext(ctx).Info("the server holding a SyncTarget's tunnel is gone: recording the tunnel closed",
			"syncTarget", st.inv+"/"+st.Name, "server", holder)
		// Recorded as that server would have: only if it still holds it.
		if err := writeTunnelCondition(ctx, clients, nil, holder, time.Time{}, st.inv, st.Name, false); err != nil {
			return fmt.Errorf("SyncTarget %s/%s: %w", st.inv, st.Name, err)
		}
	}
	return nil
}
