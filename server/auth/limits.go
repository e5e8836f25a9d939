// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/internal/principal"
)

// SyncerLimits bound what one syncer identity (one SyncTarget, whatever
// the number of its tokens and connections) may ask of the server, so that
// a compromised edge cannot starve the others or grow the server's memory
// with requests: a rate, and how many requests it may have open at once,
// long-running ones (watches, the tunnel, logs, exec) counted apart.
type SyncerLimits struct {
	// QPS and Burst bound the rate of requests (a token bucket).
	QPS   float64
	Burst int
	// MaxInFlight bounds the requests in progress that are not long-running.
	MaxInFlight int
	// MaxLongRunning bounds the open watches, tunnels and streams.
	MaxLongRunning int
}

// DefaultSyncerLimits leave an honest syncer room: it asks at most 100
// requests/s (burst 200) and opens one watch per resource it syncs.
var DefaultSyncerLimits = SyncerLimits{QPS: 200, Burst: 400, MaxInFlight: 64, MaxLongRunning: 256}

// WithSyncerLimits refuses, with 429 and a Retry-After, a syncer's request
// beyond its limits; other identities pass untouched. longRunning tells
// long-running requests (the server's LongRunningFunc). It goes after
// authentication and the RequestInfo filter.
func WithSyncerLimits(handler http.Handler, limits SyncerLimits, longRunning func(*http.Request, *request.RequestInfo) bool) http.Handler {
	l := &limiter{limits: limits, byIdentity: map[string]*identityLimits{}}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, _ := request.UserFrom(req.Context())
		inv, st, ok := principal.SyncTargetOf(u)
		if !ok {
			handler.ServeHTTP(w, req)
			return
		}
		info, _ := request.RequestInfoFrom(req.Context())
		long := info != nil && longRunning != nil && longRunning(req, info)
		release, refusal := l.admit(inv+"/"+st, long)
		if refusal != "" {
			w.Header().Set("Retry-After", strconv.Itoa(1))
			writeError(w, apierrors.NewTooManyRequests(fmt.Sprintf("the syncer of SyncTarget %s/%s %s", inv, st, refusal), 1))
			return
		}
		defer release()
		handler.ServeHTTP(w, req)
	})
}

type limiter struct {
	limits     SyncerLimits
	mu         sync.Mutex
	byIdentity map[string]*identityLimits
}

// identityLimits are one identity's counters. An entry lives as long as
// its identity has requests open or has spent tokens recently; identities
// are SyncTargets, so the map is bounded by them.
type identityLimits struct {
	rate        *rate.Limiter
	inFlight    int
	longRunning int
}

// admit counts a request in, or says why not; release counts it out.
func (l *limiter) admit(identity string, long bool) (release func(), refusal string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.byIdentity[identity]
	if id == nil {
		id = &identityLimits{rate: rate.NewLimiter(rate.Limit(l.limits.QPS), l.limits.Burst)}
		l.byIdentity[identity] = id
	}
	if !id.rate.Allow() {
		return nil, fmt.Sprintf("sends more than %g requests/s (burst %d)", l.limits.QPS, l.limits.Burst)
	}
	counter, limit, what := &id.inFlight, l.limits.MaxInFlight, "requests in progress"
	if long {
		counter, limit, what = &id.longRunning, l.limits.MaxLongRunning, "watches and streams open"
	}
	if *counter >= limit {
		return nil, fmt.Sprintf("has %d %s, the most it may", limit, what)
	}
	*counter++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		*counter--
		if id.inFlight == 0 && id.longRunning == 0 && id.rate.Tokens() >= float64(l.limits.Burst) {
			delete(l.byIdentity, identity)
		}
	}, ""
}
