// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/server/customresources"
	"github.com/kubestellar/kubestellar/spaces"
)

// crdIndex answers spaces.WithCRDBindings from the server's cache of CRDs,
// which holds them as stored, bindings included; it is set once that cache
// has synced.
type crdIndex struct {
	lister atomic.Pointer[apiextensionslisters.CustomResourceDefinitionLister]
	// bySpace indexes the cached CRDs by the spaces they are bound to
	// (crdsBySpace), for what is asked of one space at every tenant write.
	bySpace atomic.Pointer[cache.Indexer]
	// perSpace: CRDs are stored per space (--crds-per-space).
	perSpace bool
}

// crdsBySpace is the index of CRDs by space: the spaces a CRD is bound
// to, or allSpaces for one every space serves.
const crdsBySpace = "kubestellar.io/space"

// allSpaces is crdsBySpace's value for the CRDs every space serves.
const allSpaces = "*"

// crdSpaces is the index function of crdsBySpace.
func crdSpaces(obj any) ([]string, error) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil, nil
	}
	b := spaces.CRDBindings(crd.Annotations)
	if b.All() {
		return []string{allSpaces}, nil
	}
	return b.Spaces(), nil
}

// servedBy returns the cached CRDs bound to space, and with all those
// every space serves; nil until the cache has synced.
func (x *crdIndex) servedBy(space string, all bool) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	indexer := x.bySpace.Load()
	if indexer == nil {
		return nil, errors.New("the server is starting: its CRD cache has not synced")
	}
	keys := []string{space}
	if all {
		keys = append(keys, allSpaces)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, key := range keys {
		objs, err := (*indexer).ByIndex(crdsBySpace, key)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				out = append(out, crd)
			}
		}
	}
	return out, nil
}

var _ spaces.CRDIndex = &crdIndex{}

var _ customresources.SpaceCRDs = &crdIndex{}

// Own returns the CRDs a space defines itself, with CRDs stored per space:
// those the index by space has for it, which has the root space's
// served everywhere under allSpaces.
func (x *crdIndex) Own(space string) ([]*apiextensionsv1.CustomResourceDefinition, bool) {
	crds, err := x.servedBy(space, false)
	return crds, err == nil
}

func (x *crdIndex) Resource(group, resource string) (spaces.Bindings, bool, error) {
	if builtin.IsBuiltInGroup(group) {
		return spaces.Bindings{}, false, nil
	}
	lister := x.lister.Load()
	if lister == nil {
		return spaces.Bindings{}, false, errors.New("the server is starting: custom resources are served once its CRD cache has synced")
	}
	crd, err := (*lister).Get(resource + "." + group)
	if apierrors.IsNotFound(err) {
		return spaces.Bindings{}, false, nil
	}
	if err != nil {
		return spaces.Bindings{}, false, err
	}
	return spaces.CRDBindings(crd.Annotations), true, nil
}

func (x *crdIndex) GroupVersion(space, group, version string) (defined, served bool) {
	lister := x.lister.Load()
	if lister == nil || builtin.IsBuiltInGroup(group) {
		return false, false
	}
	all, err := (*lister).List(labels.Everything())
	if err != nil {
		return false, false
	}
	for _, crd := range all {
		if crd.Spec.Group != group || (version != "" && !servesVersion(crd, version)) {
			continue
		}
		defined = true
		if spaces.CRDBindings(crd.Annotations).Has(space) {
			return true, true
		}
	}
	return defined, false
}

func (x *crdIndex) Hides(space string) bool {
	lister := x.lister.Load()
	if lister == nil {
		return true
	}
	all, err := (*lister).List(labels.Everything())
	if err != nil {
		return true
	}
	for _, crd := range all {
		if !spaces.CRDBindings(crd.Annotations).Has(space) {
			return true
		}
	}
	return false
}

func servesVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served {
			return true
		}
	}
	return false
}

// unbindCRDs unbinds from a space being deleted the CRDs bound to it, so
// that a space made later under its name starts without them, and a CRD
// the space alone served is deleted. It reads the CRDs as stored, with
// their bindings, through crds (the server's view): a cache could still
// lack a binding made a moment before the space's deletion, and the
// binding would outlive the space.
func unbindCRDs(ctx context.Context, clients *spaceClients, crds apiextensionsv1client.CustomResourceDefinitionInterface, space string) error {
	all, err := crds.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the CRDs bound to space %s: %w", space, err)
	}
	var ext apiextensionsclient.Interface
	for i := range all.Items {
		crd := &all.Items[i]
		b := spaces.CRDBindings(crd.Annotations)
		if b.All() || !b.Has(space) {
			continue
		}
		if ext == nil {
			if ext, err = apiextensionsclient.NewForConfig(clients.config(space)); err != nil {
				return err
			}
		}
		err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unbinding CRD %s from space %s: %w", crd.Name, space, err)
		}
	}
	return nil
}
