// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

func configMap(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"v": value}}
}

// TestSpacesKeepSameNamedObjectsApart writes identical objects into two
// spaces and checks that no verb ever crosses from one to the other.
func TestSpacesKeepSameNamedObjectsApart(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "alpha")
	createSpace(t, s, "beta")
	a, b := kube(t, s, "alpha"), kube(t, s, "beta")

	for _, client := range []struct {
		space string
		value string
	}{{"alpha", "a"}, {"beta", "b"}} {
		c := kube(t, s, client.space)
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// Watches opened before the writes see only their own space.
	watchA, err := a.CoreV1().ConfigMaps("demo").Watch(ctx, written)
	require.NoError(t, err)
	defer watchA.Stop()

	_, err = a.CoreV1().ConfigMaps("demo").Create(ctx, configMap("demo", "same", "a"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = b.CoreV1().ConfigMaps("demo").Create(ctx, configMap("demo", "same", "b"), metav1.CreateOptions{})
	require.NoError(t, err, "the same name in another space is no conflict")

	gotA, err := a.CoreV1().ConfigMaps("demo").Get(ctx, "same", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "a", gotA.Data["v"])
	require.Equal(t, "alpha", gotA.Annotations[spaces.Annotation])
	gotB, err := b.CoreV1().ConfigMaps("demo").Get(ctx, "same", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "b", gotB.Data["v"])
	require.NotEqual(t, gotA.UID, gotB.UID)

	// Update, merge patch and server-side apply in beta leave alpha alone.
	gotB.Data["v"] = "b2"
	_, err = b.CoreV1().ConfigMaps("demo").Update(ctx, gotB, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = b.CoreV1().ConfigMaps("demo").Patch(ctx, "same", types.MergePatchType, []byte(`{"data":{"p":"patched"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = b.CoreV1().ConfigMaps("demo").Apply(ctx, corev1apply.ConfigMap("same", "demo").WithData(map[string]string{"ssa": "yes"}),
		metav1.ApplyOptions{FieldManager: "test", Force: true})
	require.NoError(t, err)
	gotA, err = a.CoreV1().ConfigMaps("demo").Get(ctx, "same", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"v": "a"}, gotA.Data, "writes in beta must not reach alpha")

	// Lists see one object each.
	listA, err := a.CoreV1().ConfigMaps("").List(ctx, written)
	require.NoError(t, err)
	require.Len(t, listA.Items, 1)
	require.Equal(t, "a", listA.Items[0].Data["v"])

	// Delete in beta; alpha keeps its object.
	require.NoError(t, b.CoreV1().ConfigMaps("demo").Delete(ctx, "same", metav1.DeleteOptions{}))
	_, err = b.CoreV1().ConfigMaps("demo").Get(ctx, "same", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "deleted in beta: %v", err)
	_, err = a.CoreV1().ConfigMaps("demo").Get(ctx, "same", metav1.GetOptions{})
	require.NoError(t, err)

	// alpha's watch saw exactly alpha's create, and nothing of beta's writes.
	select {
	case ev := <-watchA.ResultChan():
		require.Equal(t, watch.Added, ev.Type)
		require.Equal(t, "a", ev.Object.(*corev1.ConfigMap).Data["v"])
	case <-time.After(10 * time.Second):
		t.Fatal("alpha's watch saw no event")
	}
	// Make one more write in alpha as a marker: the next event must be it.
	_, err = a.CoreV1().ConfigMaps("demo").Create(ctx, configMap("demo", "marker", "a"), metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case ev := <-watchA.ResultChan():
		cm := ev.Object.(*corev1.ConfigMap)
		require.Equal(t, "marker", cm.Name, "alpha's watch delivered %s %s/%s of space %s", ev.Type, cm.Namespace, cm.Name, cm.Annotations[spaces.Annotation])
	case <-time.After(10 * time.Second):
		t.Fatal("alpha's watch missed the marker")
	}
}

// TestWildcardListsAndWatchesAcrossSpaces checks that privileged controllers
// see every space's objects, each carrying its space, and cannot write.
func TestWildcardListsAndWatchesAcrossSpaces(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "one")
	createSpace(t, s, "two")
	all := kube(t, s, spaces.Wildcard)
	w, err := all.CoreV1().ConfigMaps("").Watch(ctx, written)
	require.NoError(t, err)
	defer w.Stop()
	for _, space := range []string{"one", "two"} {
		_, err := kube(t, s, space).CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "cm", space), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	seen := map[string]string{}
	for len(seen) < 2 {
		select {
		case ev := <-w.ResultChan():
			cm := ev.Object.(*corev1.ConfigMap)
			seen[cm.Annotations[spaces.Annotation]] = cm.Data["v"]
		case <-time.After(10 * time.Second):
			t.Fatalf("wildcard watch saw only %v", seen)
		}
	}
	require.Equal(t, map[string]string{"one": "one", "two": "two"}, seen)

	list, err := all.CoreV1().ConfigMaps("").List(ctx, written)
	require.NoError(t, err)
	bySpace := map[string]int{}
	for _, cm := range list.Items {
		bySpace[cm.Annotations[spaces.Annotation]]++
	}
	require.Equal(t, map[string]int{"one": 1, "two": 1}, bySpace)

	_, err = all.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "x", "x"), metav1.CreateOptions{})
	require.True(t, apierrors.IsBadRequest(err), "writes through the wildcard are refused: %v", err)
	_, err = all.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{})
	require.True(t, apierrors.IsBadRequest(err), "gets through the wildcard are refused: %v", err)
}
