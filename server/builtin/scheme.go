// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"fmt"
	"reflect"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// NewScheme returns a scheme holding every served group version. Each served
// kind's versioned type is also registered as the kind's internal type, so
// the API server "converts" between them by only setting the kind.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, g := range groupVersions {
		if err := g.addToScheme(scheme); err != nil {
			return nil, fmt.Errorf("adding %s to scheme: %w", g.gv, err)
		}
	}
	internal := func(gvk schema.GroupVersionKind) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: gvk.Group, Version: runtime.APIVersionInternal, Kind: gvk.Kind}
	}
	register := func(gvk schema.GroupVersionKind) error {
		obj, err := scheme.New(gvk)
		if err != nil {
			return err
		}
		scheme.AddKnownTypeWithName(internal(gvk), obj)
		return nil
	}
	for _, kind := range Kinds() {
		gvk := kind.GroupVersionKind()
		if err := register(gvk); err != nil {
			return nil, err
		}
		if err := register(gvk.GroupVersion().WithKind(kind.Kind + "List")); err != nil {
			return nil, err
		}
	}
	if err := register(autoscalingv1.SchemeGroupVersion.WithKind("Scale")); err != nil {
		return nil, err
	}
	// The review kinds (kubectl auth can-i) are asked, never stored.
	if err := authorizationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("adding %s to scheme: %w", authorizationv1.SchemeGroupVersion, err)
	}
	for _, kind := range reviewKinds {
		if err := register(authorizationv1.SchemeGroupVersion.WithKind(kind)); err != nil {
			return nil, err
		}
	}
	// TokenRequest (kubectl create token) and SelfSubjectReview (kubectl
	// auth whoami) are asked, never stored.
	if err := authenticationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("adding %s to scheme: %w", authenticationv1.SchemeGroupVersion, err)
	}
	for _, kind := range []string{"TokenRequest", "SelfSubjectReview"} {
		if err := register(authenticationv1.SchemeGroupVersion.WithKind(kind)); err != nil {
			return nil, err
		}
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	// Built-in kinds are stored as written. Kubernetes' own packages (the
	// quota evaluators import k8s.io/kubernetes/pkg/apis/core/v1) add
	// Kubernetes' defaulting functions to k8s.io/api's scheme builders
	// when they are linked in: none of them applies here.
	for _, typ := range scheme.AllKnownTypes() {
		if obj, ok := reflect.New(typ).Interface().(runtime.Object); ok {
			scheme.AddTypeDefaultingFunc(obj, func(any) {})
		}
	}
	return scheme, nil
}

// NewCodecs returns the codec factory of a scheme made by NewScheme.
func NewCodecs(scheme *runtime.Scheme) serializer.CodecFactory {
	return serializer.NewCodecFactory(scheme)
}
