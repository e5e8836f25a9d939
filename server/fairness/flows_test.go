// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package fairness

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
)

// recorder is the APF controller's place: it keeps the digest it is given.
type recorder struct {
	utilflowcontrol.Interface
	got utilflowcontrol.RequestDigest
}

func (r *recorder) Handle(_ context.Context, digest utilflowcontrol.RequestDigest,
	_ func(*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration, string),
	_ func() fcrequest.WorkEstimate, _ fq.QueueNoteFn, execFn func()) {
	r.got = digest
	execFn()
}

type spaceKey struct{}

func TestFlowsAreToldApartBySpace(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	named := everything("named", 100, "slow", "nobody")
	named.Spec.Rules[0].Subjects = []flowcontrolv1.Subject{
		{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "bob"}},
		{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: flowcontrolv1.NameAll}},
		{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "ci", Name: flowcontrolv1.NameAll}},
		{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "ops", Name: "deployer"}},
	}
	for _, fs := range append(FlowSchemas(), named, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}) {
		require.NoError(t, indexer.Add(fs))
	}
	inner := &recorder{}
	flows := &spaceFlows{Interface: inner, flowSchemas: flowcontrollisters.NewFlowSchemaLister(indexer), reserve: newReserve(),
		levels:  flowcontrollisters.NewPriorityLevelConfigurationLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		spaceOf: func(ctx context.Context) string { s, _ := ctx.Value(spaceKey{}).(string); return s }}

	for _, c := range []struct {
		space, user, want string
	}{
		{"team-a", "alice", "team-a/alice"},
		{"team-b", "alice", "team-b/alice"},
		{"team-a", "system:serviceaccount:default:deployer", "team-a/system:serviceaccount:default:deployer"},
		// Named by a schema: the schema must still match them.
		{"team-a", "bob", "bob"},
		{"team-a", "system:serviceaccount:ci:builder", "system:serviceaccount:ci:builder"},
		{"team-a", "system:serviceaccount:ops:deployer", "system:serviceaccount:ops:deployer"},
		{"team-a", "system:serviceaccount:ops:other", "team-a/system:serviceaccount:ops:other"},
		// No space: as the request came.
		{"", "alice", "alice"},
	} {
		ctx := context.WithValue(context.Background(), spaceKey{}, c.space)
		u := &user.DefaultInfo{Name: c.user, UID: "u1", Groups: []string{"team", user.AllAuthenticated}, Extra: map[string][]string{"k": {"v"}}}
		ran := false
		flows.Handle(ctx, utilflowcontrol.RequestDigest{RequestInfo: &request.RequestInfo{Verb: "create"}, User: u}, nil, nil, nil, func() { ran = true })
		require.True(t, ran, "the request runs")
		require.Equal(t, c.want, inner.got.User.GetName(), "%s in %q", c.user, c.space)
		require.Equal(t, u.Groups, inner.got.User.GetGroups(), "groups are kept: schemas match them")
		require.Equal(t, "u1", inner.got.User.GetUID())
		require.Equal(t, "create", inner.got.RequestInfo.Verb)
	}
}

func TestDefaultConfiguration(t *testing.T) {
	levels := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range PriorityLevels() {
		levels[pl.Name] = pl
	}
	names := map[string]bool{}
	for _, fs := range FlowSchemas() {
		require.False(t, names[fs.Name], "one schema per name: %s", fs.Name)
		names[fs.Name] = true
		require.Contains(t, levels, fs.Spec.PriorityLevelConfiguration.Name, "schema %s refers to a level the server keeps", fs.Name)
	}
	for _, name := range []string{"exempt", "catch-all"} {
		require.True(t, names[name] && levels[name] != nil && Mandatory(name), name)
	}
	require.False(t, Mandatory(Tenants))
	require.Equal(t, int32(0), *levels["global-default"].Spec.Limited.LendablePercent, "anonymous requests keep their seats")
	tenants := levels[Tenants].Spec.Limited
	require.Equal(t, int32(0), *tenants.LendablePercent, "tenants lend nothing away")
	require.Equal(t, int32(0), *tenants.BorrowingLimitPercent, "and borrow nothing: a flood executes no more at once")
	require.Greater(t, tenants.LimitResponse.Queuing.Queues, tenants.LimitResponse.Queuing.HandSize, "shuffle sharding over many queues")
}
