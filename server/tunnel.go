// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/tunnel"
)

// tunnelOwner is the tunnel server's Identify (principal.TunnelOwner).
func tunnelOwner(u user.Info) (tunnel.Owner, error) {
	inv, st, uid, tokenID, err := principal.TunnelOwner(u)
	return tunnel.Owner{InventorySpace: inv, SyncTarget: st, UID: uid, TokenID: tokenID}, err
}

// isTunnelRequest: tunnels and what goes through them live long; they are
// kept out of the request timeout and the in-flight limits.
func isTunnelRequest(r *http.Request) bool {
	return r.URL.Path == tunnel.Path || strings.HasPrefix(r.URL.Path, tunnel.EdgesPrefix)
}

// withTunnelsLongRunning extends a long-running-request check.
func withTunnelsLongRunning(check func(*http.Request, *request.RequestInfo) bool) func(*http.Request, *request.RequestInfo) bool {
	return func(r *http.Request, ri *request.RequestInfo) bool {
		return isTunnelRequest(r) || (check != nil && check(r, ri))
	}
}

// tunnelConditions makes each SyncTarget's SyncerConnected condition
// follow its syncer's tunnel. Changes heard before the server is ready
// wait until it is.
type tunnelConditions struct {
	// self is this server's advertised URL, recorded as the SyncTarget's
	// tunnelServer while the tunnel is open here.
	self string
	// started is when this server started: a SyncTarget said connected
	// here since before then lost its tunnel when the last one stopped,
	// however it stopped.
	started time.Time
	mu      sync.Mutex
	pending map[string]bool // "inventory/synctarget" -> connected
	wake    chan struct{}
	clients *spaceClients // set once the server runs
	logger  klog.Logger   // the server's, set with clients
	// cached returns a SyncTarget from the server's cache, to write its
	// condition without reading it first (nil: always read).
	cached func(inv, st string) (*unstructured.Unstructured, bool)
}

// closingWriters is how many closings a stopping server writes at once.
const closingWriters = 16

func newTunnelConditions(self string) *tunnelConditions {
	return &tunnelConditions{self: self, started: time.Now(), pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// changed is the tunnel server's onChange.
func (t *tunnelConditions) changed(_ context.Context, inventorySpace, syncTarget string, connected bool) {
	t.mu.Lock()
	t.pending[inventorySpace+"/"+syncTarget] = connected
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// run writes the conditions until ctx is done. A while after the server
// starts (time for syncers to come back), SyncTargets still said to be
// connected to it from before, but without a tunnel now, are said not to
// be. (Tunnels said held by other servers of the cluster are theirs; the
// leader looks after those of servers that died.)
func (t *tunnelConditions) run(ctx context.Context, clients *spaceClients, connected func(inv, st string) bool) {
	logger := klog.FromContext(ctx)
	t.mu.Lock()
	t.clients, t.logger = clients, logger
	t.mu.Unlock()
	retryTimer := time.NewTimer(time.Hour)
	defer retryTimer.Stop()
	time.AfterFunc(2*tunnel.DeadAfter, func() {
		if err := t.sweep(ctx, clients, connected); err != nil && ctx.Err() == nil {
			logger.Error(err, "cannot check which SyncTargets lost their tunnel while the server was down")
		}
	})
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		case <-retryTimer.C:
		}
		t.mu.Lock()
		batch := t.pending
		t.pending = map[string]bool{}
		t.mu.Unlock()
		// A few writers at once: after a restart every syncer comes back.
		keys := make(chan string)
		var wg sync.WaitGroup
		var failed atomic.Bool
		for range min(8, len(batch)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for key := range keys {
					connected := batch[key]
					inv, st, _ := strings.Cut(key, "/")
					if err := writeTunnelCondition(ctx, clients, t.cached, t.self, t.started, inv, st, connected); err != nil {
						logger.Error(err, "cannot record the tunnel on the SyncTarget; will retry", "syncTarget", key, "connected", connected)
						t.mu.Lock()
						if _, newer := t.pending[key]; !newer {
							t.pending[key] = connected
						}
						t.mu.Unlock()
						failed.Store(true)
					}
				}
			}()
		}
		for key := range batch {
			keys <- key
		}
		close(keys)
		wg.Wait()
		if failed.Load() {
			retryTimer.Reset(time.Second)
		}
	}
}

// writeTunnelCondition records that the SyncTarget's tunnel to server self
// opened or closed. A close is not recorded once another server holds the
// tunnel: the syncer has moved there. An open recorded at self before
// started (when self last started) was cut when that server stopped, even
// if nothing said so (kill -9): the open now starts a new period.
//
// The first attempt starts from cached's copy, when there is one; a
// conflict (the cache was behind) reads the SyncTarget from the server.
func writeTunnelCondition(ctx context.Context, clients *spaceClients, cached func(inv, st string) (*unstructured.Unstructured, bool),
	self string, started time.Time, inv, st string, connected bool) error {
	dyn, err := clients.Dynamic(inv)
	if err != nil {
		return err
	}
	rc := dyn.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("synctargets"))
	w := tunnelConditionWriter{
		cached: func() (*unstructured.Unstructured, bool) {
			if cached == nil {
				return nil, false
			}
			return cached(inv, st)
		},
		get: func() (*unstructured.Unstructured, error) { return rc.Get(ctx, st, metav1.GetOptions{}) },
		patchStatus: func(patch []byte) error {
			_, err := rc.Patch(ctx, st, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubestellar-tunnel"}, "status")
			return err
		},
	}
	err = w.write(self, started, connected)
	if apierrors.IsNotFound(err) {
		return nil // the SyncTarget is gone
	}
	return err
}

// tunnelConditionWriter is writeTunnelCondition's logic over one
// SyncTarget's reads and writes.
type tunnelConditionWriter struct {
	// cached returns the cache's copy, not to be changed: the SyncTarget's
	// identity and the status fields the write reads and sets
	// (auth.CachedSyncTargetFields), no more.
	cached func() (*unstructured.Unstructured, bool)
	get    func() (*unstructured.Unstructured, error)
	// patchStatus sends a JSON merge patch (tunnelStatusPatch) to the
	// status subresource.
	patchStatus func(patch []byte) error
}

// tunnelStatusPatch is what the tunnel writes of a SyncTarget: its
// conditions and tunnel server, at the resourceVersion they were decided
// on, so that a write decided on a stale copy is refused (a conflict)
// rather than applied; the rest of the status, which the syncer writes, is
// left as it is.
type tunnelStatusPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions"`
		// TunnelServer nil (null) removes the field.
		TunnelServer *string `json:"tunnelServer"`
	} `json:"status"`
}

func (w tunnelConditionWriter) write(self string, started time.Time, connected bool) error {
	// update writes the condition on u, unless u says so already.
	update := func(u *unstructured.Unstructured) (wrote bool, err error) {
		obj := &edgev2alpha1.SyncTarget{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return false, err
		}
		cond := metav1.Condition{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: metav1.ConditionTrue,
			Reason: "TunnelOpen", Message: "the syncer's tunnel to " + self + " is open", ObservedGeneration: obj.Generation}
		server := self
		if !connected {
			if obj.Status.TunnelServer != "" && obj.Status.TunnelServer != self {
				return false, nil
			}
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "TunnelClosed", "the syncer's tunnel to the server is closed"
			server = ""
		} else if old := meta.FindStatusCondition(obj.Status.Conditions, cond.Type); old != nil && old.Status == metav1.ConditionTrue &&
			obj.Status.TunnelServer == self && !old.LastTransitionTime.Time.After(started.Truncate(time.Second)) {
			// (Times are kept to the second: one of this server's first
			// second may count as before it, which at worst records a
			// reconnection as one.)
			cond.Reason, cond.Message = "TunnelReopened", "the syncer's tunnel to "+self+" is open again: it was cut when that server last stopped"
			meta.RemoveStatusCondition(&obj.Status.Conditions, cond.Type)
		}
		changed := meta.SetStatusCondition(&obj.Status.Conditions, cond)
		if !changed && obj.Status.TunnelServer == server {
			return false, nil
		}
		var patch tunnelStatusPatch
		patch.Metadata.ResourceVersion = obj.ResourceVersion
		patch.Status.Conditions = obj.Status.Conditions
		if server != "" {
			patch.Status.TunnelServer = &server
		}
		data, err := json.Marshal(patch)
		if err != nil {
			return false, err
		}
		return true, w.patchStatus(data)
	}
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if first {
			first = false
			if c, ok := w.cached(); ok {
				// A conflict means the cache was behind: the retry reads.
				if wrote, err := update(c.DeepCopy()); wrote || err != nil {
					return err
				}
				// Nothing to write by the cache's copy, which may be
				// behind: decide again on the server's.
			}
		}
		u, err := w.get()
		if err != nil {
			return err
		}
		_, err = update(u)
		return err
	})
}

// tunnelServer returns the server said to hold a SyncTarget's tunnel, ""
// when it is not connected.
func (c *spaceClients) tunnelServer(ctx context.Context, inv, st string) (string, error) {
	dyn, err := c.Dynamic(inv)
	if err != nil {
		return "", err
	}
	u, err := dyn.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")).Get(ctx, st, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	obj := &edgev2alpha1.SyncTarget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return "", err
	}
	if !meta.IsStatusConditionTrue(obj.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected) {
		return "", nil
	}
	return obj.Status.TunnelServer, nil
}

// sweep queues SyncerConnected=False for SyncTargets that say True, with
// their tunnel on this server (or on no server named), but have no tunnel
// to it.
func (t *tunnelConditions) sweep(ctx context.Context, clients *spaceClients, connected func(inv, st string) bool) error {
	targets, err := connectedSyncTargets(ctx, clients)
	if err != nil {
		return err
	}
	for _, st := range targets {
		if holder := st.Status.TunnelServer; (holder == "" || holder == t.self) && !connected(st.inv, st.Name) {
			t.changed(ctx, st.inv, st.Name, false)
		}
	}
	return nil
}

// connectedSyncTarget is a SyncTarget said connected, with its inventory
// space and the condition that says so.
type connectedSyncTarget struct {
	*edgev2alpha1.SyncTarget
	inv  string
	cond *metav1.Condition
}

// connectedSyncTargets lists the SyncTargets of every space whose
// SyncerConnected is True.
func connectedSyncTargets(ctx context.Context, clients *spaceClients) ([]connectedSyncTarget, error) {
	dyn, err := clients.Dynamic(spaces.Wildcard)
	if err != nil {
		return nil, err
	}
	list, err := dyn.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []connectedSyncTarget
	for i := range list.Items {
		u := &list.Items[i]
		obj := &edgev2alpha1.SyncTarget{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			continue
		}
		inv := u.GetAnnotations()[spaces.Annotation]
		cond := meta.FindStatusCondition(obj.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected)
		if inv != "" && cond != nil && cond.Status == metav1.ConditionTrue {
			out = append(out, connectedSyncTarget{SyncTarget: obj, inv: inv, cond: cond})
		}
	}
	return out, nil
}

// closingBudget is how long a stopping server spends recording its
// tunnels closed. Each is a write; a server holding a thousand tunnels
// would spend seconds of its stop on them, and every syncer waits for the
// restarted server meanwhile. Those not written in time are recorded when
// their syncer comes back (TunnelReopened: cut when the server last
// stopped) or, for a syncer that does not, by the sweep of the server's
// next start (or the leader's sweep of dead servers).
const closingBudget = 500 * time.Millisecond

// closing records, while the server still serves, that the tunnels open
// now (keys "inventory/synctarget") are closing with it, and so are those
// whose opening or closing is not written yet: a few writers at once, for
// closingBudget at most.
func (t *tunnelConditions) closing(open []string) error {
	t.mu.Lock()
	clients, logger := t.clients, t.logger
	keys := map[string]bool{}
	for key := range t.pending {
		keys[key] = true
	}
	t.mu.Unlock()
	for _, key := range open {
		keys[key] = true
	}
	if clients == nil || len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closingBudget)
	defer cancel()
	work := make(chan string)
	var (
		mu      sync.Mutex
		errs    []error
		written atomic.Int64
		wg      sync.WaitGroup
	)
	for range min(closingWriters, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				inv, st, _ := strings.Cut(key, "/")
				if err := writeTunnelCondition(ctx, clients, t.cached, t.self, time.Time{}, inv, st, false); err != nil {
					if ctx.Err() != nil {
						continue // out of time: counted below
					}
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", key, err))
					mu.Unlock()
					continue
				}
				written.Add(1)
			}
		}()
	}
	for key := range keys {
		select {
		case work <- key:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if left := int64(len(keys)) - written.Load() - int64(len(errs)); left > 0 {
		logger.Info("recorded tunnels closed as the server stops; the rest are recorded when their syncer comes back",
			"written", written.Load(), "left", left, "budget", closingBudget)
	}
	return errors.Join(errs...)
}
