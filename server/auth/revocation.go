// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// Revoker ends what a syncer token keeps open (its tunnels, watches, log
// streams, any request in flight) once the token stops authenticating:
// revoked (its Secret deleted), expired, or its SyncTarget deleted or made
// anew (another UID). Authentication alone only refuses new requests.
//
// WithSyncerRequests registers each request of a syncer identity, under its
// token, with a context that Revoker cancels. Revoker checks a token again
// when the informers of token Secrets and SyncTargets report a change that
// may concern it, and when it expires.
type Revoker struct {
	// stillValid tells whether a token, which authenticated a syncer for
	// the SyncTarget with a UID, still would (see SyncerTokens.StillValid).
	stillValid func(tokenID string, uid types.UID) (time.Time, error)
	clock      clock.WithTicker
	// queue holds what to check again: a token (by id), or the tokens of a
	// SyncTarget; a token's expiration is a check queued for then.
	queue workqueue.TypedRateLimitingInterface[checkKey]

	mu      sync.Mutex
	live    map[liveKey]*liveToken
	nextReq uint64
}

// checkKey is a token to check again (tokenID), or a SyncTarget
// ("inventory/name") whose tokens to check again.
type checkKey struct{ tokenID, syncTarget string }

// revokerName names the Revoker's queue and loop.
const revokerName = "syncer-token-revoker"

type liveKey struct {
	tokenID string
	uid     types.UID
}

// liveToken is a token with requests open.
type liveToken struct {
	syncTarget string // "inventory/name"
	expires    time.Time
	requests   map[uint64]context.CancelCauseFunc
}

// NewRevoker returns a Revoker that checks tokens with stillValid.
func NewRevoker(stillValid func(tokenID string, uid types.UID) (time.Time, error)) *Revoker {
	return newRevoker(stillValid, clock.RealClock{})
}

func newRevoker(stillValid func(tokenID string, uid types.UID) (time.Time, error), clk clock.WithTicker) *Revoker {
	return &Revoker{stillValid: stillValid, clock: clk, live: map[liveKey]*liveToken{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[checkKey](),
			workqueue.TypedRateLimitingQueueConfig[checkKey]{Name: revokerName, Clock: clk})}
}

// WithSyncerRequests registers, in r, every request of a syncer identity
// that handler serves, so that it ends when its token stops
// authenticating. It goes after authentication in the handler chain.
func WithSyncerRequests(handler http.Handler, r *Revoker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, ok := request.UserFrom(req.Context())
		if !ok {
			handler.ServeHTTP(w, req)
			return
		}
		ctx, done := r.Track(req.Context(), u)
		defer done()
		handler.ServeHTTP(w, req.WithContext(ctx))
	})
}

// Track registers a request of u, when u is a syncer authenticated by a
// token: the returned context is cancelled when the token stops
// authenticating (at once if it no longer does). Call done when the
// request ends.
func (r *Revoker) Track(ctx context.Context, u user.Info) (_ context.Context, done func()) {
	tokenID, uid, ok := principal.TokenOf(u)
	if !ok {
		return ctx, func() {}
	}
	inv, st, _ := principal.SyncTargetOf(u)
	key := liveKey{tokenID: tokenID, uid: uid}
	ctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	r.nextReq++
	id := r.nextReq
	lt := r.live[key]
	first := lt == nil
	if first {
		lt = &liveToken{syncTarget: inv + "/" + st, requests: map[uint64]context.CancelCauseFunc{}}
		r.live[key] = lt
	}
	lt.requests[id] = cancel
	r.mu.Unlock()
	done = func() {
		r.mu.Lock()
		if lt := r.live[key]; lt != nil {
			delete(lt.requests, id)
			if len(lt.requests) == 0 {
				delete(r.live, key)
			}
		}
		r.mu.Unlock()
		cancel(nil)
	}
	// Checked after registering: a revocation handled between
	// authentication and now found nothing to end, but is seen here.
	expires, err := r.stillValid(tokenID, uid)
	if err != nil {
		cancel(err)
		return ctx, done
	}
	if first && !expires.IsZero() {
		r.mu.Lock()
		lt.expires = expires
		r.mu.Unlock()
		r.checkAt(tokenID, expires)
	}
	return ctx, done
}

// Live counts the requests open with a token.
func (r *Revoker) Live(tokenID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for key, lt := range r.live {
		if key.tokenID == tokenID {
			n += len(lt.requests)
		}
	}
	return n
}

// TokenChanged asks for a token to be checked again.
func (r *Revoker) TokenChanged(tokenID string) { r.queue.Add(checkKey{tokenID: tokenID}) }

// SyncTargetChanged asks for the tokens of a SyncTarget to be checked again.
func (r *Revoker) SyncTargetChanged(inventorySpace, name string) {
	r.queue.Add(checkKey{syncTarget: inventorySpace + "/" + name})
}

// checkAt queues a token's check for a moment past its expiration: the
// token is expired by then.
func (r *Revoker) checkAt(tokenID string, expires time.Time) {
	r.queue.AddAfter(checkKey{tokenID: tokenID}, max(expires.Sub(r.clock.Now())+10*time.Millisecond, 0))
}

// Run checks tokens again as asked, and as they expire, until ctx is done.
func (r *Revoker) Run(ctx context.Context) {
	worker.Loop[checkKey]{Name: revokerName, Queue: r.queue, Failure: "cannot check syncer tokens again",
		Process: func(ctx context.Context, k checkKey) (bool, error) {
			r.check(ctx, k)
			return false, nil
		}}.Run(ctx, 1, nil)
}

// check checks again the tokens with requests open that k names; it ends
// the requests of those that no longer authenticate.
func (r *Revoker) check(ctx context.Context, k checkKey) {
	r.mu.Lock()
	var check []liveKey
	for key, lt := range r.live {
		if (k.tokenID != "" && key.tokenID == k.tokenID) || (k.syncTarget != "" && lt.syncTarget == k.syncTarget) {
			check = append(check, key)
		}
	}
	r.mu.Unlock()

	for _, key := range check {
		expires, err := r.stillValid(key.tokenID, key.uid)
		r.mu.Lock()
		lt := r.live[key]
		if lt == nil {
			r.mu.Unlock()
			continue
		}
		if err == nil {
			lt.expires = expires
			r.mu.Unlock()
			if !expires.IsZero() {
				r.checkAt(key.tokenID, expires)
			}
			continue
		}
		delete(r.live, key)
		cancels := lt.requests
		r.mu.Unlock()
		klog.FromContext(ctx).Info("syncer token no longer authenticates: ending its requests",
			"token", key.tokenID, "syncTarget", lt.syncTarget, "requests", len(cancels), "reason", err.Error())
		for _, cancel := range cancels {
			cancel(err)
		}
	}
}

// TokenSecretHandler hears changes of token Secrets.
func (r *Revoker) TokenSecretHandler() cache.ResourceEventHandler {
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if s, ok := obj.(*corev1.Secret); ok {
			if id, ok := strings.CutPrefix(s.Name, TokenSecretPrefix); ok {
				r.TokenChanged(id)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { changed(obj) },
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}
}

// SyncTargetHandler hears changes of SyncTargets (unstructured, of every
// space): a SyncTarget deleted, or made again (a new UID).
func (r *Revoker) SyncTargetHandler() cache.ResourceEventHandler {
	changed := func(obj any) {
		key, err := spaces.KeyFunc(obj)
		if err != nil {
			return
		}
		inv, _, name, err := spaces.SplitKey(key)
		if err == nil {
			r.SyncTargetChanged(inv, name)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { changed(obj) },
		UpdateFunc: func(old, obj any) {
			// Status updates (heartbeats) come often and change no UID.
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := obj.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetUID() == n.GetUID() {
				return
			}
			changed(obj)
		},
		DeleteFunc: changed,
	}
}
