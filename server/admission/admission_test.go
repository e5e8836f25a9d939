// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kubestellar/kubestellar/spaces"
)

// namespaceGetter answers from a cache and from the datastore, by the
// resource version asked for, and records what was asked.
type namespaceGetter struct {
	cached, stored map[string]*corev1.Namespace
	asked          []string
}

func (g *namespaceGetter) Get(_ context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	g.asked = append(g.asked, opts.ResourceVersion)
	from := g.stored
	if opts.ResourceVersion == "0" {
		from = g.cached
	}
	if ns, ok := from[name]; ok {
		return ns, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
}

// TestNamespaceLifecycleReadsTheCacheFirst: content in a namespace is
// admitted from the watch cache's namespace; one the cache does not hold
// yet is looked up in the datastore; a terminating or missing one refuses.
func TestNamespaceLifecycleReadsTheCacheFirst(t *testing.T) {
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	for _, tc := range []struct {
		name, namespace string
		cached, stored  []*corev1.Namespace
		wantAsked       []string
		wantErr         func(error) bool
	}{
		{name: "in the cache", namespace: "app", cached: []*corev1.Namespace{active}, stored: []*corev1.Namespace{active}, wantAsked: []string{"0"}},
		{name: "made a moment ago", namespace: "app", stored: []*corev1.Namespace{active}, wantAsked: []string{"0", ""}},
		{name: "terminating", namespace: "old", cached: []*corev1.Namespace{terminating}, wantAsked: []string{"0"}, wantErr: apierrors.IsForbidden},
		{name: "missing", namespace: "none", wantAsked: []string{"0", ""}, wantErr: apierrors.IsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &namespaceGetter{cached: map[string]*corev1.Namespace{}, stored: map[string]*corev1.Namespace{}}
			for _, ns := range tc.cached {
				g.cached[ns.Name] = ns
			}
			for _, ns := range tc.stored {
				g.stored[ns.Name] = ns
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: tc.namespace}}
			attrs := admission.NewAttributesRecord(cm, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), tc.namespace, "cm",
				corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
			err := New(g).(admission.ValidationInterface).Validate(spaces.WithSpace(context.Background(), "s1"), attrs, nil)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.True(t, tc.wantErr(err), "got %v", err)
			}
			require.Equal(t, tc.wantAsked, g.asked)
		})
	}
}

// TestNamespaceDeletedAMomentAgo: right after a namespace's delete, the
// watch cache may still hold it as active; content created in it is then
// checked against the datastore, which has it terminating. Only in the
// space where it was deleted, and a delete of another kind changes nothing.
func TestNamespaceDeletedAMomentAgo(t *testing.T) {
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	terminating := active.DeepCopy()
	terminating.Status.Phase = corev1.NamespaceTerminating
	g := &namespaceGetter{cached: map[string]*corev1.Namespace{"app": active}, stored: map[string]*corev1.Namespace{"app": terminating}}
	plugin := New(g).(admission.ValidationInterface)
	alice := &user.DefaultInfo{Name: "alice"}
	create := func(space string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "app"}}
		attrs := admission.NewAttributesRecord(cm, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "app", "late",
			corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, &metav1.CreateOptions{}, false, alice)
		return plugin.Validate(spaces.WithSpace(context.Background(), space), attrs, nil)
	}
	deleteIn := func(space string, kind, resource, name, namespace string) {
		attrs := admission.NewAttributesRecord(nil, active, corev1.SchemeGroupVersion.WithKind(kind), namespace, name,
			corev1.SchemeGroupVersion.WithResource(resource), "", admission.Delete, &metav1.DeleteOptions{}, false, alice)
		require.NoError(t, plugin.Validate(spaces.WithSpace(context.Background(), space), attrs, nil))
	}

	require.NoError(t, create("s1"), "the cache's namespace is active, nothing was deleted")
	require.Equal(t, []string{"0"}, g.asked)

	deleteIn("s1", "ConfigMap", "configmaps", "app", "app")
	deleteIn("s2", "Namespace", "namespaces", "app", "")
	g.asked = nil
	require.NoError(t, create("s1"), "a namespace of the same name deleted in another space")
	require.Equal(t, []string{"0"}, g.asked)

	deleteIn("s1", "Namespace", "namespaces", "app", "")
	g.asked = nil
	err := create("s1")
	require.True(t, apierrors.IsForbidden(err), "the datastore has it terminating: %v", err)
	require.Equal(t, []string{"0", ""}, g.asked)

	g.cached["app"] = terminating
	g.asked = nil
	require.True(t, apierrors.IsForbidden(create("s1")), "once the cache has it terminating")
	require.Equal(t, []string{"0"}, g.asked, "the cache's answer suffices")
}
