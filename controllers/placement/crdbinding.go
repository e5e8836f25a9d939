// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

var crdGVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// bindCRDs has the mailbox serve the CRDs it needs (decideCRDs). Bound
// to spaces, a CRD it does not serve yet is bound to it by creating it
// there as it is: the same definition, shared. With CRDs per space, the
// mailbox gets a CRD of its own, a copy of the WDS's (labelled as the
// translator's copies are, and naming its WDS), kept in step with it; a
// CRD of the mailbox the translator did not make is left as it is, and
// the root's CRDs served everywhere are served there already.
func (r *mailboxReconciler) bindCRDs(ctx context.Context, mailbox string, need map[string]*apiextensionsv1.CustomResourceDefinition) error {
	for _, name := range sortedKeys(need) {
		crd := need[name]
		if crd.DeletionTimestamp != nil {
			continue
		}
		if !r.perSpace {
			if spaces.BindingsOf(crd.Annotations).Has(mailbox) {
				continue
			}
		} else if spaces.ServedEverywhere(crd.Annotations) {
			continue
		}
		if crossspace.SpaceOf(crd) == mailbox {
			continue // the mailbox's own, kept as it is (pinCRDs)
		}
		held, exists := r.crdIn(mailbox, name)
		if exists && (!r.perSpace || crossspace.Label(held, edgev2alpha1.PlacementCopyLabel) != "true" ||
			r.sameDefinition(held, crd) && held.Annotations[edgev2alpha1.SourceSpaceAnnotation] == crossspace.SpaceOf(crd)) {
			continue
		}
		obj, err := crdCopy(crd, r.perSpace)
		if err != nil {
			return err
		}
		if !exists {
			if err := r.create(ctx, crdGVR, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("making CRD %s served in the mailbox: %w", name, err)
			}
			continue
		}
		// The WDS's CRD changed (or another WDS's is served now): the
		// mailbox's follows, in place, so that its objects stay.
		if r.perSpace {
			if dropped := droppedStored(held, crd); len(dropped) > 0 {
				if err := r.dropStored(ctx, mailbox, held, crd, dropped); err != nil {
					return fmt.Errorf("migrating the mailbox's objects of %s off versions %v: %w", name, dropped, err)
				}
				continue
			}
		}
		obj.SetResourceVersion(held.ResourceVersion)
		if err := r.update(ctx, crdGVR, obj); err != nil {
			return fmt.Errorf("updating the mailbox's CRD %s to its WDS's: %w", name, err)
		}
	}
	return nil
}

// crdCopy is what a mailbox is given of a WDS's CRD: its name and spec,
// and with CRDs per space, what says it is the translator's copy of that
// WDS's.
func crdCopy(crd *apiextensionsv1.CustomResourceDefinition, perSpace bool) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd.Spec)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	obj.SetKind("CustomResourceDefinition")
	obj.SetName(crd.Name)
	if perSpace {
		// The WDS's labels and annotations go along (a CRD of a group of
		// Kubernetes' own needs its api-approved.kubernetes.io, here and
		// at the edge), but the server's and kubectl's bookkeeping.
		labels := map[string]string{}
		for k, v := range crd.Labels {
			if !crossspace.IsKubestellars(k) {
				labels[k] = v
			}
		}
		labels[edgev2alpha1.PlacementCopyLabel] = "true"
		annotations := map[string]string{}
		for k, v := range crd.Annotations {
			if !crossspace.IsKubestellars(k) && k != corev1.LastAppliedConfigAnnotation {
				annotations[k] = v
			}
		}
		annotations[edgev2alpha1.SourceSpaceAnnotation] = crossspace.SpaceOf(crd)
		obj.SetLabels(labels)
		obj.SetAnnotations(annotations)
	}
	return obj, nil
}

// unbindCRDs has the mailbox no longer serve the CRDs it served for
// placements and no longer needs (its copies of their objects are gone by
// then): bound to spaces, those bound to it; with CRDs per space, its own
// that the translator made.
func (r *mailboxReconciler) unbindCRDs(ctx context.Context, mailbox string, need map[string]*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range r.crdsIn(mailbox) {
		if _, ok := need[crd.Name]; ok {
			continue
		}
		if r.perSpace {
			if crossspace.SpaceOf(crd) != mailbox || crossspace.Label(crd, edgev2alpha1.PlacementCopyLabel) != "true" {
				continue
			}
		} else if b := spaces.BindingsOf(crd.Annotations); b.All() || !b.Has(mailbox) {
			continue
		}
		if err := r.delete(ctx, crdGVR, "", crd.Name); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unbinding CRD %s from the mailbox: %w", crd.Name, err)
		}
	}
	return nil
}

// upsyncedCRDs returns the CRDs served in wds that define resources an
// upsync clause names (by name: "*" names none).
func (r *mailboxReconciler) upsyncedCRDs(wds string, c edgev2alpha1.UpsyncClause) []*apiextensionsv1.CustomResourceDefinition {
	if c.APIGroup == "" || c.APIGroup == "*" {
		return nil
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range r.crdsIn(wds) {
		if crd.Spec.Group == c.APIGroup && slices.Contains(c.Resources, crd.Spec.Names.Plural) {
			out = append(out, crd)
		}
	}
	return out
}

// droppedStored returns the versions the mailbox's CRD has stored objects
// in (status.storedVersions) that the WDS's no longer has: the API server
// refuses a CRD whose stored versions it does not list.
func droppedStored(held, crd *apiextensionsv1.CustomResourceDefinition) []string {
	var dropped []string
	for _, v := range held.Status.StoredVersions {
		if !slices.ContainsFunc(crd.Spec.Versions, func(cv apiextensionsv1.CustomResourceDefinitionVersion) bool { return cv.Name == v }) {
			dropped = append(dropped, v)
		}
	}
	return dropped
}

// dropStored takes a mailbox's CRD to a WDS's that dropped versions its
// objects are stored in, as a cluster's admin would, in steps, one per
// reconcile: first the WDS's definition with the dropped versions kept,
// neither served nor storage (so that the mailbox stores in the WDS's
// storage version); once the server serves that, every object of the
// resource in the mailbox written again (stored in the new version now:
// the copies, and what the syncer upsynced), and the CRD's status told
// that only that version holds objects; the next reconcile, with nothing
// dropped, writes the WDS's definition.
func (r *mailboxReconciler) dropStored(ctx context.Context, mailbox string, held, crd *apiextensionsv1.CustomResourceDefinition, dropped []string) error {
	interim := crd.DeepCopy()
	for _, v := range held.Spec.Versions {
		if slices.Contains(dropped, v.Name) {
			v.Served, v.Storage = false, false
			interim.Spec.Versions = append(interim.Spec.Versions, v)
		}
	}
	if !equality.Semantic.DeepEqual(held.Spec, interim.Spec) {
		obj, err := crdCopy(interim, true)
		if err != nil {
			return err
		}
		obj.SetResourceVersion(held.ResourceVersion)
		if err := r.update(ctx, crdGVR, obj); err != nil {
			return err
		}
		return errRetryLater // once the server serves it
	}
	if id, ok := r.crdServing(mailbox, held.Name); !ok || id != spaces.DefinitionIdentity(held) {
		return errRetryLater
	}
	storage, err := apiextensionshelpers.GetCRDStorageVersion(held)
	if err != nil {
		return err
	}
	return r.migrateStored(ctx, held, storage)
}
