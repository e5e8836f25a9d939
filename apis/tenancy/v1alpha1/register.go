// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the tenancy kinds.
const GroupName = "tenancy.kubestellar.io"

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// SpacesGVR is the resource of Spaces, for dynamic clients and informers.
var SpacesGVR = SchemeGroupVersion.WithResource("spaces")

// Resource returns the group-qualified resource of this version.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder collects the functions that add this package's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &Space{}, &SpaceList{}, &SpaceQuota{}, &SpaceQuotaList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
