// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func sel(matchLabels map[string]string, exprs ...metav1.LabelSelectorRequirement) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: matchLabels, MatchExpressions: exprs}
}

func TestParseClause(t *testing.T) {
	bad := sel(nil, metav1.LabelSelectorRequirement{Key: "env", Operator: "Bogus", Values: []string{"x"}})
	emptyIn := sel(nil, metav1.LabelSelectorRequirement{Key: "env", Operator: metav1.LabelSelectorOpIn})
	good := sel(map[string]string{"env": "prod"})
	for _, tc := range []struct {
		name       string
		i          int
		c          edgev2alpha1.DownsyncClause
		wantErr    []string
		wantNsSels int
		wantLSels  int
	}{
		{name: "resources only", c: edgev2alpha1.DownsyncClause{Resources: []string{"*"}}},
		{name: "selectors parsed", c: edgev2alpha1.DownsyncClause{Resources: []string{"deployments"},
			NamespaceSelectors: []metav1.LabelSelector{good, {}}, LabelSelectors: []metav1.LabelSelector{good}},
			wantNsSels: 2, wantLSels: 1},
		{name: "bad namespace selector", i: 3, c: edgev2alpha1.DownsyncClause{Resources: []string{"pods"},
			NamespaceSelectors: []metav1.LabelSelector{good, bad}},
			wantErr: []string{"spec.downsync[3].namespaceSelectors[1]: ", "Bogus"}},
		{name: "bad label selector", i: 0, c: edgev2alpha1.DownsyncClause{Resources: []string{"pods"},
			LabelSelectors: []metav1.LabelSelector{emptyIn}},
			wantErr: []string{"spec.downsync[0].labelSelectors[0]: "}},
		{name: "bad label key", i: 1, c: edgev2alpha1.DownsyncClause{Resources: []string{"pods"},
			LabelSelectors: []metav1.LabelSelector{good, good, sel(map[string]string{"bad key!": "x"})}},
			wantErr: []string{"spec.downsync[1].labelSelectors[2]: "}},
		{name: "no resources", i: 2, c: edgev2alpha1.DownsyncClause{Namespaces: []string{"ns"}},
			wantErr: []string{"spec.downsync[2].resources: name at least one resource"}},
		{name: "empty resources", i: 4, c: edgev2alpha1.DownsyncClause{Resources: []string{}},
			wantErr: []string{"spec.downsync[4].resources"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseClause(tc.i, tc.c)
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					require.ErrorContains(t, err, w)
				}
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.c, got.DownsyncClause)
			require.Len(t, got.namespaceSelectors, tc.wantNsSels)
			require.Len(t, got.labelSelectors, tc.wantLSels)
		})
	}
}

func TestClauseMatches(t *testing.T) {
	nsLabels := map[string]map[string]string{
		"prod": {"env": "prod", "team": "a"},
		"dev":  {"env": "dev"},
		"bare": nil,
	}
	namespaceLabels := func(ns string) (map[string]string, bool) {
		l, ok := nsLabels[ns]
		return l, ok
	}
	envIs := func(v string) metav1.LabelSelector { return sel(map[string]string{"env": v}) }
	type object struct {
		namespace, name string
		labels          map[string]string
	}
	for _, tc := range []struct {
		name   string
		clause edgev2alpha1.DownsyncClause
		obj    object
		want   bool
	}{
		{name: "no restriction, namespaced", obj: object{"ghost", "x", nil}, want: true},
		{name: "no restriction, cluster-scoped", obj: object{"", "x", nil}, want: true},

		{name: "namespaces listed, in", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"a", "b"}}, obj: object{"b", "x", nil}, want: true},
		{name: "namespaces listed, out", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"a", "b"}}, obj: object{"c", "x", nil}, want: false},
		{name: "namespaces star", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"*"}}, obj: object{"c", "x", nil}, want: true},
		{name: "namespaces star among others", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"a", "*"}}, obj: object{"c", "x", nil}, want: true},
		{name: "namespaces listed, cluster-scoped", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"a"}}, obj: object{"", "x", nil}, want: false},
		// The code treats "*" as no restriction, so cluster-scoped objects match.
		{name: "namespaces star, cluster-scoped", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"*"}}, obj: object{"", "x", nil}, want: true},

		{name: "namespace selector matches", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{envIs("prod")}},
			obj: object{"prod", "x", nil}, want: true},
		{name: "namespace selector does not match", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{envIs("prod")}},
			obj: object{"dev", "x", nil}, want: false},
		{name: "namespace selectors, any of", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{envIs("prod"), envIs("dev")}},
			obj: object{"dev", "x", nil}, want: true},
		{name: "namespace selector, unlabelled namespace", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{envIs("prod")}},
			obj: object{"bare", "x", nil}, want: false},
		{name: "empty namespace selector, existing namespace", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{{}}},
			obj: object{"bare", "x", nil}, want: true},
		{name: "empty namespace selector, missing namespace", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{{}}},
			obj: object{"ghost", "x", nil}, want: false},
		{name: "negative namespace selector, missing namespace", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{
			sel(nil, metav1.LabelSelectorRequirement{Key: "env", Operator: metav1.LabelSelectorOpDoesNotExist})}},
			obj: object{"ghost", "x", nil}, want: false},
		{name: "namespace selector, cluster-scoped", clause: edgev2alpha1.DownsyncClause{NamespaceSelectors: []metav1.LabelSelector{{}}},
			obj: object{"", "x", nil}, want: false},
		{name: "namespaces and selector must both hold", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"prod"},
			NamespaceSelectors: []metav1.LabelSelector{envIs("dev")}}, obj: object{"prod", "x", nil}, want: false},
		{name: "namespaces and selector both hold", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"prod"},
			NamespaceSelectors: []metav1.LabelSelector{sel(map[string]string{"team": "a"})}}, obj: object{"prod", "x", nil}, want: true},

		{name: "object names, in", clause: edgev2alpha1.DownsyncClause{ObjectNames: []string{"x", "y"}}, obj: object{"prod", "y", nil}, want: true},
		{name: "object names, out", clause: edgev2alpha1.DownsyncClause{ObjectNames: []string{"x", "y"}}, obj: object{"prod", "z", nil}, want: false},
		{name: "object names star", clause: edgev2alpha1.DownsyncClause{ObjectNames: []string{"*"}}, obj: object{"prod", "z", nil}, want: true},
		{name: "object names, cluster-scoped", clause: edgev2alpha1.DownsyncClause{ObjectNames: []string{"crd.example.com"}},
			obj: object{"", "crd.example.com", nil}, want: true},
		{name: "object names, cluster-scoped, out", clause: edgev2alpha1.DownsyncClause{ObjectNames: []string{"crd.example.com"}},
			obj: object{"", "other.example.com", nil}, want: false},

		{name: "label selectors, first matches", clause: edgev2alpha1.DownsyncClause{LabelSelectors: []metav1.LabelSelector{
			sel(map[string]string{"app": "a"}), sel(map[string]string{"tier": "b"})}}, obj: object{"prod", "x", map[string]string{"app": "a"}}, want: true},
		{name: "label selectors, second matches", clause: edgev2alpha1.DownsyncClause{LabelSelectors: []metav1.LabelSelector{
			sel(map[string]string{"app": "a"}), sel(map[string]string{"tier": "b"})}}, obj: object{"prod", "x", map[string]string{"tier": "b", "app": "z"}}, want: true},
		{name: "label selectors, none matches", clause: edgev2alpha1.DownsyncClause{LabelSelectors: []metav1.LabelSelector{
			sel(map[string]string{"app": "a"}), sel(map[string]string{"tier": "b"})}}, obj: object{"prod", "x", map[string]string{"app": "c"}}, want: false},
		{name: "label selector, unlabelled object", clause: edgev2alpha1.DownsyncClause{LabelSelectors: []metav1.LabelSelector{
			sel(map[string]string{"app": "a"})}}, obj: object{"prod", "x", nil}, want: false},
		{name: "label selector expression, unlabelled object", clause: edgev2alpha1.DownsyncClause{LabelSelectors: []metav1.LabelSelector{
			sel(nil, metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist})}}, obj: object{"prod", "x", nil}, want: true},
		{name: "label selector, cluster-scoped", clause: edgev2alpha1.DownsyncClause{LabelSelectors: []metav1.LabelSelector{
			sel(map[string]string{"app": "a"})}}, obj: object{"", "x", map[string]string{"app": "a"}}, want: true},
		{name: "label selector, cluster-scoped, out", clause: edgev2alpha1.DownsyncClause{LabelSelectors: []metav1.LabelSelector{
			sel(map[string]string{"app": "a"})}}, obj: object{"", "x", map[string]string{"app": "b"}}, want: false},

		{name: "every field holds", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"prod"}, NamespaceSelectors: []metav1.LabelSelector{envIs("prod")},
			ObjectNames: []string{"x"}, LabelSelectors: []metav1.LabelSelector{sel(map[string]string{"app": "a"})}},
			obj: object{"prod", "x", map[string]string{"app": "a"}}, want: true},
		{name: "all but the name hold", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"prod"}, NamespaceSelectors: []metav1.LabelSelector{envIs("prod")},
			ObjectNames: []string{"x"}, LabelSelectors: []metav1.LabelSelector{sel(map[string]string{"app": "a"})}},
			obj: object{"prod", "y", map[string]string{"app": "a"}}, want: false},
		{name: "all but the labels hold", clause: edgev2alpha1.DownsyncClause{Namespaces: []string{"prod"}, NamespaceSelectors: []metav1.LabelSelector{envIs("prod")},
			ObjectNames: []string{"x"}, LabelSelectors: []metav1.LabelSelector{sel(map[string]string{"app": "a"})}},
			obj: object{"prod", "x", map[string]string{"app": "b"}}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.clause.Resources = []string{"*"}
			c, err := parseClause(0, tc.clause)
			require.NoError(t, err)
			var asked []string
			lookup := func(ns string) (map[string]string, bool) {
				asked = append(asked, ns)
				return namespaceLabels(ns)
			}
			require.Equal(t, tc.want, c.matches(tc.obj.namespace, tc.obj.name, tc.obj.labels, lookup))
			if len(tc.clause.NamespaceSelectors) == 0 || tc.obj.namespace == "" {
				require.Empty(t, asked, "namespace labels are only needed for namespace selectors of namespaced objects")
			}
		})
	}
}
