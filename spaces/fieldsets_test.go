// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// crStorage lists what it holds (unstructured, as a custom resource's
// storage decodes them) and watches a fake.
type crStorage struct {
	storage.Interface
	items []string // JSON
	w     *watch.FakeWatcher
}

func (s *crStorage) GetList(_ context.Context, _ string, _ storage.ListOptions, listObj runtime.Object) error {
	list := listObj.(*unstructured.UnstructuredList)
	for _, item := range s.items {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(item)); err != nil {
			return err
		}
		list.Items = append(list.Items, *u)
	}
	return nil
}

func (s *crStorage) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return s.w, nil
}

// target is a SyncTarget as the server stores it: written by its creator
// (with a label), then by the mailbox controller (finalizer, status).
func target(space, name, label string) string {
	return fmt.Sprintf(`{"apiVersion":"edge.kubestellar.io/v1alpha1","kind":"SyncTarget","metadata":{"name":%q,
	"annotations":{"kubestellar.io/space":%q},"finalizers":["edge.kubestellar.io/mailbox"],"managedFields":[
	{"apiVersion":"edge.kubestellar.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:%s":{}}},"f:spec":{".":{},"f:cells":{}}},"manager":"kubectl","operation":"Update","time":"2026-11-27T10:00:00Z"},
	{"apiVersion":"edge.kubestellar.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:finalizers":{".":{},"v:\"edge.kubestellar.io/mailbox\"":{}}}},"manager":"kubestellar-mailbox-controller","operation":"Update","time":"2026-11-27T10:00:01Z"},
	{"apiVersion":"edge.kubestellar.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:mailboxSpace":{}}},"manager":"kubestellar-mailbox-controller","operation":"Update","subresource":"status","time":"2026-11-27T10:00:02Z"}]},
	"spec":{"cells":{"zone":"a"}},"status":{"mailboxSpace":"mb"}}`, name, space, label)
}

// sets returns the address of each field set of an unstructured object.
func sets(t *testing.T, u *unstructured.Unstructured) []uintptr {
	t.Helper()
	var out []uintptr
	entries, _, _ := unstructured.NestedSlice(u.Object, "metadata", "managedFields")
	require.NotEmpty(t, entries)
	for _, e := range u.Object["metadata"].(map[string]any)["managedFields"].([]any) {
		out = append(out, reflect.ValueOf(e.(map[string]any)["fieldsV1"]).Pointer())
	}
	return out
}

// A watch cache's objects share equal field sets, listed or watched, and
// are otherwise as the datastore gave them.
func TestCacheSourceSharesFieldSets(t *testing.T) {
	raw := &crStorage{w: watch.NewFakeWithChanSize(4, false),
		items: []string{target("inv1", "edge1", "region"), target("inv1", "edge2", "region"), target("inv2", "edge1", "zone")}}
	src := CacheSource(raw, func() runtime.Object { return &unstructured.Unstructured{} })

	list := &unstructured.UnstructuredList{}
	require.NoError(t, src.GetList(context.Background(), prefix, storage.ListOptions{Recursive: true}, list))
	require.Len(t, list.Items, 3)
	for i, item := range list.Items {
		want := &unstructured.Unstructured{}
		require.NoError(t, want.UnmarshalJSON([]byte(raw.items[i])))
		require.Equal(t, want.Object, item.Object, "content unchanged")
	}
	one, two, other := sets(t, &list.Items[0]), sets(t, &list.Items[1]), sets(t, &list.Items[2])
	require.Equal(t, one, two, "the same fields written: the same sets")
	require.NotEqual(t, one[0], other[0], "another label: its own set")
	require.Equal(t, one[1:], other[1:], "the mailbox controller's sets are shared")
	require.NotEqual(t, one[1], one[2], "two sets of one object are not mixed up")

	// An object that comes by the watch takes the sets cached before it.
	w, err := src.Watch(context.Background(), prefix, storage.ListOptions{Recursive: true})
	require.NoError(t, err)
	defer w.Stop()
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON([]byte(target("inv1", "edge3", "region"))))
	require.NotEqual(t, one, sets(t, u), "decoded apart")
	raw.w.Add(u)
	got := (<-w.ResultChan()).Object.(*unstructured.Unstructured)
	require.Equal(t, one, sets(t, got))
	require.Equal(t, "edge3", got.GetName())
}

// Typed objects (built-in kinds) share their field sets as well.
func TestCacheSourceSharesTypedFieldSets(t *testing.T) {
	cm := func(name, field string) corev1.ConfigMap {
		c := *inSpace("wds1", "default", name, "10")
		c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:` + field + `":{}}}`)}}
		return c
	}
	raw := &watchingStorage{w: watch.NewFakeWithChanSize(4, false)}
	raw.listed = []corev1.ConfigMap{cm("a", "x"), cm("b", "x"), cm("c", "y")}
	src := CacheSource(raw, func() runtime.Object { return &corev1.ConfigMap{} })
	list := &corev1.ConfigMapList{}
	require.NoError(t, src.GetList(context.Background(), prefix, storage.ListOptions{Recursive: true}, list))
	require.Len(t, list.Items, 3)
	require.Same(t, list.Items[0].ManagedFields[0].FieldsV1, list.Items[1].ManagedFields[0].FieldsV1)
	require.NotSame(t, list.Items[0].ManagedFields[0].FieldsV1, list.Items[2].ManagedFields[0].FieldsV1)
	require.JSONEq(t, `{"f:data":{"f:y":{}}}`, list.Items[2].ManagedFields[0].FieldsV1.GetRawString())
}

// The table keeps at most two generations of sets; a set seen in each
// generation stays in it.
func TestFieldSetsBounded(t *testing.T) {
	var f fieldSets
	kept := metav1.NewFieldsV1(`{"f:kept":{}}`)
	require.Same(t, kept, f.canonical("tkept", kept))
	for i := range 3 * fieldSetsKept {
		f.canonical(fmt.Sprintf("t%d", i), &metav1.FieldsV1{})
		if i%(fieldSetsKept/2) == 0 {
			require.Same(t, kept, f.canonical("tkept", metav1.NewFieldsV1(`{"f:kept":{}}`)), "round %d", i)
		}
		require.LessOrEqual(t, len(f.cur)+len(f.prev), 2*fieldSetsKept)
	}
	_, first := f.cur["t0"]
	_, firstBefore := f.prev["t0"]
	require.False(t, first || firstBefore, "a set not seen for a generation is forgotten")
}

// A large set is never kept: a tenant's objects cannot fill the table
// with megabytes that outlive them. The small sets beside it still are.
func TestFieldSetsLeaveLargeSetsAlone(t *testing.T) {
	var f fieldSets
	withSets := func() *unstructured.Unstructured {
		data := map[string]any{}
		for i := range 200 {
			data[fmt.Sprintf("f:key-%04d", i)] = map[string]any{}
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "big", "managedFields": []any{
			map[string]any{"manager": "kubectl", "fieldsV1": map[string]any{"f:data": data}},
			map[string]any{"manager": "other", "fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{}}}},
		}}}}
	}
	one, two := withSets(), withSets()
	f.share(one)
	f.share(two)
	require.Len(t, f.cur, 1, "only the small set is kept")
	require.NotEqual(t, sets(t, one)[0], sets(t, two)[0], "the large sets are the objects' own")
	require.Equal(t, sets(t, one)[1], sets(t, two)[1], "the small ones are shared")

	raw := `{"f:data":{` + strings.Repeat(`"f:k":{},`, 200) + `"f:z":{}}}`
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{FieldsV1: metav1.NewFieldsV1(raw)}}}}
	f.share(typed)
	require.Len(t, f.cur, 1, "nor a large typed set")
}
