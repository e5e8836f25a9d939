// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestCRDsPerSpaceReadByDefinition: with --crds-per-space, spaces def-a1
// and def-a2 define widgets.example.com one way (A), the root space
// another (B: v1 and v2, stored as v2, converted by a webhook on
// loopback), def-c a third (C: A with a field more). A read of every
// space's widgets of one definition (/spaces/*~ID/...) lists and watches
// the objects of the spaces that define it so, and no other's: B's
// webhook is never handed an object of another space. A space that comes
// to define A joins the open watch of A; a space whose CRD moves from A
// to C ends it with 410 Expired (and a watch from before the move is
// refused so), and the lists that follow say where its objects are now.
// Only the server's admins read so; a read by definition of anything but
// a custom resource is refused.
func TestCRDsPerSpaceReadByDefinition(t *testing.T) {
	var mu sync.Mutex
	converted := map[string]int{} // the webhook's objects, by space
	webhook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var review apiextensionsv1.ConversionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			var obj unstructured.Unstructured
			if err := obj.UnmarshalJSON(raw.Raw); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			converted[obj.GetAnnotations()[spaces.Annotation]]++
			mu.Unlock()
			obj.SetAPIVersion(review.Request.DesiredAPIVersion)
			out, _ := obj.MarshalJSON()
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(webhook.Close)
	url := webhook.URL + "/convert"
	defA := widgetCRD()
	defA.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "integer", Minimum: ptrTo(1.0)}
	defB := widgetCRD()
	open := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}}
	defB.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Schema: open}, {Name: "v2", Served: true, Storage: true, Schema: open}}
	defB.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: webhook.Certificate().Raw})}}}
	defC := defA.DeepCopy()
	defC.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["shape"] = apiextensionsv1.JSONSchemaProps{Type: "string"}

	s := harness.StartInProcessWith(t, "", func(o *server.Options) { o.CRDsPerSpace = true })
	ctx := context.Background()
	v1, v2 := widgetsGVR, widgetsGVR.GroupResource().WithVersion("v2")
	ids := map[string]string{}
	define := func(space string, def *apiextensionsv1.CustomResourceDefinition) {
		c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
		require.NoError(t, err)
		_, err = c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, def.DeepCopy(), metav1.CreateOptions{})
		require.NoError(t, err, "in %s", space)
		ids[space] = spaces.DefinitionIdentity(established(t, s, space, def.Name))
	}
	create := func(space string, gvr schema.GroupVersionResource, name string) {
		eventually(t, time.Minute, func() (bool, error) {
			w := widget(name)
			w.SetAPIVersion(gvr.GroupVersion().String())
			_, err := dyn(t, s, space).Resource(gvr).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
			return err == nil, err
		}, "widget %s in %s", name, space)
	}
	for _, space := range []string{"def-a1", "def-a2", "def-c"} {
		createSpace(t, s, space)
	}
	define("def-a1", defA)
	define("def-a2", defA)
	define(spaces.Root, defB) // a tenant's CRD may not call a webhook
	define("def-c", defC)
	require.Equal(t, ids["def-a1"], ids["def-a2"], "one definition, one identity")
	idA, idB, idC := ids["def-a1"], ids[spaces.Root], ids["def-c"]
	require.Len(t, map[string]bool{idA: true, idB: true, idC: true}, 3)
	create("def-a1", v1, "a1")
	create("def-a2", v1, "a2")
	create(spaces.Root, v2, "b")
	create("def-c", v1, "c")

	// listed returns the space/name of every widget a read lists.
	listed := func(space string, gvr schema.GroupVersionResource) ([]string, string) {
		t.Helper()
		list, err := dyn(t, s, space).Resource(gvr).List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "list through %s", space)
		var names []string
		for _, item := range list.Items {
			names = append(names, item.GetAnnotations()[spaces.Annotation]+"/"+item.GetName())
		}
		slices.Sort(names)
		return names, list.GetResourceVersion()
	}
	gotA, rv := listed(spaces.WildcardOf(idA), v1)
	require.Equal(t, []string{"def-a1/a1", "def-a2/a2"}, gotA)
	gotB, _ := listed(spaces.WildcardOf(idB), v2)
	require.Equal(t, []string{"root/b"}, gotB)
	gotB, _ = listed(spaces.WildcardOf(idB), v1)
	require.Equal(t, []string{"root/b"}, gotB, "read as v1 through B's webhook")
	mu.Lock()
	require.Equal(t, map[string]int{spaces.Root: converted[spaces.Root]}, converted, "B's webhook converted B's objects alone")
	require.Positive(t, converted[spaces.Root])
	mu.Unlock()

	// The real kubectl reads so too, and the plain wildcard, which has no
	// one definition to decode by, still refuses.
	admin := spaceKubectl(t, s, spaces.Root)
	raw := admin.MustRun(t, "get", "--raw", spaces.PathPrefix+spaces.WildcardOf(idA)+"/apis/example.com/v1/widgets")
	require.Contains(t, raw, `"a1"`)
	require.NotContains(t, raw, `"b"`)
	_, err := dyn(t, s, spaces.Wildcard).Resource(v1).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsServiceUnavailable(err), "the plain wildcard of a name defined differently: %v", err)

	// What is not a custom resource of one definition is refused, and so
	// is a definition nobody has.
	_, err = dyn(t, s, spaces.WildcardOf(idA)).Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsBadRequest(err), "configmaps by definition: %v", err)
	_, err = dyn(t, s, spaces.WildcardOf(strings.Repeat("0", 32))).Resource(v1).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsNotFound(err), "a definition nobody has: %v", err)
	_, err = dyn(t, s, spaces.WildcardOf(idA)).Resource(v1).Namespace("default").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsBadRequest(err), "a namespace by definition: %v", err)

	// Only the server's admins read across spaces.
	alice := s.RESTConfig(t, spaces.WildcardOf(idA))
	alice.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	aliceDyn, err := dynamic.NewForConfig(alice)
	require.NoError(t, err)
	_, err = aliceDyn.Resource(v1).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "a user reading by definition: %v", err)

	// A watch of A: a space that comes to define A joins it.
	w, err := dyn(t, s, spaces.WildcardOf(idA)).Resource(v1).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	// next returns the watch's next event but bookmarks (a left-out
	// event's revision may come as one).
	next := func(what string) watch.Event {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case e, ok := <-w.ResultChan():
				require.True(t, ok, "the watch ended before %s", what)
				if e.Type != watch.Bookmark {
					return e
				}
			case <-deadline:
				t.Fatalf("no event for %s", what)
				return watch.Event{}
			}
		}
	}
	createSpace(t, s, "def-a3")
	define("def-a3", defA)
	require.Equal(t, idA, ids["def-a3"])
	create("def-c", v1, "c2") // not A's: the next event is a3's
	create("def-a3", v1, "a3")
	e := next("a3's widget")
	require.Equal(t, watch.Added, e.Type)
	got := e.Object.(*unstructured.Unstructured)
	require.Equal(t, "def-a3/a3", got.GetAnnotations()[spaces.Annotation]+"/"+got.GetName())
	since := got.GetResourceVersion()

	// def-a1 moves to C: the watch of A expires, and one from before the
	// move is refused so.
	c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "def-a1"))
	require.NoError(t, err)
	eventually(t, time.Minute, func() (bool, error) {
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, defA.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		crd.Spec = *defC.Spec.DeepCopy()
		_, err = c.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err == nil, err
	}, "def-a1's CRD moved to C")
	eventually(t, time.Minute, func() (bool, error) {
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, defA.Name, metav1.GetOptions{})
		return err == nil && spaces.DefinitionIdentity(crd) == idC, err
	}, "def-a1's CRD is C's")
	e = next("the move")
	require.Equal(t, watch.Error, e.Type, "the watch of A after def-a1 moved: %v", e)
	require.True(t, apierrors.IsResourceExpired(apierrors.FromObject(e.Object)), "%v", e.Object)
	_, err = dyn(t, s, spaces.WildcardOf(idA)).Resource(v1).Watch(ctx, metav1.ListOptions{ResourceVersion: since})
	require.True(t, apierrors.IsResourceExpired(err), "a watch of A from before the move: %v", err)

	gotA, rv = listed(spaces.WildcardOf(idA), v1)
	require.Equal(t, []string{"def-a2/a2", "def-a3/a3"}, gotA, "A after def-a1 left it")
	gotC, _ := listed(spaces.WildcardOf(idC), v1)
	require.Equal(t, []string{"def-a1/a1", "def-c/c", "def-c/c2"}, gotC, "C after def-a1 joined it with its widget")
	w2, err := dyn(t, s, spaces.WildcardOf(idA)).Resource(v1).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	require.NoError(t, err, "a watch of A from after the move")
	w2.Stop()
}

func ptrTo[T any](v T) *T { return &v }
