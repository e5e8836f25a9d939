// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crdcontroller

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func namedCRD(plural, kind string, short ...string) *apiextensionsv1.CustomResourceDefinition {
	n := apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List", ShortNames: short}
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Names: n}}
}

func accepted(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	crd = crd.DeepCopy()
	crd.Status.AcceptedNames = crd.Spec.Names
	crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	return crd
}

// TestNamesAndConditions: upstream's naming rules, within one space's
// CRDs: a fresh CRD's names are accepted and it is Installing; a kind,
// plural or short name another CRD of the group in the space holds is a
// conflict naming it, with the names that are free still accepted; the
// same names in another group, or in another space (not passed), are no
// conflict; a CRD keeps the names it was given.
func TestNamesAndConditions(t *testing.T) {
	widgets := accepted(namedCRD("widgets", "Widget", "wd"))
	for _, c := range []struct {
		name       string
		in         *apiextensionsv1.CustomResourceDefinition
		space      []*apiextensionsv1.CustomResourceDefinition
		reason     string
		wantPlural string
		wantKind   string
	}{
		{"fresh", namedCRD("gadgets", "Gadget"), []*apiextensionsv1.CustomResourceDefinition{widgets}, "NoConflicts", "gadgets", "Gadget"},
		// Kind and list kind both taken: the last conflict found names the
		// condition, as upstream's does.
		{"a kind taken", namedCRD("gizmos", "Widget"), []*apiextensionsv1.CustomResourceDefinition{widgets}, "ListKindConflict", "gizmos", ""},
		{"a short name taken", namedCRD("gizmos", "Gizmo", "wd"), []*apiextensionsv1.CustomResourceDefinition{widgets}, "ShortNamesConflict", "gizmos", "Gizmo"},
		{"a plural taken as a short name", namedCRD("wd", "Wd"), []*apiextensionsv1.CustomResourceDefinition{widgets}, "PluralConflict", "", "Wd"},
		{"another space's names", namedCRD("gizmos", "Widget", "wd"), nil, "NoConflicts", "gizmos", "Widget"},
		{"its own names", widgets, []*apiextensionsv1.CustomResourceDefinition{widgets}, "NoConflicts", "widgets", "Widget"},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := namedCRD("widgets", "Widget", "wd")
			other.Spec.Group, other.Name = "other.example.com", "widgets.other.example.com"
			space := append([]*apiextensionsv1.CustomResourceDefinition{accepted(other)}, c.space...)
			names, namesAccepted, established := NamesAndConditions(c.in, space)
			require.Equal(t, c.reason, namesAccepted.Reason, namesAccepted.Message)
			require.Equal(t, c.wantPlural, names.Plural)
			require.Equal(t, c.wantKind, names.Kind)
			if c.reason == "NoConflicts" {
				require.Equal(t, apiextensionsv1.ConditionTrue, namesAccepted.Status)
				require.Equal(t, c.in.Spec.Names, names)
			} else {
				require.Equal(t, apiextensionsv1.ConditionFalse, namesAccepted.Status)
				require.Contains(t, namesAccepted.Message, "is already in use")
			}
			switch {
			case c.in == widgets:
				require.Equal(t, apiextensionsv1.ConditionTrue, established.Status, "an established CRD stays so")
			case c.reason == "NoConflicts":
				require.Equal(t, "Installing", established.Reason)
			default:
				require.Equal(t, "NotAccepted", established.Reason)
			}
		})
	}
}
