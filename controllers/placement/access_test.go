// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/placer"
)

func TestAccessChecker(t *testing.T) {
	var asked []string
	var fail error
	now := time.Unix(1000, 0)
	a := &accessChecker{
		ask: func(_ context.Context, wds string, r *authorizationv1.SubjectAccessReview) error {
			ra := r.Spec.ResourceAttributes
			asked = append(asked, wds+" "+r.Spec.User+" "+ra.Verb+" "+ra.Resource+" "+ra.Namespace)
			if fail != nil {
				return fail
			}
			r.Status.Allowed = ra.Resource != "secrets"
			return nil
		},
		now:     func() time.Time { return now },
		answers: map[accessKey]accessAnswer{},
	}
	ep := func(who *placer.Identity) *edgev2alpha1.EdgePlacement {
		p := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		if who != nil {
			v, err := who.Encode()
			require.NoError(t, err)
			p.Annotations = map[string]string{edgev2alpha1.PlacedByAnnotation: v}
		}
		return p
	}
	ctx := context.Background()
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	carol := ep(&placer.Identity{User: "carol", Groups: []string{"system:authenticated"}})

	ok, why, err := a.mayRead(ctx, "wds1", carol, secrets, "app")
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, `secrets in namespace app are not placed: "carol", who wrote this placement, may not get them in space "wds1"`, why)
	ok, _, _ = a.mayRead(ctx, "wds1", carol, configmaps, "app")
	require.True(t, ok)
	require.Equal(t, []string{"wds1 carol get secrets app", "wds1 carol get configmaps app"}, asked)

	// Answers are kept a while, then asked again.
	a.mayRead(ctx, "wds1", carol, secrets, "app")
	require.Len(t, asked, 2)
	now = now.Add(accessTTL)
	a.mayRead(ctx, "wds1", carol, secrets, "app")
	require.Len(t, asked, 3)

	// Admins, and placements written before writers were recorded, are not asked about.
	admin := ep(&placer.Identity{User: "kubestellar-admin", Groups: []string{"system:masters"}})
	for _, p := range []*edgev2alpha1.EdgePlacement{admin, ep(nil)} {
		ok, _, _ = a.mayRead(ctx, "wds1", p, secrets, "app")
		require.True(t, ok)
	}
	require.Len(t, asked, 3)

	// A writer that cannot be read places nothing; a question that cannot
	// be asked is an error, not a refusal, and is not kept.
	bad := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{edgev2alpha1.PlacedByAnnotation: "{"}}}
	ok, why, err = a.mayRead(ctx, "wds1", bad, configmaps, "app")
	require.NoError(t, err)
	require.False(t, ok)
	require.Contains(t, why, "cannot be read")
	fail = errors.New("boom")
	ok, _, err = a.mayRead(ctx, "wds2", carol, configmaps, "")
	require.False(t, ok)
	require.ErrorContains(t, err, "cluster-wide are not placed for now: cannot ask")
	require.ErrorIs(t, err, fail)
	fail = nil
	ok, _, err = a.mayRead(ctx, "wds2", carol, configmaps, "")
	require.NoError(t, err)
	require.True(t, ok, "asked again after a failure")

	// The cache is bounded.
	for i := range maxAccessAnswers + 5 {
		a.mayRead(ctx, "wds1", carol, schema.GroupVersionResource{Resource: "r"}, string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)))
	}
	require.LessOrEqual(t, len(a.answers), maxAccessAnswers)
}

func TestMayUpsync(t *testing.T) {
	var asked []string
	a := &accessChecker{
		ask: func(_ context.Context, _ string, r *authorizationv1.SubjectAccessReview) error {
			ra := r.Spec.ResourceAttributes
			asked = append(asked, ra.Verb+" "+ra.Resource+" "+ra.Namespace)
			// carol may write ConfigMaps in reports, and nothing else.
			r.Status.Allowed = ra.Resource == "configmaps" && ra.Namespace == "reports"
			return nil
		},
		now:     time.Now,
		answers: map[accessKey]accessAnswer{},
	}
	v, err := (&placer.Identity{User: "carol"}).Encode()
	require.NoError(t, err)
	carol := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{edgev2alpha1.PlacedByAnnotation: v}}}
	ctx := context.Background()

	ok, why, err := a.mayUpsync(ctx, "wds1", carol, 0, edgev2alpha1.UpsyncClause{Resources: []string{"configmaps"}, Namespaces: []string{"reports"}})
	require.NoError(t, err)
	require.True(t, ok, why)
	require.Equal(t, []string{"create configmaps reports", "update configmaps reports", "delete configmaps reports"}, asked)

	ok, why, err = a.mayUpsync(ctx, "wds1", carol, 1, edgev2alpha1.UpsyncClause{Resources: []string{"configmaps"}, Namespaces: []string{"*"}})
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, `spec.upsync[1] is not applied: "carol", who wrote this placement, may not create configmaps in every namespace in space "wds1", where upsynced objects are written`, why)

	ok, why, err = a.mayUpsync(ctx, "wds1", carol, 2, edgev2alpha1.UpsyncClause{Resources: []string{"configmaps", "secrets"}, Namespaces: []string{"reports"}})
	require.NoError(t, err)
	require.False(t, ok)
	require.Contains(t, why, "may not create secrets in namespace reports")
}
