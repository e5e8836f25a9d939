// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestCustomResourcesAreServedByDefinition: custom resources are served
// by definition (server/customresources), as /metrics counts them: two
// spaces with the same CRD share one; a changed definition is another,
// and the one no space serves any more is let go; so is a deleted CRD's.
// Through it all the instances are served as the definition says. In
// both layouts of CRDs: bound, and per space.
func TestCustomResourcesAreServedByDefinition(t *testing.T) {
	for layout, opts := range map[string]func(*server.Options){"bound": boundCRDs, "per space": perSpaceCRDs} {
		t.Run(layout, func(t *testing.T) { testServedByDefinition(t, opts) })
	}
}

func testServedByDefinition(t *testing.T, layout func(*server.Options)) {
	s := harness.StartInProcessWith(t, "", layout)
	ctx := context.Background()
	createSpace(t, s, "cr-a")
	createSpace(t, s, "cr-b")
	served := func() int {
		t.Helper()
		body, err := kube(t, s, spaces.Root).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		require.NoError(t, err)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "kubestellar_custom_resources_definitions_served "); ok {
				n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				require.NoError(t, err)
				return int(n)
			}
		}
		require.Fail(t, "no kubestellar_custom_resources_definitions_served on /metrics")
		return 0
	}
	crds := func(space string) apiextensionsclient.Interface {
		c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
		require.NoError(t, err)
		return c
	}
	widget := func(name string, size any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": size}}}
	}
	create := func(space string, w *unstructured.Unstructured) error {
		_, err := dyn(t, s, space).Resource(widgetsGVR).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
		return err
	}
	// Served once established; the first requests may find it not yet.
	createWhenServed := func(space string, w *unstructured.Unstructured) {
		t.Helper()
		eventually(t, time.Minute, func() (bool, error) {
			err := create(space, w)
			return err == nil, err
		}, "a widget created in %s", space)
	}

	_, err := crds("cr-a").ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	require.NoError(t, err)
	createWhenServed("cr-a", widget("one", 1))
	before := served()
	require.Positive(t, before)

	// The same definition in another space: no second one.
	_, err = crds("cr-b").ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	require.NoError(t, err)
	createWhenServed("cr-b", widget("one", 2))
	require.Equal(t, before, served(), "spaces with the same definition share it")
	err = create("cr-b", widget("two", "big"))
	require.True(t, apierrors.IsInvalid(err), "the definition's schema is checked: %v", err)

	// A changed definition: served as changed, the old one let go.
	require.NoError(t, crds("cr-b").ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, widgetCRD().Name, metav1.DeleteOptions{}))
	eventually(t, time.Minute, func() (bool, error) {
		crd, err := crds("cr-a").ApiextensionsV1().CustomResourceDefinitions().Get(ctx, widgetCRD().Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		_, err = crds("cr-a").ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err == nil, err
	}, "the CRD changed in cr-a once cr-b no longer shares it")
	createWhenServed("cr-a", widget("two", "big"))
	eventually(t, time.Minute, func() (bool, error) { return served() == before, nil }, "the old definition let go (%d served, %d before)", served(), before)

	// A CRD being deleted keeps its definition (its instances are being
	// deleted); once gone, it is let go.
	require.NoError(t, crds("cr-a").ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, widgetCRD().Name, metav1.DeleteOptions{}))
	eventually(t, time.Minute, func() (bool, error) {
		_, err := crds("cr-a").ApiextensionsV1().CustomResourceDefinitions().Get(ctx, widgetCRD().Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}, "the CRD gone")
	eventually(t, time.Minute, func() (bool, error) { return served() == before-1, nil }, "the deleted CRD's definition let go")
}
