// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
)

// fakeTokens is what StillValid would say, per token id, by the clock
// the Revoker's queue uses.
type fakeTokens struct {
	mu      sync.Mutex
	expires map[string]time.Time
	invalid map[string]error
	clock   clock.Clock
	checks  int
}

func (f *fakeTokens) stillValid(id string, _ types.UID) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	if err := f.invalid[id]; err != nil {
		return time.Time{}, err
	}
	if exp := f.expires[id]; !exp.IsZero() && !f.clock.Now().Before(exp) {
		return exp, fmt.Errorf("syncer token %s expired", id)
	}
	return f.expires[id], nil
}

func (f *fakeTokens) revoke(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.invalid[id] = fmt.Errorf("syncer token %s was revoked", id)
}

func newFakeRevoker(clk clock.WithTicker) (*Revoker, *fakeTokens) {
	f := &fakeTokens{expires: map[string]time.Time{}, invalid: map[string]error{}, clock: clk}
	return newRevoker(f.stillValid, clk), f
}

// drain checks, in the calling goroutine, every key the Revoker's queue
// holds now, as Run's worker would.
func drain(ctx context.Context, r *Revoker) {
	for r.queue.Len() > 0 {
		k, _ := r.queue.Get()
		r.check(ctx, k)
		r.queue.Done(k)
	}
}

func ended(ctx context.Context) bool { return ctx.Err() != nil }

func TestRevoker(t *testing.T) {
	edge1 := principal.SyncerTokenUser("inv1", "edge1", "aaaaaa", "uid-1")
	edge1Again := principal.SyncerTokenUser("inv1", "edge1", "bbbbbb", "uid-1") // another token of edge1
	edge2 := principal.SyncerTokenUser("inv1", "edge2", "cccccc", "uid-2")

	for _, tc := range []struct {
		desc string
		// change makes a token stop authenticating and tells the revoker.
		change    func(t *testing.T, r *Revoker, f *fakeTokens)
		wantEnded []bool // edge1, edge1Again, edge2
		wantCause string
	}{
		{desc: "nothing changed", change: func(_ *testing.T, r *Revoker, _ *fakeTokens) { r.TokenChanged("aaaaaa") }, wantEnded: []bool{false, false, false}},
		{desc: "token revoked", change: func(_ *testing.T, r *Revoker, f *fakeTokens) { f.revoke("aaaaaa"); r.TokenChanged("aaaaaa") },
			wantEnded: []bool{true, false, false}, wantCause: "syncer token aaaaaa was revoked"},
		{desc: "revoked, but not said so", change: func(_ *testing.T, _ *Revoker, f *fakeTokens) { f.revoke("aaaaaa") }, wantEnded: []bool{false, false, false}},
		{desc: "SyncTarget deleted", change: func(_ *testing.T, r *Revoker, f *fakeTokens) {
			f.invalid["aaaaaa"], f.invalid["bbbbbb"] = errors.New("gone"), errors.New("gone")
			r.SyncTargetChanged("inv1", "edge1")
		}, wantEnded: []bool{true, true, false}, wantCause: "gone"},
		{desc: "another SyncTarget deleted", change: func(_ *testing.T, r *Revoker, f *fakeTokens) {
			f.invalid["aaaaaa"] = errors.New("gone")
			r.SyncTargetChanged("inv1", "edge2")
		}, wantEnded: []bool{false, false, false}},
		{desc: "token expired", change: func(t *testing.T, r *Revoker, f *fakeTokens) {
			// The check queued for its expiration comes due.
			f.clock.(*testingclock.FakeClock).SetTime(f.expires["cccccc"].Add(time.Second))
			require.NoError(t, wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return r.queue.Len() > 0, nil
			}), "the expiration's check is queued")
		}, wantEnded: []bool{false, false, true}, wantCause: "syncer token cccccc expired"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, f := newFakeRevoker(testingclock.NewFakeClock(testNow))
			defer r.queue.ShutDown()
			f.expires["cccccc"] = testNow.Add(time.Minute)
			var ctxs []context.Context
			for _, u := range []user.Info{edge1, edge1Again, edge2} {
				ctx, done := r.Track(t.Context(), u)
				defer done()
				ctxs = append(ctxs, ctx)
			}
			require.Zero(t, r.queue.Len(), "the expiration is a check queued for later")
			tc.change(t, r, f)
			drain(t.Context(), r)
			for i, ctx := range ctxs {
				require.Equal(t, tc.wantEnded[i], ended(ctx), "request %d", i)
				if ended(ctx) {
					require.ErrorContains(t, context.Cause(ctx), tc.wantCause)
				}
			}
		})
	}

	t.Run("not a syncer with a token", func(t *testing.T) {
		r, f := newFakeRevoker(testingclock.NewFakeClock(testNow))
		for _, u := range []user.Info{AdminInfo(), principal.SyncerUser("inv1", "edge1"), &user.DefaultInfo{Name: "alice"}} {
			ctx, done := r.Track(t.Context(), u)
			require.Equal(t, t.Context(), ctx, "left alone")
			done()
		}
		require.Zero(t, f.checks)
	})
	t.Run("revoked before it was tracked", func(t *testing.T) {
		r, f := newFakeRevoker(testingclock.NewFakeClock(testNow))
		f.revoke("aaaaaa")
		ctx, done := r.Track(t.Context(), edge1)
		defer done()
		require.True(t, ended(ctx), "a revocation between authentication and tracking")
		require.ErrorContains(t, context.Cause(ctx), "revoked")
	})
	t.Run("done forgets the request", func(t *testing.T) {
		r, _ := newFakeRevoker(testingclock.NewFakeClock(testNow))
		_, done1 := r.Track(t.Context(), edge1)
		ctx2, done2 := r.Track(t.Context(), edge1)
		require.Equal(t, 2, r.Live("aaaaaa"))
		done1()
		require.Equal(t, 1, r.Live("aaaaaa"))
		require.False(t, ended(ctx2))
		done2()
		require.Zero(t, r.Live("aaaaaa"))
		require.True(t, ended(ctx2), "its context ends with it")
	})
}

// TestRevokerRun: the informers' events reach Run, which ends the
// requests of the token (here a request held open, as a watch is).
func TestRevokerRun(t *testing.T) {
	r, f := newFakeRevoker(clock.RealClock{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.Run(ctx)

	started := make(chan struct{}, 4)
	h := WithSyncerRequests(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		started <- struct{}{}
		<-req.Context().Done() // a watch ends with its request
		w.WriteHeader(http.StatusGone)
	}), r)
	serve := func(u user.Info) <-chan int {
		out := make(chan int, 1)
		go func() {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/configmaps?watch=true", nil)
			req = req.WithContext(request.WithUser(req.Context(), u))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			out <- rec.Code
		}()
		<-started
		return out
	}
	waitEnd := func(out <-chan int, what string) {
		t.Helper()
		select {
		case code := <-out:
			require.Equal(t, http.StatusGone, code)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the request did not end; open: %d", what, r.Live("aaaaaa"))
		}
	}
	stillOpen := func(out <-chan int, what string) {
		t.Helper()
		select {
		case <-out:
			t.Fatalf("%s: the request ended", what)
		default:
		}
	}

	// Token Secret deleted.
	w1 := serve(principal.SyncerTokenUser("inv1", "edge1", "aaaaaa", "uid-1"))
	other := serve(principal.SyncerTokenUser("inv1", "edge2", "cccccc", "uid-2"))
	f.revoke("aaaaaa")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: TokenSecretName("aaaaaa"), Namespace: TokenNamespace}}
	r.TokenSecretHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: secret})
	waitEnd(w1, "revoked")
	stillOpen(other, "another token")

	// SyncTarget made again: the update that changes the UID is heard, a
	// status update is not.
	w2 := serve(principal.SyncerTokenUser("inv1", "edge3", "dddddd", "uid-3"))
	st := func(uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName("edge3")
		u.SetUID(types.UID(uid))
		u.SetAnnotations(map[string]string{spaces.Annotation: "inv1"})
		return u
	}
	f.mu.Lock()
	f.invalid["dddddd"] = errors.New("made again")
	f.mu.Unlock()
	r.SyncTargetHandler().OnUpdate(st("uid-3"), st("uid-3"))
	require.Zero(t, r.queue.Len(), "a status update asks for no check")
	stillOpen(w2, "a status update")
	r.SyncTargetHandler().OnUpdate(st("uid-3"), st("uid-4"))
	waitEnd(w2, "made again")

	// Expired: Run's timer.
	f.mu.Lock()
	f.expires["eeeeee"] = time.Now().Add(200 * time.Millisecond)
	f.mu.Unlock()
	w3 := serve(principal.SyncerTokenUser("inv1", "edge4", "eeeeee", "uid-5"))
	waitEnd(w3, "expired")
	stillOpen(other, "another token")
}
