// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
)

// stubAuthz allows what its allow function says, denies the rest with a
// reason naming the space, and records what it was asked.
type stubAuthz struct {
	allow func(space string, a authorizer.Attributes) bool
	err   error
	rules []authorizer.ResourceRuleInfo
	asked []authorizer.Attributes
}

func (s *stubAuthz) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	s.asked = append(s.asked, a)
	space := spaces.SpaceOrRoot(ctx)
	if s.allow != nil && s.allow(space, a) {
		return authorizer.DecisionAllow, "", s.err
	}
	return authorizer.DecisionDeny, "no access to space " + space, s.err
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: its decisions
// carry no conditions, so it answers as Authorize does (a wrapper must not
// let the wrapped authorizer's answer through unchanged).
func (s *stubAuthz) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(s.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: no decision of its
// has conditions to evaluate.
func (*stubAuthz) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func (s *stubAuthz) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	space := spaces.SpaceOrRoot(ctx)
	if u.GetName() != "alice" || space != "team-a" {
		return nil, nil, false, s.err
	}
	return s.rules, []authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: []string{"/api/*"}}}, true, s.err
}

// aliceMayGetConfigMaps lets alice get ConfigMaps in space team-a.
func aliceMayGetConfigMaps(space string, a authorizer.Attributes) bool {
	return space == "team-a" && a.GetUser() != nil && a.GetUser().GetName() == "alice" && a.IsResourceRequest() &&
		a.GetVerb() == "get" && a.GetAPIGroup() == "" && a.GetResource() == "configmaps"
}

var alice = &user.DefaultInfo{Name: "alice", Groups: []string{"team-a", user.AllAuthenticated}}

func asUser(space string, u user.Info) context.Context {
	return genericapirequest.WithUser(spaces.WithSpace(context.Background(), space), u)
}

func configMapAttributes(verb string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: verb, Resource: "configmaps", Namespace: "default"}
}

// recordValidation is a createValidation that records what it saw.
type recordValidation struct {
	seen []runtime.Object
	err  error
}

func (v *recordValidation) validate(_ context.Context, obj runtime.Object) error {
	v.seen = append(v.seen, obj)
	return v.err
}

func TestSelfSubjectAccessReview(t *testing.T) {
	tests := []struct {
		desc string
		ctx  context.Context
		spec authorizationv1.SelfSubjectAccessReviewSpec
		meta metav1.ObjectMeta
		err  error
		// want is the status; wantCode, when set, the error's HTTP code.
		want     authorizationv1.SubjectAccessReviewStatus
		wantCode int32
	}{
		{desc: "allowed in its space", ctx: asUser("team-a", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")},
			want: authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{desc: "denied another verb", ctx: asUser("team-a", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("delete")},
			want: authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "no access to space team-a"}},
		{desc: "denied in another space", ctx: asUser("team-b", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")},
			want: authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "no access to space team-b"}},
		{desc: "denied another user", ctx: asUser("team-a", &user.DefaultInfo{Name: "bob"}), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")},
			want: authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "no access to space team-a"}},
		{desc: "non-resource URL", ctx: asUser("team-a", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/healthz"}},
			want: authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "no access to space team-a"}},
		{desc: "authorizer error", ctx: asUser("team-a", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")}, err: errors.New("cache not synced"),
			want: authorizationv1.SubjectAccessReviewStatus{Allowed: true, EvaluationError: "cache not synced"}},
		{desc: "unparsable label selector", ctx: asUser("team-a", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: func() *authorizationv1.ResourceAttributes {
			a := configMapAttributes("get")
			a.LabelSelector = &authorizationv1.LabelSelectorAttributes{RawSelector: "a in (b"}
			return a
		}()}, want: authorizationv1.SubjectAccessReviewStatus{Allowed: true, EvaluationError: "spec.resourceAttributes.labelSelector ignored: "}},
		{desc: "both attributes", ctx: asUser("team-a", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get"),
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/api"}}, wantCode: 422},
		{desc: "no attributes", ctx: asUser("team-a", alice), wantCode: 422},
		{desc: "metadata", ctx: asUser("team-a", alice), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")},
			meta: metav1.ObjectMeta{Name: "mine"}, wantCode: 422},
		{desc: "no user", ctx: spaces.WithSpace(context.Background(), "team-a"), spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")}, wantCode: 400},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			authz := &stubAuthz{allow: aliceMayGetConfigMaps, err: tc.err}
			storage := newSelfSubjectAccessReviewREST(authz)
			validation := &recordValidation{}
			in := &authorizationv1.SelfSubjectAccessReview{ObjectMeta: tc.meta, Spec: tc.spec}
			out, err := storage.Create(tc.ctx, in, validation.validate, &metav1.CreateOptions{})
			if tc.wantCode != 0 {
				require.Error(t, err)
				require.Equal(t, tc.wantCode, apiStatusCode(t, err), err.Error())
				require.Empty(t, authz.asked, "an invalid review asks nothing")
				require.Empty(t, validation.seen, "an invalid review is not admitted")
				return
			}
			require.NoError(t, err)
			review := out.(*authorizationv1.SelfSubjectAccessReview)
			if tc.want.EvaluationError != "" {
				require.Contains(t, review.Status.EvaluationError, tc.want.EvaluationError)
				review.Status.EvaluationError = tc.want.EvaluationError
			}
			require.Equal(t, tc.want, review.Status)
			require.Equal(t, tc.spec, review.Spec, "the question comes back with its answer")
			require.Len(t, validation.seen, 1, "admission sees every review")
			require.Len(t, authz.asked, 1)
			u, _ := genericapirequest.UserFrom(tc.ctx)
			require.Equal(t, u, authz.asked[0].GetUser(), "the requester is the subject")
		})
	}
}

func TestAccessReviewAttributes(t *testing.T) {
	authz := &stubAuthz{}
	storage := newSelfSubjectAccessReviewREST(authz)
	_, err := storage.Create(asUser("team-a", alice), &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "patch", Group: "edge.kubestellar.io", Resource: "synctargets", Subresource: "status", Name: "edge1",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{{Key: "metadata.name", Operator: metav1.FieldSelectorOpIn, Values: []string{"edge1"}}}}},
	}}, nil, &metav1.CreateOptions{})
	require.NoError(t, err)
	require.Len(t, authz.asked, 1)
	a := authz.asked[0]
	require.True(t, a.IsResourceRequest())
	require.Equal(t, []string{"patch", "edge.kubestellar.io", "*", "synctargets", "status", "edge1"},
		[]string{a.GetVerb(), a.GetAPIGroup(), a.GetAPIVersion(), a.GetResource(), a.GetSubresource(), a.GetName()}, "an empty version means any")
	reqs, err := a.GetFieldSelector()
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, "metadata.name=edge1", reqs[0].Field+string(reqs[0].Operator)+reqs[0].Value)

	// A createValidation refusal (admission) is the answer, and the
	// authorizer is not asked.
	authz.asked = nil
	refused := &recordValidation{err: apierrors.NewForbidden(authorizationv1.Resource("selfsubjectaccessreviews"), "", errors.New("admission says no"))}
	_, err = storage.Create(asUser("team-a", alice), &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")}},
		refused.validate, &metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.Empty(t, authz.asked)
}

func TestSubjectAccessReviews(t *testing.T) {
	bobSpec := authorizationv1.SubjectAccessReviewSpec{User: "alice", Groups: []string{"team-a"}, Extra: map[string]authorizationv1.ExtraValue{"k": {"v"}},
		ResourceAttributes: configMapAttributes("get")}
	tests := []struct {
		desc     string
		storage  *AccessReviewREST
		ctx      context.Context
		obj      runtime.Object
		want     authorizationv1.SubjectAccessReviewStatus
		wantCode int32
	}{
		{desc: "SubjectAccessReview allowed", storage: newSubjectAccessReviewREST(nil), ctx: asUser("team-a", auth.AdminInfo()),
			obj: &authorizationv1.SubjectAccessReview{Spec: bobSpec}, want: authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{desc: "SubjectAccessReview in another space", storage: newSubjectAccessReviewREST(nil), ctx: asUser("team-b", auth.AdminInfo()),
			obj: &authorizationv1.SubjectAccessReview{Spec: bobSpec}, want: authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "no access to space team-b"}},
		{desc: "SubjectAccessReview without subject", storage: newSubjectAccessReviewREST(nil), ctx: asUser("team-a", auth.AdminInfo()),
			obj: &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: configMapAttributes("get")}}, wantCode: 422},
		{desc: "LocalSubjectAccessReview allowed", storage: newLocalSubjectAccessReviewREST(nil), ctx: genericapirequest.WithNamespace(asUser("team-a", auth.AdminInfo()), "default"),
			obj: &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: bobSpec}, want: authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{desc: "LocalSubjectAccessReview about another namespace", storage: newLocalSubjectAccessReviewREST(nil), ctx: genericapirequest.WithNamespace(asUser("team-a", auth.AdminInfo()), "other"),
			obj: &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "other"}, Spec: bobSpec}, wantCode: 422},
		{desc: "LocalSubjectAccessReview of a non-resource URL", storage: newLocalSubjectAccessReviewREST(nil), ctx: genericapirequest.WithNamespace(asUser("team-a", auth.AdminInfo()), "default"),
			obj: &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice",
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/api"}}}, wantCode: 422},
		{desc: "LocalSubjectAccessReview without a namespace", storage: newLocalSubjectAccessReviewREST(nil), ctx: asUser("team-a", auth.AdminInfo()),
			obj: &authorizationv1.LocalSubjectAccessReview{Spec: bobSpec}, wantCode: 400},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			authz := &stubAuthz{allow: aliceMayGetConfigMaps}
			tc.storage.authz = authz
			validation := &recordValidation{}
			out, err := tc.storage.Create(tc.ctx, tc.obj, validation.validate, &metav1.CreateOptions{})
			if tc.wantCode != 0 {
				require.Error(t, err)
				require.Equal(t, tc.wantCode, apiStatusCode(t, err), err.Error())
				require.Empty(t, authz.asked)
				return
			}
			require.NoError(t, err)
			require.Len(t, validation.seen, 1)
			status := reflect.ValueOf(out).Elem().FieldByName("Status").Interface().(authorizationv1.SubjectAccessReviewStatus)
			require.Equal(t, tc.want, status)
			require.Len(t, authz.asked, 1)
			subject := authz.asked[0].GetUser()
			require.Equal(t, "alice", subject.GetName(), "the subject is the spec's, not the requester")
			require.Equal(t, []string{"team-a"}, subject.GetGroups())
			require.Equal(t, map[string][]string{"k": {"v"}}, subject.GetExtra())
		})
	}
}

func TestSelfSubjectRulesReview(t *testing.T) {
	podRules := []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"web"}}}
	tests := []struct {
		desc      string
		ctx       context.Context
		namespace string
		err       error
		want      authorizationv1.SubjectRulesReviewStatus
		wantCode  int32
	}{
		{desc: "rules in its space", ctx: asUser("team-a", alice), namespace: "default", want: authorizationv1.SubjectRulesReviewStatus{
			ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"web"}}},
			NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/api/*"}}},
			Incomplete:       true,
		}},
		{desc: "none in another space", ctx: asUser("team-b", alice), namespace: "default", want: authorizationv1.SubjectRulesReviewStatus{
			ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}},
		{desc: "resolver error", ctx: asUser("team-b", alice), namespace: "default", err: errors.New("cache not synced"), want: authorizationv1.SubjectRulesReviewStatus{
			ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}, EvaluationError: "cache not synced"}},
		{desc: "no namespace", ctx: asUser("team-a", alice), wantCode: 422},
		{desc: "no user", ctx: spaces.WithSpace(context.Background(), "team-a"), namespace: "default", wantCode: 400},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			storage := &RulesReviewREST{rules: &stubAuthz{rules: podRules, err: tc.err}}
			validation := &recordValidation{}
			out, err := storage.Create(tc.ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: tc.namespace}},
				validation.validate, &metav1.CreateOptions{})
			if tc.wantCode != 0 {
				require.Error(t, err)
				require.Equal(t, tc.wantCode, apiStatusCode(t, err), err.Error())
				require.Empty(t, validation.seen)
				return
			}
			require.NoError(t, err)
			require.Len(t, validation.seen, 1)
			require.Equal(t, tc.want, out.(*authorizationv1.SelfSubjectRulesReview).Status)
		})
	}
}

// syncTargets is a SyncTargetLookup with one SyncTarget, inv1/edge1, whose
// mailbox is mb1.
type syncTargets struct{}

func (syncTargets) MailboxOf(inv, name string) (string, bool) {
	return "mb1", inv == "inv1" && name == "edge1"
}

// TestReviewsWithServerAuthorizer asks the server's own authorizer, wrapped
// as config.go wraps it, through the review storages: what each identity may
// do in each space.
func TestReviewsWithServerAuthorizer(t *testing.T) {
	authz := WithSelfReviews(auth.Authorizer{SyncTargets: syncTargets{}})
	syncer := principal.SyncerUser("inv1", "edge1")
	anonymous := &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	patchStatus := &authorizationv1.ResourceAttributes{Verb: "patch", Group: "edge.kubestellar.io", Resource: "synctargets", Subresource: "status", Name: "edge1"}
	patch := &authorizationv1.ResourceAttributes{Verb: "patch", Group: "edge.kubestellar.io", Resource: "synctargets", Name: "edge1"}
	ask := &authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}
	tests := []struct {
		desc    string
		space   string
		u       user.Info
		attrs   *authorizationv1.ResourceAttributes
		allowed bool
	}{
		{"admin patches anything", "inv1", auth.AdminInfo(), patch, true},
		{"admin anywhere", "no-such-space", auth.AdminInfo(), configMapAttributes("delete"), true},
		{"syncer writes its status", "inv1", syncer, patchStatus, true},
		{"syncer does not write its SyncTarget", "inv1", syncer, patch, false},
		{"syncer writes its mailbox", "mb1", syncer, configMapAttributes("update"), true},
		{"syncer nowhere else", "wds1", syncer, configMapAttributes("get"), false},
		{"syncer not in the root space", spaces.Root, syncer, configMapAttributes("get"), false},
		{"syncer may ask in its space", "inv1", syncer, ask, true},
		{"syncer may ask anywhere", "wds1", syncer, ask, true},
		{"anonymous may not ask", spaces.Root, anonymous, ask, false},
	}
	storage := newSelfSubjectAccessReviewREST(authz)
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := storage.Create(asUser(tc.space, tc.u), &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: tc.attrs}}, nil, &metav1.CreateOptions{})
			require.NoError(t, err)
			status := out.(*authorizationv1.SelfSubjectAccessReview).Status
			require.Equal(t, tc.allowed, status.Allowed, "status: %+v", status)
			require.Equal(t, !tc.allowed, status.Denied)
			if !tc.allowed {
				require.Contains(t, status.Reason, tc.u.GetName(), "a denial names the user")
			}
		})
	}

	rules := &RulesReviewREST{rules: authz}
	list := func(space string, u user.Info) authorizationv1.SubjectRulesReviewStatus {
		out, err := rules.Create(asUser(space, u), &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, nil, &metav1.CreateOptions{})
		require.NoError(t, err)
		return out.(*authorizationv1.SelfSubjectRulesReview).Status
	}
	askRule := authorizationv1.ResourceRule{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}}
	inInventory := list("inv1", syncer)
	require.Contains(t, inInventory.ResourceRules, authorizationv1.ResourceRule{Verbs: []string{"get", "update", "patch"}, APIGroups: []string{"edge.kubestellar.io"},
		Resources: []string{"synctargets/status"}, ResourceNames: []string{"edge1"}})
	require.Contains(t, inInventory.ResourceRules, askRule)
	require.NotEmpty(t, inInventory.NonResourceRules)
	whoAmIRule := authorizationv1.ResourceRule{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}}
	require.Equal(t, []authorizationv1.ResourceRule{askRule, whoAmIRule}, list("wds1", syncer).ResourceRules, "elsewhere a syncer may only ask")
	require.Contains(t, list("inv1", auth.AdminInfo()).ResourceRules, authorizationv1.ResourceRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}})
	require.NotContains(t, list(spaces.Root, anonymous).ResourceRules, askRule)
}

func TestSelfReviewsDelegates(t *testing.T) {
	stub := &stubAuthz{allow: aliceMayGetConfigMaps}
	authz := WithSelfReviews(stub)
	for _, tc := range []struct {
		desc  string
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
		asked bool
	}{
		{"self access review", authorizer.AttributesRecord{User: alice, ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, authorizer.DecisionAllow, false},
		{"self rules review", authorizer.AttributesRecord{User: alice, ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}, authorizer.DecisionAllow, false},
		{"subject access review", authorizer.AttributesRecord{User: alice, ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "subjectaccessreviews"}, authorizer.DecisionDeny, true},
		{"local subject access review", authorizer.AttributesRecord{User: alice, ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "localsubjectaccessreviews", Namespace: "default"}, authorizer.DecisionDeny, true},
		{"other verb on self reviews", authorizer.AttributesRecord{User: alice, ResourceRequest: true, Verb: "list", APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, authorizer.DecisionDeny, true},
		{"same name in another group", authorizer.AttributesRecord{User: alice, ResourceRequest: true, Verb: "create", APIGroup: "example.com", Resource: "selfsubjectaccessreviews"}, authorizer.DecisionDeny, true},
		{"anonymous", authorizer.AttributesRecord{User: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}, ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, authorizer.DecisionDeny, true},
		{"no user", authorizer.AttributesRecord{ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, authorizer.DecisionDeny, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			stub.asked = nil
			decision, _, err := authz.Authorize(spaces.WithSpace(context.Background(), "team-a"), tc.attrs)
			require.NoError(t, err)
			require.Equal(t, tc.want, decision)
			require.Equal(t, tc.asked, len(stub.asked) == 1)
		})
	}
}

func TestReviewAPIGroup(t *testing.T) {
	scheme := newTestScheme(t)
	info := ReviewAPIGroup(scheme, serializer.NewCodecFactory(scheme), &stubAuthz{}, &stubAuthz{})
	require.Equal(t, []string{"v1"}, []string{info.PrioritizedVersions[0].Version})
	resources := info.VersionedResourcesStorageMap["v1"]
	want := map[string]struct {
		kind       string
		namespaced bool
	}{
		"selfsubjectaccessreviews":  {"SelfSubjectAccessReview", false},
		"selfsubjectrulesreviews":   {"SelfSubjectRulesReview", false},
		"subjectaccessreviews":      {"SubjectAccessReview", false},
		"localsubjectaccessreviews": {"LocalSubjectAccessReview", true},
	}
	require.Len(t, resources, len(want))
	for resource, w := range want {
		t.Run(resource, func(t *testing.T) {
			storage := resources[resource]
			require.NotNil(t, storage)
			_, isCreater := storage.(rest.Creater)
			require.True(t, isCreater)
			require.Equal(t, w.namespaced, storage.(rest.Scoper).NamespaceScoped())
			require.Equal(t, resource[:len(resource)-1], storage.(rest.SingularNameProvider).GetSingularName())
			gvk := authorizationv1.SchemeGroupVersion.WithKind(w.kind)
			kinds, _, err := scheme.ObjectKinds(storage.New())
			require.NoError(t, err)
			require.Contains(t, kinds, gvk)
			require.Contains(t, kinds, internalOf(gvk), "the versioned type is also the internal type")
			for _, notServed := range []any{(*rest.Getter)(nil), (*rest.Lister)(nil), (*rest.Updater)(nil)} {
				require.False(t, reflect.TypeOf(storage).Implements(reflect.TypeOf(notServed).Elem()), "reviews are only created")
			}
		})
	}
}

func apiStatusCode(t *testing.T, err error) int32 {
	t.Helper()
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status), "an API error: %v", err)
	return status.Status().Code
}
