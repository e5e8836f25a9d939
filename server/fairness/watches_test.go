// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package fairness

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

func TestWatchesAreCountedBySpace(t *testing.T) {
	w := newWatchCounts()
	cm := func(verb, namespace, name string) *request.RequestInfo {
		return &request.RequestInfo{Verb: verb, Resource: "configmaps", Namespace: namespace, Name: name}
	}
	var forget []func()
	for range 30 {
		forget = append(forget, w.register("fleet", cm("watch", "", "")))
	}
	for range 5 {
		forget = append(forget, w.register("fleet", cm("watch", "x", "")))
	}
	forget = append(forget, w.register("fleet", cm("watch", "x", "y")))
	forget = append(forget, w.register("fleet", cm("watch", "z", "")))
	for range 2 {
		forget = append(forget, w.register(spaces.Wildcard, cm("watch", "", "")))
	}
	forget = append(forget, w.register("fleet", &request.RequestInfo{Verb: "watch", APIGroup: "apps", Resource: "deployments"}))

	for _, c := range []struct {
		space string
		ri    *request.RequestInfo
		want  int
	}{
		// Every namespace's, the write's namespace's, the object's, and the
		// wildcard's: not another namespace's.
		{"fleet", cm("create", "x", ""), 30 + 5 + 2},
		{"fleet", cm("update", "x", "y"), 30 + 5 + 1 + 2},
		{"fleet", cm("update", "x", "other"), 30 + 5 + 2},
		// Another space sees only the wildcard's.
		{"tenant", cm("create", "x", ""), 2},
		{"tenant", cm("update", "x", "y"), 2},
		// Another resource (an API group apart).
		{"fleet", &request.RequestInfo{Verb: "create", Resource: "deployments", Namespace: "x"}, 0},
		{"fleet", &request.RequestInfo{Verb: "create", APIGroup: "apps", Resource: "deployments", Namespace: "x"}, 1},
	} {
		require.Equal(t, c.want, w.interested(c.space, c.ri), "%s %s in %s", c.ri.Verb, c.ri.Resource, c.space)
	}
	for _, f := range forget {
		f()
		f() // forgetting twice forgets once
	}
	require.Empty(t, w.counts, "every watch forgotten")
}

// estimating is the APF controller's place: it asks for the work
// estimate, as APF does before queueing a request, and keeps it.
type estimating struct {
	utilflowcontrol.Interface
	got fcrequest.WorkEstimate
}

func (e *estimating) Handle(_ context.Context, _ utilflowcontrol.RequestDigest,
	_ func(*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration, string),
	workEstimator func() fcrequest.WorkEstimate, _ fq.QueueNoteFn, execFn func()) {
	e.got = workEstimator()
	execFn()
}

// TestAWriteIsChargedForItsSpacesWatches drives Kubernetes' own work
// estimator through Handle, as the server's handler chain does: a write
// in a space with a hundred watches of its resource is charged for them
// (more seats, held longer), and the same write in another space is not.
func TestAWriteIsChargedForItsSpacesWatches(t *testing.T) {
	inner := &estimating{}
	flows := &spaceFlows{Interface: inner, reserve: newReserve(), watches: newWatchCounts(),
		flowSchemas: flowcontrollisters.NewFlowSchemaLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		levels:      flowcontrollisters.NewPriorityLevelConfigurationLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		spaceOf:     func(ctx context.Context) string { s, _ := ctx.Value(spaceKey{}).(string); return s }}
	estimator := fcrequest.NewWorkEstimator(func(string) (storage.Stats, error) { return storage.Stats{}, nil }, flows.GetInterestedWatchCount,
		fcrequest.DefaultWorkEstimatorConfig(), func(string) uint64 { return 10 })

	newRequest := func(space, verb string) *http.Request {
		ctx := context.WithValue(context.Background(), spaceKey{}, space)
		ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Verb: verb, APIVersion: "v1", Resource: "configmaps", Namespace: "x"})
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/namespaces/x/configmaps", nil)
		require.NoError(t, err)
		return r
	}
	for range 100 {
		forget := flows.RegisterWatch(newRequest("fleet", "watch"))
		require.NotNil(t, forget)
		defer forget()
	}
	require.Nil(t, flows.RegisterWatch(newRequest("fleet", "create")), "only watches are counted")

	estimate := func(space string) fcrequest.WorkEstimate {
		r := newRequest(space, "create")
		ri, _ := request.RequestInfoFrom(r.Context())
		u := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
		ran := false
		flows.Handle(r.Context(), utilflowcontrol.RequestDigest{RequestInfo: ri, User: u}, func(*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration, string) {},
			func() fcrequest.WorkEstimate { return estimator(r, "fs", "pl") }, nil, func() { ran = true })
		require.True(t, ran)
		return inner.got
	}
	fleet, tenant := estimate("fleet"), estimate("tenant")
	require.Positive(t, fleet.AdditionalLatency, "a write among 100 watches is charged for them")
	require.Greater(t, fleet.FinalSeats, uint64(1))
	require.Zero(t, tenant.AdditionalLatency, "no watch of the tenant's space sees its write")
	require.Zero(t, tenant.FinalSeats)
	flows.inflight.Range(func(k, _ any) bool { t.Errorf("a request's space is kept after it: %v", k); return true })
}
