// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crdcontroller

import (
	"fmt"
	"slices"
	"strings"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// NamesAndConditions judges the names a CRD asks for against the names
// the other CRDs of its space have been given, by the rules of the
// apiextensions server's naming controller: a name is accepted if it is
// the one already accepted for this CRD or no CRD of the group in the
// space holds it; plural, singular and short names share one set, kinds
// and list kinds another. It returns the accepted names, the
// NamesAccepted condition and the Established condition to write (False
// with Installing once the names are accepted, until the CRD is served).
//
// sameSpace are the CRDs of the CRD's space, itself among them as upstream
// counts it (its own accepted names are no conflict, but a name it gives
// up is not free for it to take in another role); a CRD of another space
// never counts, which is what makes a space's CRDs its own
// (docs/design/crds.md).
func NamesAndConditions(in *apiextensionsv1.CustomResourceDefinition, sameSpace []*apiextensionsv1.CustomResourceDefinition) (
	apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	resources, kinds := sets.New[string](), sets.New[string]()
	for _, other := range sameSpace {
		if other.Spec.Group != in.Spec.Group {
			continue
		}
		n := other.Status.AcceptedNames
		resources.Insert(n.Plural, n.Singular)
		resources.Insert(n.ShortNames...)
		kinds.Insert(n.Kind, n.ListKind)
	}
	resources.Delete("")
	kinds.Delete("")

	requested, accepted := in.Spec.Names, in.Status.AcceptedNames
	names := accepted
	namesAccepted := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue,
		Reason: "NoConflicts", Message: "no conflicts found"}
	conflict := func(reason string, err error) {
		namesAccepted.Status, namesAccepted.Reason, namesAccepted.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}
	if err := acceptedOrFree(requested.Plural, accepted.Plural, resources); err != nil {
		conflict("PluralConflict", err)
	} else {
		names.Plural = requested.Plural
	}
	if err := acceptedOrFree(requested.Singular, accepted.Singular, resources); err != nil {
		conflict("SingularConflict", err)
	} else {
		names.Singular = requested.Singular
	}
	if !slices.Equal(requested.ShortNames, accepted.ShortNames) {
		var taken []string
		for _, short := range requested.ShortNames {
			if !slices.Contains(accepted.ShortNames, short) && resources.Has(short) {
				taken = append(taken, fmt.Sprintf("%q is already in use", short))
			}
		}
		if len(taken) > 0 {
			conflict("ShortNamesConflict", fmt.Errorf("%s", strings.Join(taken, ", ")))
		} else {
			names.ShortNames = requested.ShortNames
		}
	}
	if err := acceptedOrFree(requested.Kind, accepted.Kind, kinds); err != nil {
		conflict("KindConflict", err)
	} else {
		names.Kind = requested.Kind
	}
	if err := acceptedOrFree(requested.ListKind, accepted.ListKind, kinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		names.ListKind = requested.ListKind
	}
	names.Categories = requested.Categories

	established := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
		Reason: "NotAccepted", Message: "not all names are accepted"}
	if old := apiextensionshelpers.FindCRDCondition(in, apiextensionsv1.Established); old != nil {
		established = *old
	}
	if established.Status != apiextensionsv1.ConditionTrue && namesAccepted.Status == apiextensionsv1.ConditionTrue {
		established = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
			Reason: "Installing", Message: "the initial names have been accepted"}
	}
	return names, namesAccepted, established
}

// acceptedOrFree says why a requested name cannot be had: it is not the
// one accepted already, and another CRD of the group holds it.
func acceptedOrFree(requested, accepted string, used sets.Set[string]) error {
	if requested == accepted || !used.Has(requested) {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}
