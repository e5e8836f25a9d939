// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package integration tests the kubestellar server in-process: spaces,
// built-in kinds, CRDs, lifecycle and error handling, through client-go.
package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/namespacedefaults"
	"github.com/kubestellar/kubestellar/test/harness"
)

// written selects the objects a test wrote: it leaves out those the server
// puts in every space on its own time, the ConfigMap kube-root-ca.crt in
// every namespace and default's kubernetes Service and endpoints.
var written = metav1.ListOptions{FieldSelector: fields.AndSelectors(
	fields.OneTermNotEqualSelector("metadata.name", namespacedefaults.RootCAConfigMap),
	fields.OneTermNotEqualSelector("metadata.name", namespacedefaults.KubernetesService)).String()}

// defaultsSettled waits until every namespace of every space but the
// mailboxes holds its kube-root-ca.crt, and every default namespace its
// kubernetes EndpointSlice (the last made), so that a test counting the
// server's events counts only its own writes after it.
func defaultsSettled(t *testing.T, s *harness.InProcess) {
	t.Helper()
	ctx := context.Background()
	all := kube(t, s, spaces.Wildcard)
	eventually(t, time.Minute, func() (bool, error) {
		namespaces, err := all.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		cas, err := all.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + namespacedefaults.RootCAConfigMap})
		if err != nil {
			return false, err
		}
		slices, err := all.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + namespacedefaults.KubernetesService})
		if err != nil {
			return false, err
		}
		have := map[string]bool{}
		for _, cm := range cas.Items {
			have["cm "+cm.Annotations[spaces.Annotation]+"/"+cm.Namespace] = true
		}
		for _, slice := range slices.Items {
			have["slice "+slice.Annotations[spaces.Annotation]+"/"+slice.Namespace] = true
		}
		for _, ns := range namespaces.Items {
			space := ns.Annotations[spaces.Annotation]
			if spaces.IsMailboxName(space) || ns.DeletionTimestamp != nil {
				continue
			}
			if !have["cm "+space+"/"+ns.Name] || (ns.Name == metav1.NamespaceDefault && !have["slice "+space+"/"+ns.Name]) {
				return false, nil
			}
		}
		return true, nil
	}, "what every namespace gets by default, in every namespace")
}

func kube(t *testing.T, s *harness.InProcess, space string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.RESTConfig(t, space))
	require.NoError(t, err)
	return c
}

func dyn(t *testing.T, s *harness.InProcess, space string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(s.RESTConfig(t, space))
	require.NoError(t, err)
	return c
}

// createSpace creates a plain Space and waits until it is Ready.
func createSpace(t *testing.T, s *harness.InProcess, name string) {
	t.Helper()
	createTypedSpace(t, s, name, tenancyv1alpha1.SpaceTypeGeneric)
}

// createEdgeSpaces creates the inventory space inv1 and the workload
// description space wds1, whose placements may select inv1's Locations.
func createEdgeSpaces(t *testing.T, s *harness.InProcess) {
	t.Helper()
	createTypedSpace(t, s, "inv1", tenancyv1alpha1.SpaceTypeInventory)
	createTypedSpace(t, s, "wds1", tenancyv1alpha1.SpaceTypeWDS, "inv1")
}

// createTypedSpace creates a Space of a type (a wds with the inventory
// spaces it may select) and waits until it is Ready.
func createTypedSpace(t *testing.T, s *harness.InProcess, name, typ string, inventorySpaces ...string) {
	t.Helper()
	ctx := context.Background()
	space := &unstructured.Unstructured{}
	space.SetAPIVersion(tenancyv1alpha1.SchemeGroupVersion.String())
	space.SetKind("Space")
	space.SetName(name)
	if typ != "" {
		require.NoError(t, unstructured.SetNestedField(space.Object, typ, "spec", "type"))
	}
	if len(inventorySpaces) > 0 {
		require.NoError(t, unstructured.SetNestedStringSlice(space.Object, inventorySpaces, "spec", "inventorySpaces"))
	}
	client := dyn(t, s, spaces.Root).Resource(tenancyv1alpha1.SpacesGVR)
	_, err := client.Create(ctx, space, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() (bool, error) {
		got, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		return phase == string(tenancyv1alpha1.SpacePhaseReady), nil
	}, "space %s to become Ready", name)
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, error), what string, args ...any) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		require.Failf(t, "timed out", "waiting for "+what+" (last error: %v)", append(args, last)...)
	}
}

func spacesGVR() schema.GroupVersionResource { return tenancyv1alpha1.SpacesGVR }

func spaceObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(tenancyv1alpha1.SchemeGroupVersion.String())
	u.SetKind("Space")
	u.SetName(name)
	return u
}

// update reads obj, changes it with mutate and writes it back, again on a
// conflict: the controllers write status to the same objects meanwhile.
func update(t *testing.T, c client.Client, ctx context.Context, obj client.Object, mutate func()) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return c.Update(ctx, obj)
	}))
}
