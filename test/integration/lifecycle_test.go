// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/placement"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestCRDsAreBoundPerSpace installs a real CRD (the namespaced one of each
// workload set: the project's Backup, Gateway API's Gateway) in one space:
// another space does not see it (nor its group in discovery) until it
// creates the same CRD, which then shares it; a different definition under
// the name is refused. A space's delete unbinds it there only, taking that
// space's instances and no other's; the last one deletes it. The bound
// layout (--crds-per-space=false); crdsperspace_test.go tests the other.
func TestCRDsAreBoundPerSpace(t *testing.T) {
	harness.EachWorkloadSet(t, func(t *testing.T, w harness.WorkloadSet) {
		s := harness.StartInProcessWith(t, "", boundCRDs)
		ctx := t.Context()
		for _, space := range []string{"one", "two", "three"} {
			createSpace(t, s, space)
		}

		data, err := os.ReadFile(w.NamespacedCRD)
		require.NoError(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.Unmarshal(data, crd))
		require.Equal(t, apiextensionsv1.NamespaceScoped, crd.Spec.Scope, "%s must define a namespaced kind", w.NamespacedCRD)
		group, version := crd.Spec.Group, placement.PreferredVersion(crd)
		gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: crd.Spec.Names.Plural}
		instance := firstOfKind(t, w.CRs, crd.Spec.Names.Kind)
		instance.SetNamespace("default")
		name := instance.GetName()
		crds := func(space string) apiextensionsv1client.CustomResourceDefinitionInterface {
			ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
			require.NoError(t, err)
			return ext.ApiextensionsV1().CustomResourceDefinitions()
		}
		legacyGroups := func(space string) map[string]string { // group -> preferred version
			var list metav1.APIGroupList
			raw, err := kube(t, s, space).Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, &list))
			groups := map[string]string{}
			for _, g := range list.Groups {
				groups[g.Name] = g.PreferredVersion.Version
			}
			return groups
		}
		servedIn := func(space string) bool { // by aggregated discovery, as kubectl asks
			_, resources, err := kube(t, s, space).Discovery().ServerGroupsAndResources()
			require.NoError(t, err)
			for _, list := range resources {
				for _, r := range list.APIResources {
					if list.GroupVersion == group+"/"+version && r.Name == gvr.Resource {
						return true
					}
				}
			}
			return false
		}

		watchTwo, err := crds("two").Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		defer watchTwo.Stop()
		_, err = crds("one").Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, func() (bool, error) {
			_, err := dyn(t, s, "one").Resource(gvr).Namespace("default").Create(ctx, instance.DeepCopy(), metav1.CreateOptions{})
			return err == nil, err
		}, "a %s to be created in space one", crd.Spec.Names.Kind)
		eventually(t, 10*time.Second, func() (bool, error) {
			return legacyGroups("one")[group] == version && servedIn("one"), nil
		}, "the CRD's group in space one's discovery")

		// Space two has none of it.
		_, err = crds("two").Get(ctx, crd.Name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "space two sees another space's CRD: %v", err)
		list, err := crds("two").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, c := range list.Items {
			require.NotEqual(t, crd.Name, c.Name, "space two lists another space's CRD")
		}
		_, err = dyn(t, s, "two").Resource(gvr).Namespace("default").Create(ctx, instance.DeepCopy(), metav1.CreateOptions{})
		require.True(t, apierrors.IsNotFound(err), "space two serves another space's CRD: %v", err)
		require.NotContains(t, legacyGroups("two"), group)
		require.False(t, servedIn("two"), "space two's discovery shows another space's CRD")
		// In every representation the server answers in, aggregated
		// discovery included: the filter reads JSON, and YAML is JSON's
		// answer converted.
		for _, accept := range []string{"application/yaml", "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"} {
			for _, space := range []string{"one", "two"} {
				raw, err := kube(t, s, space).Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", accept).DoRaw(ctx)
				require.NoError(t, err, "/apis in %s as %s", space, accept)
				require.Contains(t, string(raw), "apps", "/apis in %s as %s is a discovery document", space, accept)
				require.Equal(t, space == "one", strings.Contains(string(raw), group), "/apis in %s as %s names %s:\n%s", space, accept, group, raw)
			}
		}
		// Nor by another method or path: the discovery and OpenAPI
		// handlers answer any method and strip any trailing slashes.
		rc := kube(t, s, "two").Discovery().RESTClient()
		for _, path := range []string{"/openapi/v2", "/openapi/v3", "/apis/" + group + "/" + version} {
			raw, err := rc.Post().AbsPath(path).DoRaw(ctx)
			require.True(t, apierrors.IsMethodNotSupported(err), "POST %s in space two: %v %s", path, err, raw)
			require.NotContains(t, string(raw), group)
		}
		// (A raw request: client-go cleans the path.)
		cfg := s.RESTConfig(t, "two")
		httpClient, err := rest.HTTPClientFor(cfg)
		require.NoError(t, err)
		for _, path := range []string{"/apis/" + group + "/" + version + "//", "/apis/" + group + "///"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
			require.NoError(t, err)
			resp, err := httpClient.Do(req)
			require.NoError(t, err)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "GET %s in space two: %s", path, raw)
			require.NotContains(t, string(raw), crd.Spec.Names.Plural)
		}
		inOpenAPIV2 := func(space string) bool { // as client-go reads it, in protobuf
			doc, err := kube(t, s, space).Discovery().OpenAPISchema()
			require.NoError(t, err)
			for _, p := range doc.GetPaths().GetPath() {
				if strings.HasPrefix(p.GetName(), "/apis/"+group+"/") {
					return true
				}
			}
			return false
		}
		require.False(t, inOpenAPIV2("two"), "space two's OpenAPI v2 shows another space's CRD")
		eventually(t, 10*time.Second, func() (bool, error) { return inOpenAPIV2("one"), nil }, "the CRD in space one's OpenAPI v2")

		// A tenant cannot write bindings: its annotation is dropped, on
		// update as on create.
		mine, err := crds("one").Get(ctx, crd.Name, metav1.GetOptions{})
		require.NoError(t, err)
		metav1.SetMetaDataAnnotation(&mine.ObjectMeta, spaces.BoundAnnotation, spaces.AllSpaces)
		_, err = crds("one").Update(ctx, mine, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, err = crds("two").Get(ctx, crd.Name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a tenant's bindings annotation bound its CRD elsewhere: %v", err)
		forged := crd.DeepCopy()
		forged.Name = "forged." + group
		forged.Spec.Names.Plural, forged.Spec.Names.Singular = "forged", "forged"
		forged.Spec.Names.Kind, forged.Spec.Names.ListKind, forged.Spec.Names.ShortNames = "Forged", "ForgedList", nil
		metav1.SetMetaDataAnnotation(&forged.ObjectMeta, spaces.BoundAnnotation, spaces.AllSpaces)
		_, err = crds("one").Create(ctx, forged, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = crds("two").Get(ctx, forged.Name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a tenant's bindings annotation on create: %v", err)
		require.NoError(t, crds("one").Delete(ctx, forged.Name, metav1.DeleteOptions{}))

		// The same definition is shared; a different one refused.
		_, err = crds("two").Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
		require.NoError(t, err)
		expectEvent(t, watchTwo, watch.Added, crd.Name)
		eventually(t, 30*time.Second, func() (bool, error) {
			_, err := dyn(t, s, "two").Resource(gvr).Namespace("default").Create(ctx, instance.DeepCopy(), metav1.CreateOptions{})
			return err == nil, err
		}, "a %s to be created in space two", crd.Spec.Names.Kind)
		got, err := dyn(t, s, "two").Resource(gvr).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "two", got.GetAnnotations()[spaces.Annotation])
		all, err := dyn(t, s, spaces.Wildcard).Resource(gvr).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, all.Items, 2)
		seen, err := crds("two").Get(ctx, crd.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotContains(t, seen.Annotations, spaces.BoundAnnotation, "a space sees which other spaces share a CRD")
		different := crd.DeepCopy()
		different.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}
		different.Spec.Versions[0].Subresources = nil
		_, err = crds("three").Create(ctx, different, metav1.CreateOptions{})
		require.True(t, apierrors.IsConflict(err), "a different definition under a shared name: %v", err)
		require.Contains(t, err.Error(), "different definition")
		// Server-side apply binds as create does (a create by update).
		applied, err := json.Marshal(crd)
		require.NoError(t, err)
		_, err = crds("three").Patch(ctx, crd.Name, types.ApplyPatchType, applied, metav1.PatchOptions{FieldManager: "test"})
		require.NoError(t, err)
		_, err = crds("three").Get(ctx, crd.Name, metav1.GetOptions{})
		require.NoError(t, err, "server-side apply of a shared CRD")
		require.NoError(t, crds("three").Delete(ctx, crd.Name, metav1.DeleteOptions{}))
		seen.Spec.Versions[0].Schema = different.Spec.Versions[0].Schema
		_, err = crds("two").Update(ctx, seen, metav1.UpdateOptions{})
		require.True(t, apierrors.IsConflict(err), "a shared CRD changed from one space: %v", err)

		// One space's delete unbinds it there, with that space's instances only.
		require.NoError(t, crds("one").Delete(ctx, crd.Name, metav1.DeleteOptions{}))
		eventually(t, 30*time.Second, func() (bool, error) {
			_, err := crds("one").Get(ctx, crd.Name, metav1.GetOptions{})
			all, lerr := dyn(t, s, spaces.Wildcard).Resource(gvr).List(ctx, metav1.ListOptions{})
			return apierrors.IsNotFound(err) && lerr == nil && len(all.Items) == 1, lerr
		}, "space one's CRD and instances to go")
		_, err = dyn(t, s, "two").Resource(gvr).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "space one's delete took space two's instance")
		// Discovery follows the bindings through the server's cache of
		// CRDs, a moment later, as a cluster's follows a CRD's delete.
		eventually(t, 30*time.Second, func() (bool, error) {
			_, inOne := legacyGroups("one")[group]
			return !inOne, nil
		}, "discovery in space one to leave out %s", group)
		require.Contains(t, legacyGroups("two"), group)

		// The last space's delete deletes it.
		require.NoError(t, crds("two").Delete(ctx, crd.Name, metav1.DeleteOptions{}))
		expectEvent(t, watchTwo, watch.Deleted, crd.Name)
		eventually(t, 30*time.Second, func() (bool, error) {
			stored, err := crds(spaces.Wildcard).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range stored.Items {
				if c.Name == crd.Name {
					return false, nil
				}
			}
			return true, nil
		}, "the CRD to be deleted")
		eventually(t, 30*time.Second, func() (bool, error) {
			_, inTwo := legacyGroups("two")[group]
			return !inTwo, nil
		}, "a deleted CRD's group to leave the legacy /apis list")
		groups := legacyGroups("two")
		require.Contains(t, groups, "apiextensions.k8s.io")
		require.Contains(t, groups, "tenancy.kubestellar.io")

		// Recreate the CRD: no instance of any space may come back.
		crd.ResourceVersion = ""
		_, err = crds("one").Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, func() (bool, error) {
			list, err := dyn(t, s, "one").Resource(gvr).List(ctx, metav1.ListOptions{})
			all, werr := dyn(t, s, spaces.Wildcard).Resource(gvr).List(ctx, metav1.ListOptions{})
			return err == nil && werr == nil && len(list.Items) == 0 && len(all.Items) == 0, errors.Join(err, werr)
		}, "the recreated CRD to be served with no instances")

		// A deleted space unbinds its CRDs: the last one's deletion deletes it.
		_, err = crds("three").Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err)
		stored := func() (string, bool) {
			list, err := crds(spaces.Wildcard).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, c := range list.Items {
				if c.Name == crd.Name {
					return c.Annotations[spaces.BoundAnnotation], true
				}
			}
			return "", false
		}
		bound, _ := stored()
		require.Equal(t, "one,three", bound)
		spacesClient := dyn(t, s, spaces.Root).Resource(tenancyv1alpha1.SpacesGVR)
		require.NoError(t, spacesClient.Delete(ctx, "three", metav1.DeleteOptions{}))
		eventually(t, 30*time.Second, func() (bool, error) {
			bound, _ := stored()
			return bound == "one", nil
		}, "the deleted space's binding to go")
		require.NoError(t, spacesClient.Delete(ctx, "one", metav1.DeleteOptions{}))
		eventually(t, 30*time.Second, func() (bool, error) {
			_, found := stored()
			return !found, nil
		}, "the CRD of the last space that served it to go with it")
	})
}

// expectEvent waits for an event of a type about the named object.
func expectEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			require.True(t, ok, "the watch ended before a %s event for %s", typ, name)
			if m, err := meta.Accessor(e.Object); err == nil && e.Type == typ && m.GetName() == name {
				return
			}
		case <-deadline:
			require.Failf(t, "no event", "no %s event for %s within 30 s", typ, name)
		}
	}
}

// firstOfKind returns the first object of a kind in a manifest.
func firstOfKind(t *testing.T, file, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range harness.Manifests(t, file) {
		if obj.GetKind() == kind {
			return obj
		}
	}
	require.Failf(t, "no instance", "%s holds no %s", file, kind)
	return nil
}

// TestDeletingASpaceRemovesEverythingInIt fills a space and deletes it.
func TestDeletingASpaceRemovesEverythingInIt(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "doomed")
	createSpace(t, s, "kept")
	for _, space := range []string{"doomed", "kept"} {
		c := kube(t, s, space)
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, name := range []string{"a", "b", "c"} {
			_, err := c.CoreV1().ConfigMaps("app").Create(ctx, configMap("app", name, space), metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	spacesClient := dyn(t, s, spaces.Root).Resource(tenancyv1alpha1.SpacesGVR)
	require.NoError(t, spacesClient.Delete(ctx, "doomed", metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := spacesClient.Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, "the Space to be deleted")

	count := func(resource string, opts metav1.ListOptions) map[string]int {
		gvr := schema.GroupVersionResource{Version: "v1", Resource: resource}
		list, err := dyn(t, s, spaces.Wildcard).Resource(gvr).List(ctx, opts)
		require.NoError(t, err)
		out := map[string]int{}
		for _, item := range list.Items {
			out[item.GetAnnotations()[spaces.Annotation]]++
		}
		return out
	}
	require.Equal(t, 0, count("configmaps", metav1.ListOptions{})["doomed"], "nothing of the space is left, the server's own ConfigMaps included")
	require.Equal(t, 0, count("namespaces", metav1.ListOptions{})["doomed"])
	require.Equal(t, 3, count("configmaps", written)["kept"])

	_, err := kube(t, s, "doomed").CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsNotFound(err), "a deleted space is not served: %v", err)

	// A new space of the same name starts empty.
	createSpace(t, s, "doomed")
	cms, err := kube(t, s, "doomed").CoreV1().ConfigMaps("").List(ctx, written)
	require.NoError(t, err)
	require.Empty(t, cms.Items)
}

// TestDeletingANamespaceDeletesItsContentsInItsSpaceOnly deletes a namespace
// in one space while a namespace of the same name lives in another.
func TestDeletingANamespaceDeletesItsContentsInItsSpaceOnly(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "one")
	createSpace(t, s, "two")
	for _, space := range []string{"one", "two"} {
		c := kube(t, s, space)
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.CoreV1().ConfigMaps("app").Create(ctx, configMap("app", "cm", space), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.CoreV1().Secrets("app").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	one := kube(t, s, "one")
	require.NoError(t, one.CoreV1().Namespaces().Delete(ctx, "app", metav1.DeleteOptions{}))
	ns, err := one.CoreV1().Namespaces().Get(ctx, "app", metav1.GetOptions{})
	if err == nil {
		require.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
		_, err = one.CoreV1().ConfigMaps("app").Create(ctx, configMap("app", "late", "x"), metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "no new content in a terminating namespace: %v", err)
	}
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := one.CoreV1().Namespaces().Get(ctx, "app", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, "the namespace to be gone")
	_, err = one.CoreV1().ConfigMaps("app").Get(ctx, "cm", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))

	two := kube(t, s, "two")
	cm, err := two.CoreV1().ConfigMaps("app").Get(ctx, "cm", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "two", cm.Data["v"])
	secret, err := two.CoreV1().Secrets("app").Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []byte("v"), secret.Data["k"], "stringData is folded into data")
	require.Empty(t, secret.StringData)
}

// TestCRDDeletedRightAfterItsCreation deletes CRDs a moment after creating
// them, before anything has read their instances: the CRD finalizer's list
// of instances is then the first read of a watch cache still filling,
// which refuses it ("storage is (re)initializing"), and the finalizer's
// retry can lose a race with its own informer and leave the CRD
// Terminating until the next resync, minutes later (its group stays in
// the space's discovery meanwhile). Every CRD must go at once, and never
// report a failed deletion of its instances.
func TestCRDDeletedRightAfterItsCreation(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := t.Context()
	createSpace(t, s, "one")
	ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "one"))
	require.NoError(t, err)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	w, err := crds.Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()

	const n = 4
	pending := map[string]bool{}
	for i := range n {
		plural := fmt.Sprintf("gadgets%d", i)
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: fmt.Sprintf("gadget%d", i),
					Kind: fmt.Sprintf("Gadget%d", i), ListKind: fmt.Sprintf("Gadget%dList", i)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
			},
		}
		_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, crds.Delete(ctx, crd.Name, metav1.DeleteOptions{}))
		pending[crd.Name] = true
	}

	deadline := time.After(30 * time.Second)
	for len(pending) > 0 {
		select {
		case e, ok := <-w.ResultChan():
			require.True(t, ok, "the watch of space one's CRDs ended")
			crd, ok := e.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				continue
			}
			for _, c := range crd.Status.Conditions {
				require.False(t, c.Type == apiextensionsv1.Terminating && c.Reason == "InstanceDeletionFailed",
					"CRD %s: %s: %s", crd.Name, c.Reason, c.Message)
			}
			if e.Type == watch.Deleted {
				delete(pending, crd.Name)
			}
		case <-deadline:
			require.Failf(t, "CRDs left", "CRDs deleted right after their creation still there after 30 s: %v", pending)
		}
	}
	all, err := apiextensionsv1client.NewForConfigOrDie(s.RESTConfig(t, spaces.Wildcard)).CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range all.Items {
		require.False(t, strings.HasPrefix(c.Name, "gadgets"), "CRD %s is still stored", c.Name)
	}
}
