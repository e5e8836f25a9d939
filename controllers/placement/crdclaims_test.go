// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// widgetsIn is a space's own CRD of widgets.example.com, with a field.
func widgetsIn(space, field string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: types.UID(space + "-" + field), ResourceVersion: "1",
			Annotations: map[string]string{spaces.Annotation: space}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "string"}}}}}}}}
}

// widgetClaim is a placement's claim of the widget w in version v.
func widgetClaim(src source, v, w string) (string, *claim) {
	res := resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: v, Resource: "widgets"}, Kind: "Widget", Namespaced: true}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/" + v, "kind": "Widget", "metadata": map[string]any{"name": w, "namespace": "lab"}}}
	return copyKey(res.GroupVersionResource, "lab", w), &claim{source: src, res: res, obj: obj, src: obj}
}

// TestDecideCRDs: with CRDs per space, a destination serves one definition
// of a name. WDSs that define it alike add up; of those that differ, the
// WDS whose CRD the mailbox holds keeps it while it still claims the name,
// else the older placement's; the others' objects of the resource are
// left out, in any version, and every placement involved says why.
func TestDecideCRDs(t *testing.T) {
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{
		"wds1": widgetsIn("wds1", "size"), "wds2": widgetsIn("wds2", "color"), "wds3": widgetsIn("wds3", "size"),
	}
	older := source{wds: "wds1", ep: placementAt("a", 1)}
	newer := source{wds: "wds2", ep: placementAt("b", 2)}
	alike := source{wds: "wds3", ep: placementAt("c", 3)}
	reconciler := func(mailboxCRD *apiextensionsv1.CustomResourceDefinition) *mailboxReconciler {
		return &mailboxReconciler{perSpace: true, crdIn: func(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
			if space == "mb" {
				return mailboxCRD, mailboxCRD != nil
			}
			crd, ok := crds[space]
			return crd, ok && name == crd.Name
		}}
	}
	newSelection := func() *selection {
		sel := &selection{claims: map[string][]*claim{}, problems: map[string][]problem{}}
		for _, c := range []struct {
			src  source
			v, w string
		}{{older, "v1", "w1"}, {newer, "v1", "w2"}, {newer, "v2", "w3"}, {alike, "v1", "w4"}} {
			k, cl := widgetClaim(c.src, c.v, c.w)
			sel.claims[k] = append(sel.claims[k], cl)
		}
		return sel
	}
	keys := func(sel *selection) []string {
		var out []string
		for _, k := range sortedKeys(sel.claims) {
			_, name, _ := strings.Cut(k, "|")
			out = append(out, name)
		}
		return out
	}
	reasons := func(sel *selection, src source) []string {
		var out []string
		for _, p := range sel.problems[src.key()] {
			out = append(out, p.Reason+": "+p.Message)
		}
		return out
	}

	// Nothing held: the older placement's definition; wds3's is alike.
	sel := newSelection()
	got := reconciler(nil).decideCRDs("mb", sel, "SyncTarget inv/st")
	require.Same(t, crds["wds1"], got["widgets.example.com"])
	require.Equal(t, []string{"lab/w1", "lab/w4"}, keys(sel), "wds2's widgets left out, in both versions")
	require.Len(t, reasons(sel, newer), 1)
	require.Contains(t, reasons(sel, newer)[0], edgev2alpha1.ConflictReasonDefinition+": CRD widgets.example.com for SyncTarget inv/st is defined differently in WDS wds1")
	for _, src := range []source{older, alike} {
		require.Len(t, reasons(sel, src), 1, "every placement involved says why: %s", src)
		require.Contains(t, reasons(sel, src)[0], "EdgePlacement wds2/b define it differently")
	}

	// The mailbox holds wds2's: it keeps it while wds2 claims the name.
	heldCRD := widgetsIn("mb", "color")
	heldCRD.Annotations[edgev2alpha1.SourceSpaceAnnotation] = "wds2"
	sel = newSelection()
	got = reconciler(heldCRD).decideCRDs("mb", sel, "SyncTarget inv/st")
	require.Same(t, crds["wds2"], got["widgets.example.com"])
	require.Equal(t, []string{"lab/w2", "lab/w3"}, keys(sel))
	require.Contains(t, reasons(sel, older)[0], "defined differently in WDS wds2")
	require.Contains(t, reasons(sel, alike)[0], "defined differently in WDS wds2")

	// wds2 no longer claims it: the older placement's again.
	sel = newSelection()
	for k, list := range sel.claims {
		if list[0].wds == "wds2" {
			delete(sel.claims, k)
		}
	}
	got = reconciler(heldCRD).decideCRDs("mb", sel, "SyncTarget inv/st")
	require.Same(t, crds["wds1"], got["widgets.example.com"])
	require.Equal(t, []string{"lab/w1", "lab/w4"}, keys(sel))
	require.Empty(t, sel.problems, "alike definitions add up")

	// Bound to spaces, a name has one definition: no conflict at all.
	shared := widgetsIn("", "size")
	bound := &mailboxReconciler{crdIn: func(string, string) (*apiextensionsv1.CustomResourceDefinition, bool) { return shared, true }}
	sel = newSelection()
	got = bound.decideCRDs("mb", sel, "SyncTarget inv/st")
	require.Same(t, shared, got["widgets.example.com"])
	require.Len(t, sel.claims, 4)
	require.Empty(t, sel.problems)
}
