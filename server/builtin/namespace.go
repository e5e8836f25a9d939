// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// NamespaceREST gives namespaces the Kubernetes deletion protocol: deleting a
// namespace marks it Terminating; the namespace controller removes its
// contents and then finalizes it, which deletes it.
type NamespaceREST struct {
	*REST
}

// Delete marks a namespace Terminating, or deletes it once it has no finalizers left.
func (r *NamespaceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options != nil && options.Preconditions != nil {
		if options.Preconditions.UID != nil && *options.Preconditions.UID != ns.UID {
			return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name, fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *options.Preconditions.UID, ns.UID))
		}
	}
	if ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) == 0 {
		return r.REST.Delete(ctx, name, deleteValidation, options)
	}
	if ns.DeletionTimestamp != nil {
		return ns, false, nil
	}
	if err := deleteValidation(ctx, ns); err != nil {
		return nil, false, err
	}
	out, err := r.update(ctx, name, func(ns *corev1.Namespace) {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
		zero := int64(0)
		ns.DeletionGracePeriodSeconds = &zero
		ns.Status.Phase = corev1.NamespaceTerminating
	})
	if err != nil {
		return nil, false, err
	}
	if len(out.Spec.Finalizers) == 0 {
		return r.REST.Delete(ctx, name, deleteValidation, options)
	}
	return out, false, nil
}

// update changes a stored namespace directly, bypassing the update strategy,
// which protects exactly the fields deletion and finalization change.
func (r *NamespaceREST) update(ctx context.Context, name string, change func(*corev1.Namespace)) (*corev1.Namespace, error) {
	key, err := r.KeyFunc(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &corev1.Namespace{}
	err = r.Storage.GuaranteedUpdate(ctx, key, out, false, &storage.Preconditions{},
		func(existing runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
			ns := existing.(*corev1.Namespace).DeepCopy()
			change(ns)
			return ns, nil, nil
		}, false, nil)
	if err != nil {
		return nil, storeErr(err, name)
	}
	return out, nil
}

func storeErr(err error, name string) error {
	if storage.IsNotFound(err) {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	if storage.IsConflict(err) {
		return apierrors.NewConflict(corev1.Resource("namespaces"), name, err)
	}
	return err
}

// FinalizeREST serves namespaces/finalize: it sets spec.finalizers, and
// deletes a Terminating namespace whose finalizers are all gone.
type FinalizeREST struct {
	store *NamespaceREST
}

// New returns an empty Namespace.
func (r *FinalizeREST) New() runtime.Object { return &corev1.Namespace{} }

// Destroy releases nothing: the main resource owns the storage.
func (r *FinalizeREST) Destroy() {}

// Update sets the finalizers of a namespace.
func (r *FinalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc,
	_ rest.ValidateObjectUpdateFunc, _ bool, _ *metav1.UpdateOptions) (runtime.Object, bool, error) {
	old, err := r.store.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	obj, err := objInfo.UpdatedObject(ctx, old)
	if err != nil {
		return nil, false, err
	}
	finalizers := obj.(*corev1.Namespace).Spec.Finalizers
	out, err := r.store.update(ctx, name, func(ns *corev1.Namespace) { ns.Spec.Finalizers = finalizers })
	if err != nil {
		return nil, false, err
	}
	if out.DeletionTimestamp != nil && len(out.Spec.Finalizers) == 0 {
		if _, _, err := r.store.REST.Delete(ctx, name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, false, err
		}
	}
	return out, false, nil
}
