// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestStorageVersionMigrationPerSpace: a StorageVersionMigration rewrites
// the objects of its resource in its own space into the storage version
// and encoding in force now (a CRD whose storage version moved from v1 to
// v2; ConfigMaps stored as JSON by an older release), across a restart,
// and touches nothing in another space; one naming a resource its space
// does not serve fails, saying so.
func TestStorageVersionMigrationPerSpace(t *testing.T) {
	dataDir := t.TempDir()
	s := harness.StartInProcess(t, dataDir)
	ctx := context.Background()
	createSpace(t, s, "one")
	createSpace(t, s, "two")
	old := map[string]*corev1.ConfigMap{}
	for _, space := range []string{"one", "two"} {
		cm, err := kube(t, s, space).CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "old", space), metav1.CreateOptions{})
		require.NoError(t, err)
		old[space] = cm
	}
	crd := widgetCRD()
	v2 := crd.Spec.Versions[0]
	v2.Name, v2.Storage = "v2", false
	crd.Spec.Versions = append(crd.Spec.Versions, v2)
	ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "one"))
	require.NoError(t, err)
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": "default"}, "spec": map[string]any{"size": int64(3)}}}
	eventually(t, time.Minute, func() (bool, error) {
		_, err := dyn(t, s, "one").Resource(widgetsGVR).Namespace("default").Create(ctx, widget, metav1.CreateOptions{})
		return err == nil, err
	}, "the widget to be created")
	s.Stop()

	// Both spaces' ConfigMaps as an older release stored them: JSON.
	db := openState(t, dataDir)
	for _, space := range []string{"one", "two"} {
		key, _ := latestRow(t, db, "%/configmaps/"+space+"/default/old")
		storeAsJSON(t, db, key, old[space])
	}
	require.NoError(t, db.Close())

	s = harness.StartInProcess(t, dataDir)
	ext, err = apiextensionsclient.NewForConfig(s.RESTConfig(t, "one"))
	require.NoError(t, err)
	got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	require.NoError(t, err)
	got.Spec.Versions[0].Storage, got.Spec.Versions[1].Storage = false, true
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)

	migration := func(name, group, resource string) *svmv1.StorageVersionMigration {
		return &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: group, Resource: resource}}}
	}
	one, two := kube(t, s, "one"), kube(t, s, "two")
	for _, m := range []*svmv1.StorageVersionMigration{migration("widgets", "example.com", "widgets"), migration("configmaps", "", "configmaps")} {
		_, err := one.StoragemigrationV1().StorageVersionMigrations().Create(ctx, m, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = two.StoragemigrationV1().StorageVersionMigrations().Create(ctx, migration("widgets", "example.com", "widgets"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = one.StoragemigrationV1().StorageVersionMigrations().Create(ctx, migration("nothing", "", ""), metav1.CreateOptions{})
	require.Error(t, err, "a migration of no resource is refused")

	condition := func(c kubernetes.Interface, name string, typ svmv1.MigrationConditionType) *metav1.Condition {
		t.Helper()
		var found *metav1.Condition
		eventually(t, time.Minute, func() (bool, error) {
			m, err := c.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			found = meta.FindStatusCondition(m.Status.Conditions, string(typ))
			return found != nil && found.Status == metav1.ConditionTrue, nil
		}, "migration %s to be %s", name, typ)
		return found
	}
	condition(one, "widgets", svmv1.MigrationSucceeded)
	condition(one, "configmaps", svmv1.MigrationSucceeded)
	failed := condition(two, "widgets", svmv1.MigrationFailed)
	require.Equal(t, "NotServed", failed.Reason)
	require.Contains(t, failed.Message, "widgets.example.com")
	s.Stop()

	db = openState(t, dataDir)
	defer db.Close()
	_, value := latestRow(t, db, "%/widgets/one/default/w1")
	var stored map[string]any
	require.NoError(t, json.Unmarshal(value, &stored))
	require.Equal(t, "example.com/v2", stored["apiVersion"], "the widget is stored in the new storage version")
	_, value = latestRow(t, db, "%/configmaps/one/default/old")
	require.True(t, bytes.HasPrefix(value, protobufMagic), "the ConfigMap of the migration's space is stored as protobuf now, got %q", truncate(value))
	_, value = latestRow(t, db, "%/configmaps/two/default/old")
	require.False(t, bytes.HasPrefix(value, protobufMagic), "the other space's ConfigMap is untouched")
}
