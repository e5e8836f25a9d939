package admission

import (
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

var crdResource = apiextensionsv1.Resource("customresourcedefinitions")

// ownGroups are the groups of the CRDs the server installs itself.
var ownGroups = map[string]bool{edgev2alpha1.GroupName: true, tenancyv1alpha1.GroupName: true}

// validateCRD refuses a CRD that would define a resource in a group the
// server serves itself: its objects would share the storage of the built-in
// ones, and deleting the CRD would purge them. Kubestellar's own CRDs are
// the server's to write.
func (p *edgePlugin) validateCRD(a admission.Attributes) error {
	if a.GetOperation() == admission.Delete {
		if _, group, found := strings.Cut(a.GetName(), "."); found && ownGroups[group] {
			return apierrors.NewForbidden(crdResource, a.GetName(), fmt.Errorf("the server installs kubestellar's own CRDs; deleting one would delete its objects in every space"))
		}
		return nil
	}
	var group string
	switch crd := a.GetObject().(type) {
	case *apiextensions.CustomResourceDefinition:
		group = crd.Spec.Group
	case *apiextensionsv1.CustomResourceDefinition:
		group = crd.Spec.Group
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("unexpected %T for a CustomResourceDefinition", a.GetObject()))
	}
	path := field.NewPath("spec", "group")
	switch {
	case p.builtInGroup(group):
		return apierrors.NewInvalid(apiextensionsv1.Kind("CustomResourceDefinition"), a.GetName(), field.ErrorList{field.Invalid(path, group,
			"the server serves this group itself (built-in kinds): a CRD may not define resources in it; choose a group of your own")})
	case ownGroups[group]:
		return apierrors.NewForbidden(crdResource, a.GetName(), fmt.Errorf("group %s is kubestellar's own: only the server writes its CRDs", group))
	}
	return nil
}
