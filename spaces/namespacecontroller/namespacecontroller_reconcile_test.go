// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package namespacecontroller

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	bindings    = schema.GroupVersionResource{Version: "v1", Resource: "bindings"}
	events      = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	widgets     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

var listKinds = map[schema.GroupVersionResource]string{
	configMaps: "ConfigMapList", pods: "PodList", bindings: "BindingList", events: "EventList",
	deployments: "DeploymentList", widgets: "WidgetList",
}

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// discovered is what the server would report, with resources the controller
// must skip: subresources, and resources it cannot list or delete in bulk.
func discovered() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: allVerbs},
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: allVerbs},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: allVerbs},
			{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
			{Name: "events", Namespaced: true, Kind: "Event", Verbs: metav1.Verbs{"create", "deletecollection"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: allVerbs},
			{Name: "deployments/scale", Namespaced: true, Kind: "Scale", Verbs: allVerbs},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"list", "deletecollection"}},
		}},
		{GroupVersion: "not/a/group/version", APIResources: []metav1.APIResource{
			{Name: "broken", Namespaced: true, Verbs: allVerbs},
		}},
	}
}

func object(gvr schema.GroupVersionResource, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// newDynamic returns a fake dynamic client whose deletecollection deletes
// the objects of the namespace (the fake's tracker does not implement it).
func newDynamic(objects ...runtime.Object) *dynamicfake.FakeDynamicClient {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objects...)
	client.PrependReactor("delete-collection", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		gvr, ns := action.GetResource(), action.GetNamespace()
		list, err := client.Tracker().List(gvr, gvr.GroupVersion().WithKind(strings.TrimSuffix(listKinds[gvr], "List")), ns)
		if err != nil {
			return true, nil, err
		}
		err = meta.EachListItem(list, func(obj runtime.Object) error {
			return client.Tracker().Delete(gvr, ns, obj.(metav1.Object).GetName())
		})
		return true, nil, err
	})
	return client
}

func terminating(name string, finalizers ...corev1.FinalizerName) *corev1.Namespace {
	now := metav1.Now()
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: finalizers},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
}

type harness struct {
	ns           *corev1.Namespace
	getErr       error
	finalizeErr  error
	resourcesErr error
	dynamicErr   error
	client       *dynamicfake.FakeDynamicClient

	gotSpaces  []string // spaces each dependency was asked about
	finalized  []*corev1.Namespace
	discovered int
}

func (h *harness) reconciler() *reconciler {
	return &reconciler{
		getNamespace: func(_ context.Context, space, name string) (*corev1.Namespace, error) {
			h.gotSpaces = append(h.gotSpaces, "get "+space+"/"+name)
			if h.getErr != nil {
				return nil, h.getErr
			}
			return h.ns, nil
		},
		finalize: func(_ context.Context, space string, ns *corev1.Namespace) error {
			h.gotSpaces = append(h.gotSpaces, "finalize "+space+"/"+ns.Name)
			h.finalized = append(h.finalized, ns.DeepCopy())
			return h.finalizeErr
		},
		resources: func(space string) ([]*metav1.APIResourceList, error) {
			h.gotSpaces = append(h.gotSpaces, "discovery "+space)
			h.discovered++
			return discovered(), h.resourcesErr
		},
		dynamic: func(space string) (dynamic.Interface, error) {
			h.gotSpaces = append(h.gotSpaces, "dynamic "+space)
			if h.dynamicErr != nil {
				return nil, h.dynamicErr
			}
			return h.client, nil
		},
	}
}

// deletedCollections lists "resource namespace" of each deletecollection call.
func deletedCollections(client *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete-collection" {
			out = append(out, a.GetResource().GroupResource().String()+" "+a.GetNamespace())
		}
	}
	sort.Strings(out)
	return out
}

func remainingNames(t *testing.T, client *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, namespace string) []string {
	t.Helper()
	list, err := client.Resource(gvr).Namespace(namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, item := range list.Items {
		names = append(names, item.GetName())
	}
	return names
}

func TestReconcileIgnores(t *testing.T) {
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	tests := []struct {
		desc    string
		ns      *corev1.Namespace
		getErr  error
		wantErr bool
	}{
		{desc: "namespace gone", getErr: apierrors.NewNotFound(corev1.Resource("namespaces"), "doomed")},
		{desc: "not being deleted", ns: active},
		{desc: "deleted without the kubernetes finalizer", ns: terminating("doomed", "example.com/other")},
		{desc: "deleted without finalizers", ns: terminating("doomed")},
		{desc: "get fails", getErr: errors.New("unavailable"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			h := &harness{ns: tc.ns, getErr: tc.getErr, client: newDynamic(object(configMaps, "ConfigMap", "doomed", "cm"))}
			err := h.reconciler().reconcile(context.Background(), "team-a", "doomed")
			if tc.wantErr {
				require.ErrorIs(t, err, tc.getErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, []string{"get team-a/doomed"}, h.gotSpaces)
			require.Zero(t, h.discovered)
			require.Empty(t, h.client.Actions())
			require.Equal(t, []string{"cm"}, remainingNames(t, h.client, configMaps, "doomed"))
		})
	}
}

func TestReconcileEmptiesAndFinalizes(t *testing.T) {
	h := &harness{
		ns: terminating("doomed", "example.com/other", corev1.FinalizerKubernetes),
		client: newDynamic(
			object(configMaps, "ConfigMap", "doomed", "cm1"),
			object(configMaps, "ConfigMap", "doomed", "cm2"),
			object(configMaps, "ConfigMap", "keep", "cm3"),
			object(pods, "Pod", "doomed", "p"),
			object(deployments, "Deployment", "doomed", "d"),
			object(deployments, "Deployment", "keep", "d"),
		),
	}
	require.NoError(t, h.reconciler().reconcile(context.Background(), "team-a", "doomed"))

	require.Equal(t, []string{
		"configmaps doomed", "deployments.apps doomed", "pods doomed", "widgets.example.com doomed",
	}, deletedCollections(h.client), "every listable and bulk-deletable resource, no subresource")
	require.Empty(t, remainingNames(t, h.client, configMaps, "doomed"))
	require.Empty(t, remainingNames(t, h.client, pods, "doomed"))
	require.Empty(t, remainingNames(t, h.client, deployments, "doomed"))
	require.Equal(t, []string{"cm3"}, remainingNames(t, h.client, configMaps, "keep"), "other namespaces are untouched")
	require.Equal(t, []string{"d"}, remainingNames(t, h.client, deployments, "keep"))

	require.Equal(t, []string{"get team-a/doomed", "discovery team-a", "dynamic team-a", "finalize team-a/doomed"}, h.gotSpaces,
		"the space's own discovery: its CRDs are its own")
	require.Len(t, h.finalized, 1)
	require.Equal(t, []corev1.FinalizerName{"example.com/other"}, h.finalized[0].Spec.Finalizers, "only the kubernetes finalizer is removed")
	require.Equal(t, []corev1.FinalizerName{"example.com/other", corev1.FinalizerKubernetes}, h.ns.Spec.Finalizers, "the fetched object is not modified")
}

func TestReconcileErrors(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		desc string
		// setup adjusts the harness of a terminating namespace.
		setup        func(h *harness)
		wantErr      string
		wantErrIs    error
		wantFinalize bool
	}{
		{
			desc: "objects held by finalizers remain",
			setup: func(h *harness) {
				h.client = newDynamic(object(configMaps, "ConfigMap", "doomed", "cm"), object(widgets, "Widget", "doomed", "w"))
				// widgets ignore deletecollection, as if held by finalizers.
				h.client.PrependReactor("delete-collection", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, nil
				})
			},
			wantErr: "waiting for widgets.example.com to go",
		},
		{
			desc: "several resources remain",
			setup: func(h *harness) {
				h.client = newDynamic(object(configMaps, "ConfigMap", "doomed", "cm"), object(widgets, "Widget", "doomed", "w"))
				h.client.PrependReactor("delete-collection", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, nil
				})
			},
			wantErr: "waiting for configmaps, widgets.example.com to go",
		},
		{
			desc: "deletecollection fails",
			setup: func(h *harness) {
				h.client.PrependReactor("delete-collection", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInternalError(errBoom)
				})
			},
			wantErr: "deleting pods: Internal error occurred: boom",
		},
		{
			desc: "not found on deletecollection and list is fine",
			setup: func(h *harness) {
				notFound := func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewNotFound(widgets.GroupResource(), "")
				}
				h.client.PrependReactor("delete-collection", "widgets", notFound)
				h.client.PrependReactor("list", "widgets", notFound)
			},
			wantFinalize: true,
		},
		{
			desc: "list fails",
			setup: func(h *harness) {
				h.client.PrependReactor("list", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errBoom
				})
			},
			wantErrIs: errBoom,
		},
		{
			desc:      "discovery fails",
			setup:     func(h *harness) { h.resourcesErr = errBoom },
			wantErr:   "discovering resources: boom",
			wantErrIs: errBoom,
		},
		{
			desc:      "no client for the space",
			setup:     func(h *harness) { h.dynamicErr = errBoom },
			wantErrIs: errBoom,
		},
		{
			desc:      "finalize fails",
			setup:     func(h *harness) { h.finalizeErr = errBoom },
			wantErrIs: errBoom,
			// finalize was attempted
			wantFinalize: true,
		},
		{
			desc:         "namespace gone while finalizing",
			setup:        func(h *harness) { h.finalizeErr = apierrors.NewNotFound(corev1.Resource("namespaces"), "doomed") },
			wantFinalize: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			h := &harness{ns: terminating("doomed", corev1.FinalizerKubernetes), client: newDynamic()}
			tc.setup(h)
			err := h.reconciler().reconcile(context.Background(), "team-a", "doomed")
			if tc.wantErr == "" && tc.wantErrIs == nil {
				require.NoError(t, err)
			}
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
			}
			if tc.wantErrIs != nil {
				require.ErrorIs(t, err, tc.wantErrIs)
			}
			if tc.wantFinalize {
				require.Len(t, h.finalized, 1)
				require.Empty(t, h.finalized[0].Spec.Finalizers)
			} else {
				require.Empty(t, h.finalized, "a namespace with contents left is not finalized")
			}
		})
	}
}

// TestReconcileContinuesAfterErrors checks that one failing resource does not
// keep the others from being emptied.
func TestReconcileContinuesAfterErrors(t *testing.T) {
	h := &harness{
		ns:     terminating("doomed", corev1.FinalizerKubernetes),
		client: newDynamic(object(configMaps, "ConfigMap", "doomed", "cm"), object(deployments, "Deployment", "doomed", "d")),
	}
	h.client.PrependReactor("delete-collection", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("configmaps refused")
	})
	err := h.reconciler().reconcile(context.Background(), "team-a", "doomed")
	require.ErrorContains(t, err, "deleting configmaps: configmaps refused")
	require.Empty(t, remainingNames(t, h.client, deployments, "doomed"))
	require.Equal(t, []string{"cm"}, remainingNames(t, h.client, configMaps, "doomed"))
	require.Empty(t, h.finalized)
}
