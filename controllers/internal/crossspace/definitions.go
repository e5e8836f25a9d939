// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// Definitions says which CRD defines a custom resource in each space, in
// either layout of CRDs: stored once and bound to spaces (the default),
// or each space's own (the server's --crds-per-space), where spaces may
// define one name differently and a custom resource is read across
// spaces one definition at a time (spaces.WildcardOf).
type Definitions interface {
	// CRDsIn returns the CRDs served in a space: its own, and those
	// served in every space.
	CRDsIn(space string) []*apiextensionsv1.CustomResourceDefinition
	// CRD returns the CRD that defines name in a space, its own or one
	// served in every space.
	CRD(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool)
	// ReadBy says how a space's objects of the resource name (plural.group)
	// are read across spaces: through the definition whose identity it
	// returns, or, when that is "", through the wildcard (a resource that
	// is not a custom one, one served in every space, and any in the
	// bound layout, where a name has one definition). ok is false when
	// the space serves no such custom resource: it holds none of it.
	ReadBy(space, name string) (id string, ok bool)
	// Serves tells whether some space serves the definition id.
	Serves(id string) bool
	// PerSpace tells whether CRDs are each space's own.
	PerSpace() bool
	// AddEventHandler adds a handler of the CRDs' events.
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	// HasSynced tells whether the CRDs have been read whole.
	HasSynced() bool
}

// BoundDefinitions are Definitions in the bound layout, from a cache of the
// root space's CRDs (which holds every CRD, each bound to the spaces that
// serve it).
func BoundDefinitions(crds cache.SharedIndexInformer) Definitions { return bound{crds} }

type bound struct{ cache.SharedIndexInformer }

func (b bound) CRDsIn(space string) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, obj := range b.GetStore().List() {
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && spaces.BindingsOf(crd.Annotations).Has(space) {
			out = append(out, crd)
		}
	}
	return out
}

func (b bound) CRD(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	obj, ok, err := b.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	return crd, ok && spaces.BindingsOf(crd.Annotations).Has(space)
}

func (b bound) ReadBy(string, string) (string, bool) { return "", true }
func (b bound) Serves(string) bool                   { return false }
func (b bound) PerSpace() bool                       { return false }

// PreferredVersion is the version of a CRD that discovery prefers: of
// those served, the first in Kubernetes' order of versions (v2 before v1,
// v1 before v1beta1 and v1alpha1); "" when none is served.
func PreferredVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	best := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && (best == "" || version.CompareKubeAwareVersionStrings(v.Name, best) > 0) {
			best = v.Name
		}
	}
	return best
}

// ResourceIn returns the resource a space's own CRD defines for group and
// resource, at its preferred version, with CRDs per space; false when
// the space defines no such CRD of its own (a built-in resource, one
// served everywhere, or none), or in the bound layout.
func ResourceIn(defs Definitions, space, group, resource string) (schema.GroupVersionResource, bool) {
	if defs == nil || !defs.PerSpace() || group == "" {
		return schema.GroupVersionResource{}, false
	}
	name := CustomResourceName(schema.GroupResource{Group: group, Resource: resource})
	if id, ok := defs.ReadBy(space, name); !ok || id == "" {
		return schema.GroupVersionResource{}, false
	}
	crd, ok := defs.CRD(space, name)
	if !ok {
		return schema.GroupVersionResource{}, false
	}
	v := PreferredVersion(crd)
	return schema.GroupVersionResource{Group: group, Version: v, Resource: resource}, v != ""
}

// CustomResourceName is the name of the CRD that would define gr.
func CustomResourceName(gr schema.GroupResource) string { return gr.Resource + "." + gr.Group }

// definitionCache is a cache of one resource's objects in the spaces
// whose CRD of it has one definition, stopped once none has.
type definitionCache struct {
	*Informer
	stop context.CancelFunc
}

// definitionKey names a definitionCache.
type definitionKey struct {
	gvr schema.GroupVersionResource
	id  string
}
