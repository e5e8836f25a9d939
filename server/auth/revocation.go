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
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/principal"
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
	now        func() time.Time

	mu      sync.Mutex
	live    map[liveKey]*liveToken
	nextReq uint64
	// pending are tokens to check again, by id; pendingTargets are
	// SyncTargets ("inventory/name") whose tokens to check again.
	pending        map[string]bool
	pendingTargets map[string]bool
	wake           chan struct{}
}

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
	return &Revoker{stillValid: stillValid, now: time.Now, live: map[liveKey]*liveToken{},
		pending: map[string]bool{}, pendingTargets: map[string]bool{}, wake: make(chan struct{}, 1)}
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
		r.poke() // the timer may have to fire sooner
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
func (r *Revoker) TokenChanged(tokenID string) {
	r.mu.Lock()
	r.pending[tokenID] = true
	r.mu.Unlock()
	r.poke()
}

// SyncTargetChanged asks for the tokens of a SyncTarget to be checked again.
func (r *Revoker) SyncTargetChanged(inventorySpace, name string) {
	r.mu.Lock()
	r.pendingTargets[inventorySpace+"/"+name] = true
	r.mu.Unlock()
	r.poke()
}

func (r *Revoker) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run checks tokens again as asked, and as they expire, until ctx is done.
func (r *Revoker) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
		next := r.CheckPending(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			// A moment past the expiration: the token is expired by then.
			wait = min(wait, max(next.Sub(r.now())+10*time.Millisecond, 0))
		}
		timer.Reset(wait)
	}
}

// CheckPending checks the tokens asked for, and those expired by now; it
// ends the requests of those that no longer authenticate and returns the
// next expiration of a token with requests open (zero for none).
func (r *Revoker) CheckPending(ctx context.Context) time.Time {
	now := r.now()
	r.mu.Lock()
	var check []liveKey
	for key, lt := range r.live {
		if r.pending[key.tokenID] || r.pendingTargets[lt.syncTarget] || (!lt.expires.IsZero() && !now.Before(lt.expires)) {
			check = append(check, key)
		}
	}
	r.pending, r.pendingTargets = map[string]bool{}, map[string]bool{}
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

	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	for _, lt := range r.live {
		if !lt.expires.IsZero() && (next.IsZero() || lt.expires.Before(next)) {
			next = lt.expires
		}
	}
	return next
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
