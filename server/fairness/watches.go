// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package fairness

import (
	"context"
	"net/http"
	"sync"

	"k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/kubestellar/kubestellar/spaces"
)

// APF charges a write for the watches that may see it: its work estimate
// holds one more seat for each ten watches of the written resource, for
// 5 ms each, after the write (Kubernetes' mutating work estimator). APF's
// own watch tracker counts watches by resource, namespace and name, which
// on this server would count every space's: with 1,000 syncers each
// watching the ConfigMaps of its mailbox, each ConfigMap write anywhere,
// a tenant's or a syncer's report on a copy, was charged for 1,000
// watches and held its level's every seat for a quarter of a second. A
// write in a space is seen only by the watches of that space and those
// of every space at once (the wildcard), so that is what watchCounts
// counts: APF's rule (the resource's watches in every namespace, in the
// write's namespace, and of the written object) within the write's space
// and the wildcard.

// watchKey is what a watch is counted under.
type watchKey struct {
	space, group, resource, namespace, name string
}

// watchCounts counts the watches open on the server by space.
type watchCounts struct {
	mu     sync.Mutex
	counts map[watchKey]int
}

func newWatchCounts() *watchCounts { return &watchCounts{counts: map[watchKey]int{}} }

// register counts a watch in space; the function it returns forgets it.
func (w *watchCounts) register(space string, ri *request.RequestInfo) func() {
	k := watchKey{space: space, group: ri.APIGroup, resource: ri.Resource, namespace: ri.Namespace, name: ri.Name}
	w.mu.Lock()
	w.counts[k]++
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.counts[k]--; w.counts[k] <= 0 {
				delete(w.counts, k)
			}
		})
	}
}

// interested is how many watches may see a write of ri's in space.
func (w *watchCounts) interested(space string, ri *request.RequestInfo) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, sp := range []string{space, spaces.Wildcard} {
		k := watchKey{space: sp, group: ri.APIGroup, resource: ri.Resource}
		n += w.counts[k]
		if ri.Namespace != "" {
			k.namespace = ri.Namespace
			n += w.counts[k]
		}
		if ri.Name != "" {
			k.name = ri.Name
			n += w.counts[k]
		}
		if space == spaces.Wildcard {
			break
		}
	}
	return n
}

// RegisterWatch counts a watch in its space (APF calls it for every watch
// it lets through).
func (s *spaceFlows) RegisterWatch(r *http.Request) utilflowcontrol.ForgetWatchFunc {
	ri, ok := request.RequestInfoFrom(r.Context())
	if !ok || ri == nil || ri.Verb != "watch" {
		return nil
	}
	return s.watches.register(s.spaceOf(r.Context()), ri)
}

// GetInterestedWatchCount is how many watches may see a write: APF's work
// estimator asks it with the request's RequestInfo alone, so the space
// comes from the requests in Handle (inflight), which is where APF asks.
func (s *spaceFlows) GetInterestedWatchCount(ri *request.RequestInfo) int {
	if ri == nil {
		return 0
	}
	switch ri.Verb {
	case "get", "list", "watch":
		return 0
	}
	space := s.spaceOf(context.Background()) // no space: the root's
	if v, ok := s.inflight.Load(ri); ok {
		space = v.(string)
	}
	return s.watches.interested(space, ri)
}
