// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	// Linked in as in the server binary (the quota evaluators import it).
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	_ "k8s.io/kubernetes/pkg/apis/core/v1"
)

func newTestScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme, err := NewScheme()
	require.NoError(t, err)
	return scheme
}

// kindNamed returns the served kind of that name.
func kindNamed(t *testing.T, name string) Kind {
	t.Helper()
	for _, k := range Kinds() {
		if k.Kind == name {
			return k
		}
	}
	t.Fatalf("no served kind %s", name)
	return Kind{}
}

func internalOf(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: gvk.Group, Version: runtime.APIVersionInternal, Kind: gvk.Kind}
}

func TestNewSchemeRegistersEveryKind(t *testing.T) {
	scheme := newTestScheme(t)
	gvks := []schema.GroupVersionKind{autoscalingv1.SchemeGroupVersion.WithKind("Scale")}
	for _, k := range Kinds() {
		gvks = append(gvks, k.GroupVersionKind(), k.GroupVersion().WithKind(k.Kind+"List"))
	}
	for _, gvk := range gvks {
		t.Run(gvk.String(), func(t *testing.T) {
			versioned, err := scheme.New(gvk)
			require.NoError(t, err)
			internal, err := scheme.New(internalOf(gvk))
			require.NoError(t, err)
			require.Equal(t, reflect.TypeOf(versioned), reflect.TypeOf(internal), "the internal type is the versioned type")
			require.Equal(t, gvk.Kind, reflect.TypeOf(versioned).Elem().Name())

			kinds, _, err := scheme.ObjectKinds(versioned)
			require.NoError(t, err)
			require.Contains(t, kinds, gvk)
			require.Contains(t, kinds, internalOf(gvk))
			require.True(t, scheme.IsVersionRegistered(gvk.GroupVersion()))
		})
	}
}

func TestNewSchemeUnversionedTypes(t *testing.T) {
	scheme := newTestScheme(t)
	for _, obj := range []runtime.Object{&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{}} {
		t.Run(reflect.TypeOf(obj).Elem().Name(), func(t *testing.T) {
			kinds, unversioned, err := scheme.ObjectKinds(obj)
			require.NoError(t, err)
			require.True(t, unversioned)
			require.Equal(t, "v1", kinds[0].Version)
		})
	}
}

func TestKindsAreConsistent(t *testing.T) {
	scheme := newTestScheme(t)
	seen := map[schema.GroupResource]bool{}
	for _, k := range Kinds() {
		t.Run(k.Kind, func(t *testing.T) {
			require.False(t, seen[k.GroupResource()], "resource served twice")
			seen[k.GroupResource()] = true
			obj, err := scheme.New(k.GroupVersionKind())
			require.NoError(t, err)
			typ := reflect.TypeOf(obj).Elem()
			_, hasStatusField := typ.FieldByName("Status")
			require.Equal(t, hasStatusField, hasStatus(k), "status subresource iff the type has a status")
			if k.Scale {
				spec, ok := typ.FieldByName("Spec")
				require.True(t, ok)
				replicasField, ok := spec.Type.FieldByName("Replicas")
				require.True(t, ok)
				require.Equal(t, reflect.TypeOf((*int32)(nil)), replicasField.Type)
			}
		})
	}
}

func TestSingular(t *testing.T) {
	for kind, want := range map[string]string{"Deployment": "deployment", "ReplicaSet": "replicaset", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybinding"} {
		require.Equal(t, want, singular(Kind{Kind: kind}))
	}
}

// TestNewSchemeDefaultsNothing: the scheme stores built-in kinds as
// written, even with Kubernetes' own API packages linked in (they add
// Kubernetes' defaulting functions to k8s.io/api's scheme builders).
func TestNewSchemeDefaultsNothing(t *testing.T) {
	scheme := newTestScheme(t)
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	scheme.Default(svc)
	scheme.Default(pod)
	require.Empty(t, svc.Spec.Ports[0].Protocol)
	require.Empty(t, svc.Spec.Type)
	require.Empty(t, pod.Spec.RestartPolicy)
	require.Empty(t, pod.Spec.Containers[0].TerminationMessagePath)
}
