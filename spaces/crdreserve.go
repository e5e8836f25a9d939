// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// With CRDs stored per space (the server's --crds-per-space), a space's
// CRD is an object of the space, stored under its keys like any
// cluster-scoped object. The root space's CRDs that carry BoundAnnotation
// "*" (the server's own, and those stored before CRDs were per space) are
// served in every space: their names and groups are the server's.

// CRDBindings returns the spaces that serve a CRD, in either layout: a CRD
// stored per space (it carries Annotation, and no BoundAnnotation unless
// it is a root CRD served everywhere) is served in its space alone; a CRD
// stored once for all spaces by the bindings in its BoundAnnotation (see
// BindingsOf).
func CRDBindings(annotations map[string]string) Bindings {
	if _, bound := annotations[BoundAnnotation]; !bound {
		if space := annotations[Annotation]; space != "" {
			return Bindings{names: []string{space}}
		}
	}
	return BindingsOf(annotations)
}

// ServedEverywhere tells whether a CRD stored per space is served in every
// space: a root CRD that says so.
func ServedEverywhere(annotations map[string]string) bool {
	space := annotations[Annotation]
	return (space == Root || space == "") && annotations[BoundAnnotation] == AllSpaces
}

// ReserveCRDs wraps the storage of CRDs stored per space (after the
// partitioning by space) so that a space cannot define what the server
// serves everywhere: a CRD of a name the root space serves everywhere is
// refused as existing (it does, in every space, so this tells nothing
// of any other space), and so is one in a group of those CRDs (the
// server's groups). BoundAnnotation is the root space's to set, and only
// to AllSpaces: anywhere else it is dropped.
func ReserveCRDs(s storage.Interface) storage.Interface { return &crdReserve{Interface: s} }

type crdReserve struct{ storage.Interface }

var _ storage.Interface = &crdReserve{}

// reserved tells why space may not store crd under key, if it may not.
func (s *crdReserve) reserved(ctx context.Context, key string, crd *apiextensions.CustomResourceDefinition) error {
	prefix := key[:strings.LastIndex(key, "/")+1]
	if SpaceOrRoot(ctx) == Root {
		if !ServedEverywhere(crd.Annotations) {
			return nil
		}
		// Served everywhere only where no space has the name or the group
		// for its own: it would take their CRD's place.
		list := &apiextensions.CustomResourceDefinitionList{}
		if err := s.Interface.GetList(WithSpace(ctx, Wildcard), prefix, storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil {
			return err
		}
		for i := range list.Items {
			other := &list.Items[i]
			if other.Annotations[Annotation] != Root && (other.Name == crd.Name || other.Spec.Group == crd.Spec.Group) {
				return apierrors.NewConflict(crdResource, crd.Name, fmt.Errorf(
					"space %s has a CRD %s of its own in group %s: a CRD of the root space served in every space would take its place", other.Annotations[Annotation], other.Name, other.Spec.Group))
			}
		}
		return nil
	}
	root := WithSpace(ctx, Root)
	list := &apiextensions.CustomResourceDefinitionList{}
	if err := s.Interface.GetList(root, prefix, storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil {
		return err
	}
	for i := range list.Items {
		everywhere := &list.Items[i]
		if !ServedEverywhere(everywhere.Annotations) {
			continue
		}
		if everywhere.Name == crd.Name {
			return storage.NewKeyExistsError(key, 0)
		}
		if everywhere.Spec.Group == crd.Spec.Group {
			return apierrors.NewForbidden(crdResource, crd.Name, fmt.Errorf(
				"group %s is the server's own: its resources are served in every space; define yours in a group of your own", crd.Spec.Group))
		}
	}
	return nil
}

// dropBindings removes what only the root space may say of a CRD.
func dropBindings(ctx context.Context, crd *apiextensions.CustomResourceDefinition) {
	if SpaceOrRoot(ctx) == Root && crd.Annotations[BoundAnnotation] == AllSpaces {
		delete(crd.Annotations, boundBeforeAnnotation)
		return
	}
	strip(crd)
}

func (s *crdReserve) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	crd, err := asCRD(obj)
	if err != nil {
		return err
	}
	dropBindings(ctx, crd)
	if err := s.reserved(ctx, key, crd); err != nil {
		return err
	}
	return s.Interface.Create(ctx, key, obj, out, ttl)
}

func (s *crdReserve) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	checked := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		out, ttl, err := tryUpdate(input, res)
		if err != nil {
			return out, ttl, err
		}
		crd, err := asCRD(out)
		if err != nil {
			return nil, nil, err
		}
		dropBindings(ctx, crd)
		existing, err := asCRD(input)
		if err != nil {
			return nil, nil, err
		}
		// A create by update (PUT, server-side apply), or the root space's
		// CRD made one served everywhere.
		if existing.Name == "" || (ServedEverywhere(crd.Annotations) && !ServedEverywhere(existing.Annotations)) {
			if err := s.reserved(ctx, key, crd); err != nil {
				return nil, nil, err
			}
		}
		return crd, ttl, nil
	}
	return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, checked, cachedExistingObject)
}
