// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

func strategyFor(t *testing.T, kindName string) *strategy {
	t.Helper()
	return newStrategy(newTestScheme(t), kindNamed(t, kindName))
}

func TestPrepareForCreate(t *testing.T) {
	tests := []struct {
		desc string
		kind string
		in   runtime.Object
		want runtime.Object
	}{
		{
			desc: "deployment status zeroed, generation 1",
			kind: "Deployment",
			in: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: 7},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
				Status:     appsv1.DeploymentStatus{ReadyReplicas: 3, Replicas: 3},
			},
			want: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: 1},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
			},
		},
		{
			desc: "pod status zeroed",
			kind: "Pod",
			in: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec:       corev1.PodSpec{NodeName: "n"},
				Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
			},
			want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}, Spec: corev1.PodSpec{NodeName: "n"}},
		},
		{
			desc: "kind without spec keeps generation",
			kind: "ConfigMap",
			in:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 4}, Data: map[string]string{"a": "b"}},
			want: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 4}, Data: map[string]string{"a": "b"}},
		},
		{
			desc: "kind with spec but no status",
			kind: "PodTemplate",
			in:   &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}},
			want: &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}},
		},
		{
			desc: "role binding has no spec",
			kind: "RoleBinding",
			in:   &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}},
			want: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}},
		},
		{
			desc: "secret stringData folded into data",
			kind: "Secret",
			in: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s"},
				Data:       map[string][]byte{"a": []byte("old"), "b": []byte("kept")},
				StringData: map[string]string{"a": "new", "c": "added"},
			},
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s"},
				Data:       map[string][]byte{"a": []byte("new"), "b": []byte("kept"), "c": []byte("added")},
			},
		},
		{
			desc: "secret stringData only",
			kind: "Secret",
			in:   &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}},
			want: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": []byte("v")}},
		},
		{
			desc: "secret empty stringData dropped",
			kind: "Secret",
			in:   &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{}, Data: map[string][]byte{"k": []byte("v")}},
			want: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": []byte("v")}},
		},
		{
			desc: "service without a type gets ClusterIP, and nothing else",
			kind: "Service",
			in:   &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
			want: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}},
		},
		{
			desc: "service keeps its type",
			kind: "Service",
			in:   &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}},
			want: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 1},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}},
		},
		{
			desc: "headless service gets ClusterIP and stays headless",
			kind: "Service",
			in:   &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "peers"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
			want: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "peers", Generation: 1},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone}},
		},
		{
			desc: "namespace active with kubernetes finalizer",
			kind: "Namespace",
			in:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want: &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "ns", Generation: 1},
				Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			},
		},
		{
			desc: "namespace keeps the kubernetes finalizer once",
			kind: "Namespace",
			in: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"},
				Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}},
			want: &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "ns", Generation: 1},
				Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			},
		},
		{
			desc: "namespace with another finalizer also gets the kubernetes one",
			kind: "Namespace",
			in: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"},
				Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"example.com/hold"}}},
			want: &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "ns", Generation: 1},
				Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"example.com/hold", corev1.FinalizerKubernetes}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			strategyFor(t, tc.kind).PrepareForCreate(context.Background(), tc.in)
			require.Equal(t, tc.want, tc.in)
		})
	}
}

func deployment(generation int64, replicas int32, labels map[string]string, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Generation: generation, Labels: labels, ResourceVersion: "10"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.DeploymentStatus{ReadyReplicas: ready},
	}
}

func TestPrepareForUpdate(t *testing.T) {
	tests := []struct {
		desc     string
		kind     string
		obj, old runtime.Object
		want     runtime.Object
	}{
		{
			desc: "status written through the main resource is ignored",
			kind: "Deployment",
			old:  deployment(5, 3, nil, 1),
			obj:  deployment(5, 3, nil, 3),
			want: deployment(5, 3, nil, 1),
		},
		{
			desc: "spec change bumps generation",
			kind: "Deployment",
			old:  deployment(5, 3, nil, 1),
			obj:  deployment(5, 4, nil, 1),
			want: deployment(6, 4, nil, 1),
		},
		{
			desc: "metadata change keeps generation",
			kind: "Deployment",
			old:  deployment(5, 3, nil, 1),
			obj:  deployment(5, 3, map[string]string{"a": "b"}, 1),
			want: deployment(5, 3, map[string]string{"a": "b"}, 1),
		},
		{
			desc: "spec and status change: new spec, old status, next generation",
			kind: "Deployment",
			old:  deployment(5, 3, nil, 1),
			obj:  deployment(5, 4, nil, 4),
			want: deployment(6, 4, nil, 1),
		},
		{
			desc: "generation comes from the old object",
			kind: "Deployment",
			old:  deployment(5, 3, nil, 1),
			obj:  deployment(99, 3, nil, 1),
			want: deployment(5, 3, nil, 1),
		},
		{
			desc: "kind without spec keeps its data and generation",
			kind: "ConfigMap",
			old:  &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "1"}},
			obj:  &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "2"}},
			want: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "2"}},
		},
		{
			desc: "secret stringData folded",
			kind: "Secret",
			old:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"a": []byte("1")}},
			obj:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"a": []byte("1")}, StringData: map[string]string{"b": "2"}},
			want: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}},
		},
		{
			desc: "service whose type is dropped gets ClusterIP again",
			kind: "Service",
			old: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}},
			obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
			want: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 3},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}},
		},
		{
			desc: "service stored without a type gets it on its next write",
			kind: "Service",
			old: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
			obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1, Labels: map[string]string{"a": "b"}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
			want: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2, Labels: map[string]string{"a": "b"}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}},
		},
		{
			desc: "namespace finalizers and status are kept",
			kind: "Namespace",
			old: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Generation: 1},
				Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			obj: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Generation: 1, Labels: map[string]string{"a": "b"}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Generation: 1, Labels: map[string]string{"a": "b"}},
				Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			oldCopy := tc.old.DeepCopyObject()
			strategyFor(t, tc.kind).PrepareForUpdate(context.Background(), tc.obj, tc.old)
			require.Equal(t, tc.want, tc.obj)
			require.Equal(t, oldCopy, tc.old, "the old object is not modified")
		})
	}
}

func TestStatusPrepareForUpdate(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "status-writer", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}
	tests := []struct {
		desc     string
		kind     string
		obj, old runtime.Object
		want     runtime.Object
	}{
		{
			desc: "deployment: status and metadata are taken, but labels and generation",
			kind: "Deployment",
			old: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Generation: 5, ResourceVersion: "10", Labels: map[string]string{"a": "old"}},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
				Status:     appsv1.DeploymentStatus{ReadyReplicas: 1},
			},
			obj: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Generation: 9, ResourceVersion: "11",
					Labels: map[string]string{"a": "new"}, Annotations: map[string]string{"x": "y"}, ManagedFields: managed},
				Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](7)},
				Status: appsv1.DeploymentStatus{ReadyReplicas: 3, ObservedGeneration: 5},
			},
			want: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Generation: 5, ResourceVersion: "11",
					Labels: map[string]string{"a": "old"}, Annotations: map[string]string{"x": "y"}, ManagedFields: managed},
				Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
				Status: appsv1.DeploymentStatus{ReadyReplicas: 3, ObservedGeneration: 5},
			},
		},
		{
			desc: "namespace: finalizers kept, status and annotations taken (conformance: a namespace status patch)",
			kind: "Namespace",
			old: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", ResourceVersion: "3"},
				Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			obj: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", ResourceVersion: "4", Annotations: map[string]string{"e2e-patched-ns-status": "yes"}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", ResourceVersion: "4", Annotations: map[string]string{"e2e-patched-ns-status": "yes"}},
				Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			oldCopy := tc.old.DeepCopyObject()
			strategyFor(t, tc.kind).statusStrategy().PrepareForUpdate(context.Background(), tc.obj, tc.old)
			require.Equal(t, tc.want, tc.obj)
			require.Equal(t, oldCopy, tc.old, "the old object is not modified")
		})
	}
}

func TestStatusStrategyIsACopy(t *testing.T) {
	main := strategyFor(t, "Deployment")
	status := main.statusStrategy()
	require.True(t, status.status)
	require.False(t, main.status)
	require.Equal(t, main.kind, status.kind)
}

func TestGetResetFields(t *testing.T) {
	tests := []struct {
		kind   string
		status bool
		want   []string // nil when no reset fields
	}{
		{kind: "Deployment", want: []string{".status"}},
		{kind: "Deployment", status: true, want: []string{".metadata.labels", ".spec"}},
		{kind: "Namespace", want: []string{".status"}},
		{kind: "Namespace", status: true, want: []string{".spec"}},
		{kind: "ConfigMap"},
		{kind: "ConfigMap", status: true},
	}
	for _, tc := range tests {
		name := tc.kind
		if tc.status {
			name += "/status"
		}
		t.Run(name, func(t *testing.T) {
			s := strategyFor(t, tc.kind)
			if tc.status {
				s = s.statusStrategy()
			}
			got := s.GetResetFields()
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			version := fieldpath.APIVersion(kindNamed(t, tc.kind).GroupVersion().String())
			require.Len(t, got, 1)
			var paths []string
			got[version].Iterate(func(p fieldpath.Path) { paths = append(paths, p.String()) })
			sort.Strings(paths)
			require.Equal(t, tc.want, paths)
		})
	}
}

// errorFields renders each error as "field: type".
func errorFields(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Field+": "+string(e.Type))
	}
	sort.Strings(out)
	return out
}

func om(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

func TestValidate(t *testing.T) {
	const invalid, required, forbidden = "FieldValueInvalid", "FieldValueRequired", "FieldValueForbidden"
	tests := []struct {
		desc string
		kind string
		obj  runtime.Object
		want []string
	}{
		{desc: "namespace DNS label", kind: "Namespace", obj: &corev1.Namespace{ObjectMeta: om("team-a", "")}},
		{desc: "namespace with a dot", kind: "Namespace", obj: &corev1.Namespace{ObjectMeta: om("team.a", "")}, want: []string{"metadata.name: " + invalid}},
		{desc: "namespace uppercase", kind: "Namespace", obj: &corev1.Namespace{ObjectMeta: om("Team", "")}, want: []string{"metadata.name: " + invalid}},
		{desc: "namespace in a namespace", kind: "Namespace", obj: &corev1.Namespace{ObjectMeta: om("a", "b")}, want: []string{"metadata.namespace: " + forbidden}},
		{desc: "configmap DNS subdomain", kind: "ConfigMap", obj: &corev1.ConfigMap{ObjectMeta: om("a.b-c", "ns")}},
		{desc: "configmap starting with a digit", kind: "ConfigMap", obj: &corev1.ConfigMap{ObjectMeta: om("1abc", "ns")}},
		{desc: "configmap with colon", kind: "ConfigMap", obj: &corev1.ConfigMap{ObjectMeta: om("system:x", "ns")}, want: []string{"metadata.name: " + invalid}},
		{desc: "configmap without namespace", kind: "ConfigMap", obj: &corev1.ConfigMap{ObjectMeta: om("a", "")}, want: []string{"metadata.namespace: " + required}},
		{desc: "configmap without name", kind: "ConfigMap", obj: &corev1.ConfigMap{ObjectMeta: om("", "ns")}, want: []string{"metadata.name: " + required}},
		{desc: "service DNS-1035", kind: "Service", obj: &corev1.Service{ObjectMeta: om("web", "ns")}},
		{desc: "service starting with a digit", kind: "Service", obj: &corev1.Service{ObjectMeta: om("1web", "ns")}, want: []string{"metadata.name: " + invalid}},
		{desc: "service with a dot", kind: "Service", obj: &corev1.Service{ObjectMeta: om("a.b", "ns")}, want: []string{"metadata.name: " + invalid}},
		{desc: "cluster role with colons", kind: "ClusterRole", obj: &rbacv1.ClusterRole{ObjectMeta: om("system:controller:x", "")}},
		{desc: "role with colon and uppercase", kind: "Role", obj: &rbacv1.Role{ObjectMeta: om("Team:Admin", "ns")}},
		{desc: "role with slash", kind: "Role", obj: &rbacv1.Role{ObjectMeta: om("a/b", "ns")}, want: []string{"metadata.name: " + invalid}},
		{desc: "role with percent", kind: "Role", obj: &rbacv1.Role{ObjectMeta: om("a%b", "ns")}, want: []string{"metadata.name: " + invalid}},
		{desc: "cluster role binding named ..", kind: "ClusterRoleBinding", obj: &rbacv1.ClusterRoleBinding{ObjectMeta: om("..", "")}, want: []string{"metadata.name: " + invalid}},
		{desc: "cluster role in a namespace", kind: "ClusterRole", obj: &rbacv1.ClusterRole{ObjectMeta: om("a", "ns")}, want: []string{"metadata.namespace: " + forbidden}},
		{
			desc: "configmap keys",
			kind: "ConfigMap",
			obj: &corev1.ConfigMap{ObjectMeta: om("c", "ns"),
				Data:       map[string]string{"good.key-1_x": "", "bad key": "", "dup": ""},
				BinaryData: map[string][]byte{"also/bad": nil, "dup": nil, "fine": nil}},
			want: []string{"binaryData[also/bad]: " + invalid, "data[bad key]: " + invalid, "data[dup]: " + invalid},
		},
		{
			desc: "secret keys",
			kind: "Secret",
			obj:  &corev1.Secret{ObjectMeta: om("s", "ns"), Data: map[string][]byte{"tls.crt": nil, "a/b": nil, "..": nil}},
			want: []string{"data[..]: " + invalid, "data[a/b]: " + invalid},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			errs := strategyFor(t, tc.kind).Validate(context.Background(), tc.obj)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, errorFields(errs), "errors: %v", errs)
		})
	}
}

func TestValidateDuplicateMessage(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: om("c", "ns"), Data: map[string]string{"k": ""}, BinaryData: map[string][]byte{"k": nil}}
	errs := strategyFor(t, "ConfigMap").Validate(context.Background(), cm)
	require.Len(t, errs, 1)
	require.True(t, strings.Contains(errs[0].Detail, "duplicate of key present in binaryData"), errs[0].Detail)
}

func TestValidateUpdate(t *testing.T) {
	s := strategyFor(t, "ConfigMap")
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: "1", UID: "u1"}}
	tests := []struct {
		desc   string
		mutate func(*corev1.ConfigMap)
		want   []string
	}{
		{desc: "data change", mutate: func(c *corev1.ConfigMap) { c.Data = map[string]string{"k": "v"} }},
		{desc: "bad key", mutate: func(c *corev1.ConfigMap) { c.Data = map[string]string{"k k": "v"} }, want: []string{"data[k k]: FieldValueInvalid"}},
		{desc: "rename", mutate: func(c *corev1.ConfigMap) { c.Name = "d" }, want: []string{"metadata.name: FieldValueInvalid"}},
		{desc: "uid change", mutate: func(c *corev1.ConfigMap) { c.UID = "u2" }, want: []string{"metadata.uid: FieldValueInvalid"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			obj := old.DeepCopy()
			tc.mutate(obj)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, errorFields(s.ValidateUpdate(context.Background(), obj, old)))
		})
	}
}

func TestStrategyScope(t *testing.T) {
	for _, k := range Kinds() {
		s := newStrategy(runtime.NewScheme(), k)
		require.Equal(t, k.Namespaced, s.NamespaceScoped(), k.Kind)
		require.False(t, s.AllowCreateOnUpdate(context.Background()), k.Kind)
		require.True(t, s.AllowUnconditionalUpdate(context.Background()), k.Kind)
	}
}

// TestPolicyDefaults: a ValidatingAdmissionPolicy and its binding get the
// defaults every cluster gives them, on create and update; what the
// request sets is kept; a binding without matchResources stays without.
func TestPolicyDefaults(t *testing.T) {
	policy := strategyFor(t, "ValidatingAdmissionPolicy")
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionregistrationv1.MatchResources{
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}}
	policy.PrepareForCreate(context.Background(), p)
	require.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy)
	require.Equal(t, admissionregistrationv1.Equivalent, *p.Spec.MatchConstraints.MatchPolicy)
	require.Equal(t, &metav1.LabelSelector{}, p.Spec.MatchConstraints.NamespaceSelector)
	require.Equal(t, map[string]string{"a": "b"}, p.Spec.MatchConstraints.ObjectSelector.MatchLabels, "the request's selector is kept")

	binding := strategyFor(t, "ValidatingAdmissionPolicyBinding")
	plain := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	binding.PrepareForCreate(context.Background(), plain)
	require.Nil(t, plain.Spec.MatchResources)
	updated := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{MatchResources: &admissionregistrationv1.MatchResources{},
			ParamRef: &admissionregistrationv1.ParamRef{Name: "x"}}}
	binding.PrepareForUpdate(context.Background(), updated, plain)
	require.Equal(t, &metav1.LabelSelector{}, updated.Spec.MatchResources.ObjectSelector)
	require.Equal(t, admissionregistrationv1.DenyAction, *updated.Spec.ParamRef.ParameterNotFoundAction)

	mutating := strategyFor(t, "MutatingAdmissionPolicy")
	m := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: &admissionregistrationv1.MatchResources{}}}
	mutating.PrepareForCreate(context.Background(), m)
	require.Equal(t, admissionregistrationv1.Fail, *m.Spec.FailurePolicy)
	require.Equal(t, admissionregistrationv1.NeverReinvocationPolicy, m.Spec.ReinvocationPolicy)
	require.Equal(t, admissionregistrationv1.Equivalent, *m.Spec.MatchConstraints.MatchPolicy)
}

// TestValidatePodUpdate: a pod's spec is fixed once it exists but for
// what Kubernetes lets an update change; the server's own writes (placed
// copies, which follow their original) are not held to it; status is.
func TestValidatePodUpdate(t *testing.T) {
	s := strategyFor(t, "Pod")
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1", UID: "u1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "a:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			ActiveDeadlineSeconds: ptr.To[int64](100),
			Tolerations:           []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}}}
	tests := []struct {
		desc   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{desc: "image", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "a:2" }},
		{desc: "labels", mutate: func(p *corev1.Pod) { p.Labels = map[string]string{"x": "y"} }},
		{desc: "deadline lowered", mutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](50) }},
		{desc: "toleration added", mutate: func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "j", Operator: corev1.TolerationOpExists})
		}},
		{desc: "resources", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		}, want: []string{"spec: FieldValueForbidden"}},
		{desc: "deadline raised", mutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](200) },
			want: []string{"spec.activeDeadlineSeconds: FieldValueInvalid"}},
		{desc: "toleration removed", mutate: func(p *corev1.Pod) { p.Spec.Tolerations = nil }, want: []string{"spec.tolerations: FieldValueForbidden"}},
		{desc: "container added", mutate: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Image: "b"})
		}, want: []string{"spec: FieldValueForbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			obj := old.DeepCopy()
			tc.mutate(obj)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, errorFields(s.ValidateUpdate(context.Background(), obj, old)))
		})
	}
	changed := old.DeepCopy()
	changed.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	server := genericapirequest.WithUser(context.Background(), provenance.Vouch(&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}}))
	require.Empty(t, s.ValidateUpdate(server, changed, old), "the server's own write")
	require.Empty(t, s.statusStrategy().ValidateUpdate(context.Background(), changed, old), "a status update (its spec is reset)")
}
