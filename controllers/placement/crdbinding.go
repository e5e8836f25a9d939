// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

var crdGVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// crdsFor returns the CRDs a mailbox needs served: those the placements
// select, those of the resources their upsync clauses name, and those
// defining the resources of the copies (a space serves only the CRDs bound
// to it, see spaces.DecorateCRDs).
func (r *mailboxReconciler) crdsFor(desired map[string]*desiredCopy, selected ...map[string]bool) map[string]*apiextensionsv1.CustomResourceDefinition {
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range r.crds() {
		byName[crd.Name] = crd
	}
	need := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, names := range selected {
		for name := range names {
			if crd, ok := byName[name]; ok {
				need[name] = crd
			}
		}
	}
	for _, d := range desired {
		gr := d.res.GroupResource()
		if gr.Group == "" {
			continue
		}
		if crd, ok := byName[gr.Resource+"."+gr.Group]; ok {
			need[crd.Name] = crd
		}
	}
	return need
}

// bindCRDs binds to the mailbox the CRDs it needs and does not have, by
// creating them there as they are: the same definition, shared.
func (r *mailboxReconciler) bindCRDs(ctx context.Context, mailbox string, need map[string]*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range need {
		if spaces.BindingsOf(crd.Annotations).Has(mailbox) || crd.DeletionTimestamp != nil {
			continue
		}
		spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd.Spec)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		obj.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
		obj.SetKind("CustomResourceDefinition")
		obj.SetName(crd.Name)
		if err := r.create(ctx, crdGVR, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("binding CRD %s to the mailbox: %w", crd.Name, err)
		}
	}
	return nil
}

// unbindCRDs unbinds from the mailbox the CRDs bound to it that it no
// longer needs (its copies of their objects are gone by then).
func (r *mailboxReconciler) unbindCRDs(ctx context.Context, mailbox string, need map[string]*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range r.crds() {
		b := spaces.BindingsOf(crd.Annotations)
		if _, ok := need[crd.Name]; ok || b.All() || !b.Has(mailbox) {
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
func (r *mailboxReconciler) upsyncedCRDs(wds string, c edgev2alpha1.UpsyncClause) []string {
	if c.APIGroup == "" || c.APIGroup == "*" {
		return nil
	}
	var out []string
	for _, crd := range r.crds() {
		if crd.Spec.Group == c.APIGroup && slices.Contains(c.Resources, crd.Spec.Names.Plural) && spaces.BindingsOf(crd.Annotations).Has(wds) {
			out = append(out, crd.Name)
		}
	}
	return out
}
