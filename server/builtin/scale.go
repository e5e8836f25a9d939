// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"fmt"
	"reflect"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// ScaleREST serves the scale subresource (autoscaling/v1 Scale) of kinds
// with spec.replicas, so that kubectl scale works on workload descriptions.
type ScaleREST struct {
	store *registry.Store
	kind  Kind
}

var _ rest.GroupVersionKindProvider = &ScaleREST{}

// GroupVersionKind is autoscaling/v1 Scale whatever the parent's group.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// New returns an empty Scale.
func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy releases nothing: the main resource owns the storage.
func (r *ScaleREST) Destroy() {}

// Get returns the scale of an object.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return toScale(obj)
}

// Update sets spec.replicas of an object from a Scale.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(ctx, name, &scaleUpdate{inner: objInfo, kind: r.kind}, createValidation, updateValidation, false, options)
	if err != nil {
		return nil, false, err
	}
	scale, err := toScale(obj)
	return scale, false, err
}

type scaleUpdate struct {
	inner rest.UpdatedObjectInfo
	kind  Kind
}

func (u *scaleUpdate) Preconditions() *metav1.Preconditions { return u.inner.Preconditions() }

func (u *scaleUpdate) UpdatedObject(ctx context.Context, old runtime.Object) (runtime.Object, error) {
	oldScale, err := toScale(old)
	if err != nil {
		return nil, err
	}
	obj, err := u.inner.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	scale, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a Scale, got %T", obj))
	}
	if scale.Spec.Replicas < 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.replicas must not be negative, got %d", scale.Spec.Replicas))
	}
	updated := old.DeepCopyObject()
	replicas := scale.Spec.Replicas
	reflect.ValueOf(updated).Elem().FieldByName("Spec").FieldByName("Replicas").Set(reflect.ValueOf(&replicas))
	if scale.ResourceVersion != "" {
		accessor, _ := meta.Accessor(updated)
		accessor.SetResourceVersion(scale.ResourceVersion)
	}
	return updated, nil
}

func toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	v := reflect.ValueOf(obj).Elem()
	scale := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name: accessor.GetName(), Namespace: accessor.GetNamespace(), UID: accessor.GetUID(),
			ResourceVersion: accessor.GetResourceVersion(), CreationTimestamp: accessor.GetCreationTimestamp(),
		},
	}
	if r, ok := v.FieldByName("Spec").FieldByName("Replicas").Interface().(*int32); ok {
		scale.Spec.Replicas = replicas(r)
	}
	scale.Status.Replicas = int32(v.FieldByName("Status").FieldByName("Replicas").Int())
	switch o := obj.(type) {
	case *corev1.ReplicationController:
		scale.Status.Selector = labels.SelectorFromSet(o.Spec.Selector).String()
	default:
		if sel, ok := v.FieldByName("Spec").FieldByName("Selector").Interface().(*metav1.LabelSelector); ok && sel != nil {
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil {
				return nil, err
			}
			scale.Status.Selector = s.String()
		}
	}
	return scale, nil
}
