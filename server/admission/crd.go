// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

var crdResource = apiextensionsv1.Resource("customresourcedefinitions")

// validateCRD refuses a CRD that would define a resource in a group the
// server serves itself: its objects would share the storage of the built-in
// ones, and deleting the CRD would purge them. Kubestellar's own CRDs are
// the server's to write.
func (p *edgePlugin) validateCRD(a admission.Attributes, space string) error {
	if a.GetOperation() == admission.Delete {
		if _, group, found := strings.Cut(a.GetName(), "."); found && edgev2alpha1.ServerGroup(group) {
			return apierrors.NewForbidden(crdResource, a.GetName(), fmt.Errorf("the server installs kubestellar's own CRDs; deleting one would delete its objects in every space"))
		}
		return nil
	}
	var group string
	var webhook bool
	switch crd := a.GetObject().(type) {
	case *apiextensions.CustomResourceDefinition:
		group = crd.Spec.Group
		webhook = crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensions.WebhookConverter
	case *apiextensionsv1.CustomResourceDefinition:
		group = crd.Spec.Group
		webhook = crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("unexpected %T for a CustomResourceDefinition", a.GetObject()))
	}
	path := field.NewPath("spec", "group")
	switch {
	case p.builtInGroup(group):
		return apierrors.NewInvalid(apiextensionsv1.Kind("CustomResourceDefinition"), a.GetName(), field.ErrorList{field.Invalid(path, group,
			"the server serves this group itself (built-in kinds): a CRD may not define resources in it; choose a group of your own")})
	case edgev2alpha1.ServerGroup(group):
		return apierrors.NewForbidden(crdResource, a.GetName(), fmt.Errorf("group %s is kubestellar's own: only the server writes its CRDs", group))
	case webhook && space != spaces.Root:
		// The server itself would call the webhook, from inside its
		// network, wherever the CRD says: any address, and its answers
		// (refused, unauthorized) would tell a tenant what listens where.
		return apierrors.NewForbidden(crdResource, a.GetName(), fmt.Errorf(
			"spec.conversion.strategy Webhook is refused in space %q: the server would call the webhook's URL or Service for a tenant; only CRDs of the root space may convert through a webhook (use strategy None, with versions whose schemas convert as they are)", space))
	}
	return nil
}

// admissionConfigs are the kinds that configure admission: admission
// webhooks and admission policies with their bindings.
var admissionConfigs = map[string]bool{"mutatingwebhookconfigurations": true, "validatingwebhookconfigurations": true,
	"validatingadmissionpolicies": true, "validatingadmissionpolicybindings": true, "mutatingadmissionpolicies": true, "mutatingadmissionpolicybindings": true}

// enforcedPolicies are the kinds the server runs per space
// (server/policies).
var enforcedPolicies = map[string]bool{"validatingadmissionpolicies": true, "validatingadmissionpolicybindings": true,
	"mutatingadmissionpolicies": true, "mutatingadmissionpolicybindings": true}

// validateAdmissionConfig: in a workload description space, admission
// configuration is workload, kept to be placed on edges, where it acts:
// stored, with a warning saying it does not act here. Elsewhere admission
// policies and their bindings act in their space (server/policies);
// admission webhooks are refused: the server would call a URL a tenant
// names, from inside its network.
func validateAdmissionConfig(ctx context.Context, a admission.Attributes, space, spaceType string) error {
	kind := a.GetKind().Kind
	if spaceType == tenancyv1alpha1.SpaceTypeWDS {
		if a.GetOperation() == admission.Create {
			warning.AddWarning(ctx, "", fmt.Sprintf("%s %q is workload for edges here: it is not enforced in space %q", kind, a.GetName(), space))
		}
		return nil
	}
	if a.GetOperation() == admission.Delete || enforcedPolicies[a.GetResource().Resource] {
		return nil
	}
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
		"the server does not call admission webhooks, so a %s in space %q would be stored and never act "+
			"(admission policies do act: CEL, in the server); in a workload description space (type wds) it is kept as workload to place on edges, where it acts", kind, space))
}
