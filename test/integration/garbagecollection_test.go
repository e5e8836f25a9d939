// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubestellar/kubestellar/test/harness"
)

// ownedConfigMap is a ConfigMap owned by the object ref names.
func ownedConfigMap(ns, name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	cm := configMap(ns, name, name)
	cm.OwnerReferences = owners
	return cm
}

func ownerRef(apiVersion, kind, name string, uid types.UID, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, BlockOwnerDeletion: ptr.To(block)}
}

func configMapRef(cm *corev1.ConfigMap, block bool) metav1.OwnerReference {
	return ownerRef("v1", "ConfigMap", cm.Name, cm.UID, block)
}

// gone waits for a ConfigMap to be deleted.
func configMapGone(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, "ConfigMap %s/%s to be deleted", ns, name)
}

// TestGarbageCollectionPerSpace deletes owners with each propagation policy
// in two spaces that hold objects of the same names, and checks that the
// dependents go (or stay) in the owner's space only, across a restart.
func TestGarbageCollectionPerSpace(t *testing.T) {
	dataDir := t.TempDir()
	s := harness.StartInProcess(t, dataDir)
	ctx := context.Background()
	createSpace(t, s, "one")
	createSpace(t, s, "two")
	owners := map[string]*corev1.ConfigMap{}
	for _, space := range []string{"one", "two"} {
		c := kube(t, s, space)
		owner, err := c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "owner", space), metav1.CreateOptions{})
		require.NoError(t, err)
		owners[space] = owner
		_, err = c.CoreV1().ConfigMaps("default").Create(ctx, ownedConfigMap("default", "dependent", configMapRef(owner, false)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	one, two := kube(t, s, "one"), kube(t, s, "two")

	t.Run("a dependent that names another space's owner is an orphan of its own", func(t *testing.T) {
		// In two, "owner" has another UID than one's: the reference is
		// to nothing there, and the dependent goes as Kubernetes' would.
		_, err := two.CoreV1().ConfigMaps("default").Create(ctx, ownedConfigMap("default", "forged", configMapRef(owners["one"], false)), metav1.CreateOptions{})
		require.NoError(t, err)
		configMapGone(t, two, "default", "forged")
		_, err = one.CoreV1().ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{})
		require.NoError(t, err, "one's owner is not touched")
	})

	t.Run("background", func(t *testing.T) {
		require.NoError(t, one.CoreV1().ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{}))
		configMapGone(t, one, "default", "dependent")
		got, err := two.CoreV1().ConfigMaps("default").Get(ctx, "dependent", metav1.GetOptions{})
		require.NoError(t, err, "two's dependent of the same name stays")
		require.Equal(t, owners["two"].UID, got.OwnerReferences[0].UID)
	})

	t.Run("a dependent with another owner left keeps it", func(t *testing.T) {
		a, err := one.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "a", "a"), metav1.CreateOptions{})
		require.NoError(t, err)
		b, err := one.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "b", "b"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = one.CoreV1().ConfigMaps("default").Create(ctx, ownedConfigMap("default", "shared", configMapRef(a, false), configMapRef(b, false)), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, one.CoreV1().ConfigMaps("default").Delete(ctx, "a", metav1.DeleteOptions{}))
		eventually(t, 30*time.Second, func() (bool, error) {
			got, err := one.CoreV1().ConfigMaps("default").Get(ctx, "shared", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(got.OwnerReferences) == 1 && got.OwnerReferences[0].UID == b.UID, nil
		}, "the reference to the deleted owner to be dropped")
	})

	t.Run("orphan", func(t *testing.T) {
		owner, err := one.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "parent", "p"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = one.CoreV1().ConfigMaps("default").Create(ctx, ownedConfigMap("default", "child", configMapRef(owner, true)), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, one.CoreV1().ConfigMaps("default").Delete(ctx, "parent", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}))
		configMapGone(t, one, "default", "parent")
		child, err := one.CoreV1().ConfigMaps("default").Get(ctx, "child", metav1.GetOptions{})
		require.NoError(t, err, "the orphan stays")
		require.Empty(t, child.OwnerReferences)
	})

	t.Run("a cluster-scoped owner", func(t *testing.T) {
		role, err := one.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gc-owner"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = one.CoreV1().ConfigMaps("default").Create(ctx, ownedConfigMap("default", "of-role",
			ownerRef("rbac.authorization.k8s.io/v1", "ClusterRole", role.Name, role.UID, false)), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, one.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{}))
		configMapGone(t, one, "default", "of-role")
	})

	t.Run("custom resources", func(t *testing.T) {
		ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "one"))
		require.NoError(t, err)
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
		require.NoError(t, err)
		widgets := dyn(t, s, "one").Resource(widgetsGVR).Namespace("default")
		var owner *unstructured.Unstructured
		eventually(t, 30*time.Second, func() (bool, error) {
			w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "owner"}}}
			owner, err = widgets.Create(ctx, w, metav1.CreateOptions{})
			return err == nil, nil
		}, "the Widget CRD to serve")
		ref := ownerRef("example.com/v1", "Widget", "owner", owner.GetUID(), true)
		dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "dependent"}}}
		dep.SetOwnerReferences([]metav1.OwnerReference{ref})
		_, err = widgets.Create(ctx, dep, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = one.CoreV1().ConfigMaps("default").Create(ctx, ownedConfigMap("default", "of-widget", ref), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, widgets.Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}))
		configMapGone(t, one, "default", "of-widget")
		eventually(t, 30*time.Second, func() (bool, error) {
			list, err := widgets.List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, err
		}, "both Widgets to be deleted")
	})

	t.Run("a circle deleted in the foreground", func(t *testing.T) {
		// c1 owns c2 owns c3 owns c1, every reference blocking: each
		// waits for the next, until one stops blocking (as Kubernetes'
		// collector unblocks a circle).
		cms := one.CoreV1().ConfigMaps("default")
		c1, err := cms.Create(ctx, configMap("default", "c1", "1"), metav1.CreateOptions{})
		require.NoError(t, err)
		c2, err := cms.Create(ctx, ownedConfigMap("default", "c2", configMapRef(c1, true)), metav1.CreateOptions{})
		require.NoError(t, err)
		c3, err := cms.Create(ctx, ownedConfigMap("default", "c3", configMapRef(c2, true)), metav1.CreateOptions{})
		require.NoError(t, err)
		c1.OwnerReferences = []metav1.OwnerReference{configMapRef(c3, true)}
		_, err = cms.Update(ctx, c1, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, cms.Delete(ctx, "c1", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}))
		for _, name := range []string{"c1", "c2", "c3"} {
			configMapGone(t, one, "default", name)
		}
	})

	// A dependent that blocks its owner's foreground deletion, held by a
	// finalizer of its own across a restart.
	owner, err := one.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "fg-owner", "o"), metav1.CreateOptions{})
	require.NoError(t, err)
	held := ownedConfigMap("default", "fg-held", configMapRef(owner, true))
	held.Finalizers = []string{"example.com/hold"}
	_, err = one.CoreV1().ConfigMaps("default").Create(ctx, held, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = one.CoreV1().ConfigMaps("default").Create(ctx, ownedConfigMap("default", "fg-free", configMapRef(owner, false)), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, one.CoreV1().ConfigMaps("default").Delete(ctx, "fg-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}))
	configMapGone(t, one, "default", "fg-free")
	eventually(t, 30*time.Second, func() (bool, error) {
		got, err := one.CoreV1().ConfigMaps("default").Get(ctx, "fg-held", metav1.GetOptions{})
		return err == nil && got.DeletionTimestamp != nil, err
	}, "the blocking dependent to be deleting")
	got, err := one.CoreV1().ConfigMaps("default").Get(ctx, "fg-owner", metav1.GetOptions{})
	require.NoError(t, err, "the owner waits for its blocking dependent")
	require.NotNil(t, got.DeletionTimestamp)
	require.Contains(t, got.Finalizers, metav1.FinalizerDeleteDependents)

	s.Stop()
	s = harness.StartInProcess(t, dataDir)
	one = kube(t, s, "one")
	got, err = one.CoreV1().ConfigMaps("default").Get(ctx, "fg-owner", metav1.GetOptions{})
	require.NoError(t, err, "the owner still waits after the restart")
	require.Contains(t, got.Finalizers, metav1.FinalizerDeleteDependents)
	_, err = one.CoreV1().ConfigMaps("default").Patch(ctx, "fg-held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	configMapGone(t, one, "default", "fg-held")
	configMapGone(t, one, "default", "fg-owner")
	_, err = kube(t, s, "two").CoreV1().ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{})
	require.NoError(t, err, "two's owner is not touched")
}
