// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
)

// Watches counts the watches open in each space on this server.
type Watches struct {
	mu   sync.Mutex
	open map[string]int64
}

// Open returns how many watches are open in space.
func (w *Watches) Open(space string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open[space]
}

// admit counts a watch in space in, unless that would pass limit; release
// counts it out.
func (w *Watches) admit(space string, limit int64) (release func(), open int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open == nil {
		w.open = map[string]int64{}
	}
	open = w.open[space]
	if limit != 0 && open >= limit {
		return nil, open, false
	}
	w.open[space] = open + 1
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.open[space]--; w.open[space] <= 0 {
			delete(w.open, space)
		}
	}, open, true
}

// WithWatchLimits answers 429, with a Retry-After, a watch in a governed
// space that already has as many watches open on this server as its limit.
// In the root space, where every user may watch the Spaces it sees, each
// bounded user (a ServiceAccount with its space) has that many of its own.
// It goes after authentication and the RequestInfo filter.
func WithWatchLimits(handler http.Handler, watches *Watches, limits func(space string) (Limits, error), governed func(space string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		info, _ := request.RequestInfoFrom(ctx)
		u, _ := request.UserFrom(ctx)
		space, inSpace := spaces.FromContext(ctx)
		if !inSpace {
			space = spaces.Root
		}
		if info == nil || info.Verb != "watch" || !Bounded(u) || (space != spaces.Root && !governed(space)) {
			handler.ServeHTTP(w, req)
			return
		}
		l, err := limits(space)
		if err != nil {
			status := apierrors.NewServiceUnavailable(fmt.Sprintf("reading the limits of space %q: %v", space, err)).Status()
			status.Kind, status.APIVersion = "Status", "v1"
			responsewriters.WriteRawJSON(http.StatusServiceUnavailable, status, w)
			return
		}
		key, who := space, fmt.Sprintf("space %q", space)
		if space == spaces.Root {
			name := u.GetName()
			if home := u.GetExtra()[principal.ExtraSpace]; len(home) == 1 {
				name += " of space " + home[0]
			}
			key, who = "root\x00"+name, fmt.Sprintf("user %q in the root space", name)
		}
		release, open, ok := watches.admit(key, l.Watches.Value)
		if !ok {
			status := apierrors.NewTooManyRequests(fmt.Sprintf("%s has %d watches open on this server, its limit (%s): end watches it does not need, or ask the server's admin to raise the limit (a SpaceQuota in the root space)",
				who, open, l.Watches), 1).Status()
			status.Kind, status.APIVersion = "Status", "v1"
			w.Header().Set("Retry-After", strconv.Itoa(1))
			responsewriters.WriteRawJSON(int(status.Code), status, w)
			return
		}
		defer release()
		handler.ServeHTTP(w, req)
	})
}
