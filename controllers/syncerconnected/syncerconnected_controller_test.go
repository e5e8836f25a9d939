// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncerconnected

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

var syncTargets = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")

// fakeClients answers every space with one fake dynamic client holding
// SyncTargets of inventory space "inv1" (the wildcard list finds their
// space by its annotation, as the server's does).
type fakeClients struct {
	dyn *dynamicfake.FakeDynamicClient
}

func (f fakeClients) Dynamic(string) (dynamic.Interface, error) { return f.dyn, nil }

func newFakeClients(t *testing.T, objs ...*unstructured.Unstructured) fakeClients {
	t.Helper()
	var in []runtime.Object
	for _, o := range objs {
		o.SetAnnotations(map[string]string{spaces.Annotation: "inv1"})
		o.SetResourceVersion("")
		o.SetGroupVersionKind(edgev2alpha1.SchemeGroupVersion.WithKind("SyncTarget"))
		in = append(in, o)
	}
	return fakeClients{dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{syncTargets: "SyncTargetList"}, in...)}
}

// named is syncTargetWith under another name.
func named(t *testing.T, name string, connected bool, server string) *unstructured.Unstructured {
	u := syncTargetWith(t, "", connected, server)
	u.SetName(name)
	return u
}

// state is a SyncTarget's SyncerConnected "Status/Reason" and tunnel
// server, as the fake API holds them.
func state(t *testing.T, c fakeClients, name string) (string, string) {
	t.Helper()
	u, err := c.dyn.Resource(syncTargets).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	st := &edgev2alpha1.SyncTarget{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st))
	cond := meta.FindStatusCondition(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected)
	if cond == nil {
		return "", st.Status.TunnelServer
	}
	return string(cond.Status) + "/" + cond.Reason, st.Status.TunnelServer
}

// tunnels is the tunnel server's Connected, as a test sets it.
type tunnels struct {
	mu   sync.Mutex
	open map[string]bool
}

func (tn *tunnels) set(st string, open bool) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.open[st] = open
}

func (tn *tunnels) connected(_, st string) bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.open[st]
}

// run runs c with two workers and a start-up sweep after 50 ms until the
// test ends.
func run(t *testing.T, c *Controller, clients fakeClients, tn *tunnels) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2, clients, tn.connected, 50*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 10*time.Millisecond, what)
}

// TestRunWritesWhatTheTunnelSaysNow: changes heard before Run wait for it;
// what is written is the tunnel's state when a worker gets to it, so a
// close that came after an open is never overwritten by that open; the
// start-up sweep closes what was said open here before a restart.
func TestRunWritesWhatTheTunnelSaysNow(t *testing.T) {
	clients := newFakeClients(t,
		named(t, "edge1", false, ""),
		named(t, "edge2", false, ""),
		// Said open here before this server started, and not back.
		named(t, "stale", true, selfURL),
		// Held by another server: not this one's to close.
		named(t, "elsewhere", true, "https://server-b:6443"))
	tn := &tunnels{open: map[string]bool{}}
	c := New(selfURL, nil)

	// Heard before Run.
	tn.set("edge1", true)
	c.Changed(t.Context(), "inv1", "edge1", true)
	// Opened and closed again before any write.
	c.Changed(t.Context(), "inv1", "edge2", true)
	c.Changed(t.Context(), "inv1", "edge2", false)

	run(t, c, clients, tn)

	eventually(t, "edge1 said open here", func() bool {
		cond, server := state(t, clients, "edge1")
		return cond == "True/TunnelOpen" && server == selfURL
	})
	eventually(t, "the stale one said closed by the start-up sweep", func() bool {
		cond, server := state(t, clients, "stale")
		return cond == "False/TunnelClosed" && server == ""
	})
	cond, _ := state(t, clients, "edge2")
	require.Equal(t, "False/TunnelClosed", cond, "edge2's open and close both came before its write: only the close is written")
	cond, server := state(t, clients, "elsewhere")
	require.Equal(t, []string{"True/TunnelOpen", "https://server-b:6443"}, []string{cond, server})

	// A close after Run started.
	tn.set("edge1", false)
	c.Changed(t.Context(), "inv1", "edge1", false)
	eventually(t, "edge1 said closed", func() bool { cond, _ := state(t, clients, "edge1"); return cond == "False/TunnelClosed" })
}

// TestClosing: a stopping server writes closed the tunnels open now and the
// changes not yet written; before Run it has no clients and writes
// nothing.
func TestClosing(t *testing.T) {
	c := New(selfURL, nil)
	c.Changed(t.Context(), "inv1", "edge2", true)
	require.NoError(t, c.Closing([]string{"inv1/edge1"}), "before Run: nothing to write with")

	clients := newFakeClients(t, named(t, "edge1", true, selfURL), named(t, "edge2", true, selfURL), named(t, "edge3", true, selfURL))
	// Run with a context already ended: it records its clients and stops
	// (having written edge2 or not).
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c.Run(ctx, 1, clients, func(string, string) bool { return false }, time.Hour)

	require.NoError(t, c.Closing([]string{"inv1/edge1"}))
	for name, want := range map[string]string{"edge1": "False/TunnelClosed", "edge2": "False/TunnelClosed", "edge3": "True/TunnelOpen"} {
		cond, _ := state(t, clients, name)
		require.Equal(t, want, cond, name)
	}
}

// TestSweepDeadServers: the leader closes the tunnels of a server whose
// Lease ran out, and of one with no Lease once the tunnel is two Lease
// lifetimes old; never those of a live server, nor its own.
func TestSweepDeadServers(t *testing.T) {
	now := time.Now()
	lease := func(holder string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: serverLeaseName(holder), Namespace: metav1.NamespaceSystem, Labels: map[string]string{ServerLeaseLabel: "true"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(serverLeaseTTL.Seconds())),
				RenewTime: &metav1.MicroTime{Time: renewed}},
		}
	}
	kube := kubefake.NewClientset(lease("https://dead:6443", now.Add(-time.Minute)), lease("https://alive:6443", now))
	recent := named(t, "no-lease-recent", true, "https://unknown:6443")
	old := named(t, "no-lease-old", true, "https://unknown:6443")
	for _, u := range []*unstructured.Unstructured{recent, old} {
		st := &edgev2alpha1.SyncTarget{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st))
		st.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-3 * serverLeaseTTL))
		if u == recent {
			st.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-serverLeaseTTL))
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
		require.NoError(t, err)
		u.Object = obj
	}
	clients := newFakeClients(t,
		named(t, "on-dead", true, "https://dead:6443"),
		named(t, "on-alive", true, "https://alive:6443"),
		named(t, "on-self", true, selfURL),
		recent, old)
	require.NoError(t, sweepDeadServersOnce(t.Context(), clients, kube, selfURL, now))
	want := map[string]string{
		"on-dead": "False/TunnelClosed", "no-lease-old": "False/TunnelClosed",
		"on-alive": "True/TunnelOpen", "on-self": "True/TunnelOpen", "no-lease-recent": "True/TunnelOpen",
	}
	for name, w := range want {
		cond, _ := state(t, clients, name)
		require.Equal(t, w, cond, name)
	}
}

// TestKeepServerLease: the Lease is made with the label the sweep selects
// by, and is fresh.
func TestKeepServerLease(t *testing.T) {
	kube := kubefake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); KeepServerLease(ctx, kube, selfURL) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the server's Lease, fresh", func() bool {
		alive, err := serverLeases(t.Context(), kube, time.Now())
		return err == nil && alive[selfURL]
	})
	l, err := kube.CoordinationV1().Leases(metav1.NamespaceSystem).Get(t.Context(), serverLeaseName(selfURL), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(serverLeaseTTL.Seconds()), *l.Spec.LeaseDurationSeconds)
}

// TestRecordedStateFollowsTheTunnel: the condition is level-based. When
// another writer records a tunnel this server holds as closed (the
// leader's sweep, judging this server dead while it was only slow to renew
// its Lease), the server says it is open again; when the record says open
// here with no tunnel here, once the start-up sweep has run, it says
// closed. It never fights another server that says it holds the tunnel,
// nor its own record of closing as it stops.
func TestRecordedStateFollowsTheTunnel(t *testing.T) {
	clients := newFakeClients(t,
		named(t, "held", true, selfURL),
		named(t, "moved", true, "https://server-b:6443"),
		named(t, "gone", false, ""))
	tn := &tunnels{open: map[string]bool{"held": true, "moved": true}}
	c := New(selfURL, nil)
	handler := c.SyncTargetHandler()
	observe := func(name string) {
		u, err := clients.dyn.Resource(syncTargets).Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		u.SetAnnotations(map[string]string{spaces.Annotation: "inv1"})
		handler.OnUpdate(u, u)
	}
	// Before Run, nothing is known of the tunnels: nothing is queued.
	observe("held")
	require.Zero(t, c.queue.Len())

	run(t, c, clients, tn)

	// The dead-server sweep's write, about a server that is alive.
	require.NoError(t, writeCondition(t.Context(), clients, nil, selfURL, time.Time{}, "inv1", "held", false))
	cond, _ := state(t, clients, "held")
	require.Equal(t, "False/TunnelClosed", cond)
	eventually(t, "the tunnel held here said open again", func() bool {
		observe("held") // again: Run may not have started
		cond, server := state(t, clients, "held")
		return cond == "True/TunnelOpen" && server == selfURL
	})

	// Another server says it holds the tunnel too (the syncer moved, this
	// server's tunnel is not dropped yet): that record is left alone.
	writes := func() int {
		n := 0
		for _, a := range clients.dyn.Actions() {
			if a.GetVerb() == "patch" {
				n++
			}
		}
		return n
	}
	before := writes()
	observe("moved")
	// A record said open here without a tunnel, once the start-up sweep
	// has run (so not by it), is said closed.
	eventually(t, "the start-up sweep to have run", c.swept.Load)
	require.NoError(t, writeCondition(t.Context(), clients, nil, selfURL, time.Time{}, "inv1", "gone", true))
	observe("gone")
	eventually(t, "the tunnel not held here said closed", func() bool {
		cond, server := state(t, clients, "gone")
		return cond == "False/TunnelClosed" && server == ""
	})
	cond, server := state(t, clients, "moved")
	require.Equal(t, []string{"True/TunnelOpen", "https://server-b:6443"}, []string{cond, server})
	require.Equal(t, before+2, writes(), "one write for gone (made by the test, then by the controller); none for moved")

	// A stopping server records its tunnels closed while they are still
	// counted open: it does not then say them open again.
	require.NoError(t, c.Closing([]string{"inv1/held"}))
	cond, _ = state(t, clients, "held")
	require.Equal(t, "False/TunnelClosed", cond)
	observe("held")
	require.Zero(t, c.queue.Len(), "a stopping server queued a tunnel it is closing")
	require.False(t, c.holds("inv1", "held"))
}
