package integration

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/spacecontroller"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestCRDsAreGlobalAndTheirInstancesPerSpace installs a real CRD (the
// namespaced one of each workload set: the project's Backup, Gateway API's
// Gateway) in one space, creates instances in two, and deletes the CRD:
// every space's instances go, and the CRD does not hang.
func TestCRDsAreGlobalAndTheirInstancesPerSpace(t *testing.T) {
	harness.EachWorkloadSet(t, func(t *testing.T, w harness.WorkloadSet) {
		s := harness.StartInProcess(t, "")
		ctx := t.Context()
		createSpace(t, s, "one")
		createSpace(t, s, "two")

		data, err := os.ReadFile(w.NamespacedCRD)
		require.NoError(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.Unmarshal(data, crd))
		require.Equal(t, apiextensionsv1.NamespaceScoped, crd.Spec.Scope, "%s must define a namespaced kind", w.NamespacedCRD)
		group, version := crd.Spec.Group, preferredVersion(crd)
		gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: crd.Spec.Names.Plural}
		instance := firstOfKind(t, w.CRs, crd.Spec.Names.Kind)
		instance.SetNamespace("default")
		name := instance.GetName()

		ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "one"))
		require.NoError(t, err)
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err)

		for _, space := range []string{"one", "two"} {
			client := dyn(t, s, space).Resource(gvr).Namespace("default")
			eventually(t, 30*time.Second, func() (bool, error) {
				_, err := client.Create(ctx, instance.DeepCopy(), metav1.CreateOptions{})
				return err == nil, err
			}, "a %s to be created in space %s", crd.Spec.Names.Kind, space)
		}
		got, err := dyn(t, s, "two").Resource(gvr).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "two", got.GetAnnotations()[spaces.Annotation])
		all, err := dyn(t, s, spaces.Wildcard).Resource(gvr).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, all.Items, 2)
		legacyGroups := func() map[string]string { // group -> preferred version
			var list metav1.APIGroupList
			raw, err := kube(t, s, "two").Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, &list))
			groups := map[string]string{}
			for _, g := range list.Groups {
				groups[g.Name] = g.PreferredVersion.Version
			}
			return groups
		}
		eventually(t, 10*time.Second, func() (bool, error) {
			return legacyGroups()[group] == version, nil
		}, "the CRD's group in the legacy (non-aggregated) /apis list")

		require.NoError(t, ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}))
		eventually(t, 30*time.Second, func() (bool, error) {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		}, "the CRD to be deleted")

		groups := legacyGroups()
		require.NotContains(t, groups, group, "a deleted CRD's group leaves the legacy /apis list")
		require.Contains(t, groups, "apiextensions.k8s.io")
		require.Contains(t, groups, "tenancy.kubestellar.io")

		// Recreate the CRD: no instance of any space may come back.
		crd.ResourceVersion = ""
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, func() (bool, error) {
			list, err := dyn(t, s, spaces.Wildcard).Resource(gvr).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, err
		}, "the recreated CRD to be served with no instances")
	})
}

// preferredVersion is the version discovery prefers among a CRD's served
// versions: the highest by Kubernetes' version order (v1 > v1beta1).
func preferredVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	preferred := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && (preferred == "" || version.CompareKubeAwareVersionStrings(v.Name, preferred) > 0) {
			preferred = v.Name
		}
	}
	return preferred
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
	spacesClient := dyn(t, s, spaces.Root).Resource(spacecontroller.SpacesGVR)
	require.NoError(t, spacesClient.Delete(ctx, "doomed", metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := spacesClient.Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, "the Space to be deleted")

	count := func(resource string) map[string]int {
		gvr := schema.GroupVersionResource{Version: "v1", Resource: resource}
		list, err := dyn(t, s, spaces.Wildcard).Resource(gvr).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		out := map[string]int{}
		for _, item := range list.Items {
			out[item.GetAnnotations()[spaces.Annotation]]++
		}
		return out
	}
	require.Equal(t, 0, count("configmaps")["doomed"])
	require.Equal(t, 0, count("namespaces")["doomed"])
	require.Equal(t, 3, count("configmaps")["kept"])

	_, err := kube(t, s, "doomed").CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsNotFound(err), "a deleted space is not served: %v", err)

	// A new space of the same name starts empty.
	createSpace(t, s, "doomed")
	cms, err := kube(t, s, "doomed").CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
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
