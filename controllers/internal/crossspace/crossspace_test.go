package crossspace

import (
	"context"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

func TestSlicesTo(t *testing.T) {
	inf := &Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})}
	IndexSlicesByDestination(inf)
	slice := func(wds, name string, dests ...edgev2alpha1.SinglePlacement) *edgev2alpha1.SinglePlacementSlice {
		return &edgev2alpha1.SinglePlacementSlice{
			ObjectMeta:   metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.Annotation: wds}},
			Destinations: dests,
		}
	}
	// One slice names edge1 of inv1 twice (two Locations select it).
	a := slice("wds1", "a",
		edgev2alpha1.SinglePlacement{Space: "inv1", LocationName: "x", SyncTargetName: "edge1"},
		edgev2alpha1.SinglePlacement{Space: "inv1", LocationName: "y", SyncTargetName: "edge1"},
		edgev2alpha1.SinglePlacement{Space: "inv2", LocationName: "x", SyncTargetName: "edge1"})
	b := slice("wds2", "a", edgev2alpha1.SinglePlacement{Space: "inv1", LocationName: "x", SyncTargetName: "edge2"})
	require.NoError(t, inf.Add(a))
	require.NoError(t, inf.Add(b))
	require.NoError(t, inf.Add(&edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{spaces.Annotation: "wds3"}}}))

	require.Equal(t, []*edgev2alpha1.SinglePlacementSlice{a}, SlicesTo(inf, "inv1", "edge1"))
	require.Equal(t, []*edgev2alpha1.SinglePlacementSlice{a}, SlicesTo(inf, "inv2", "edge1"))
	require.Equal(t, []*edgev2alpha1.SinglePlacementSlice{b}, SlicesTo(inf, "inv1", "edge2"))
	require.Empty(t, SlicesTo(inf, "inv2", "edge2"))

	// A slice that no longer names a SyncTarget leaves its index.
	a2 := a.DeepCopy()
	a2.Destinations = a2.Destinations[2:]
	require.NoError(t, inf.Update(a2))
	require.Empty(t, SlicesTo(inf, "inv1", "edge1"))
}

func TestTrimCopies(t *testing.T) {
	obj := func(space string, copyLabel bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "apps", "resourceVersion": "7", "creationTimestamp": "2026-11-26T00:00:00Z",
				"ownerReferences": []any{map[string]any{"kind": "X"}},
				"annotations": map[string]any{spaces.Annotation: space, "edge.kubestellar.io/content-hash": "abc",
					"kubectl.kubernetes.io/last-applied-configuration": "{...}", "notkubestellar.io/x": "y"}},
			"spec":   map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{"containers": []any{}}}},
			"status": map[string]any{"readyReplicas": int64(3)},
		}}
		labels := map[string]string{"app": "web"}
		if copyLabel {
			labels[edgev2alpha1.PlacementCopyLabel] = "true"
		}
		u.SetLabels(labels)
		return u
	}
	trim := trimmer(func(space string) bool { return space == "inv-mb-1" })

	got, err := trim(obj("inv-mb-1", true))
	require.NoError(t, err)
	want := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "apps", "resourceVersion": "7",
			"labels":      map[string]any{edgev2alpha1.PlacementCopyLabel: "true"},
			"annotations": map[string]any{spaces.Annotation: "inv-mb-1", "edge.kubestellar.io/content-hash": "abc"}},
		"status": map[string]any{"readyReplicas": int64(3)},
	}}
	require.Equal(t, want, got, "a copy in a mailbox keeps its identity, kubestellar's metadata and its status only")

	// Copies share what repeats: the map of the copy label alone, and the
	// boxes of interned strings.
	other, err := trim(obj("inv-mb-1", true))
	require.NoError(t, err)
	labelsOf := func(u any) map[string]any {
		return u.(*unstructured.Unstructured).Object["metadata"].(map[string]any)["labels"].(map[string]any)
	}
	require.Equal(t, reflect.ValueOf(labelsOf(got)).UnsafePointer(), reflect.ValueOf(labelsOf(other)).UnsafePointer(),
		"two copies with the copy label alone share its map")
	box := func(u any) unsafe.Pointer {
		name := u.(*unstructured.Unstructured).Object["metadata"].(map[string]any)["name"]
		return (*[2]unsafe.Pointer)(unsafe.Pointer(&name))[1]
	}
	require.Equal(t, box(got), box(other), "two copies box the same name once between them")
	more := obj("inv-mb-1", true)
	more.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true", "edge.kubestellar.io/other": "x"})
	withMore, err := trim(more)
	require.NoError(t, err)
	require.Equal(t, map[string]any{edgev2alpha1.PlacementCopyLabel: "true", "edge.kubestellar.io/other": "x"}, labelsOf(withMore))
	require.Equal(t, map[string]any{edgev2alpha1.PlacementCopyLabel: "true"}, labelsOf(got), "a copy with more labels changed the shared map")

	for _, u := range []*unstructured.Unstructured{
		obj("inv-mb-1", false), // upsynced, or anything else the translator did not make
		obj("wds1", true),      // a WDS object labelled as a copy (one level down a hierarchy)
	} {
		got, err := trim(u.DeepCopy())
		require.NoError(t, err)
		require.Equal(t, u, got, "%s is cached whole", SpaceOf(u))
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "k", Obj: obj("inv-mb-1", true)}
	got, err = trim(tomb)
	require.NoError(t, err)
	require.Equal(t, tomb, got)
	require.Nil(t, trimmer(nil), "no transform unless asked")
}

// TestTransformLists: every page a list returns comes back with the
// cache's transform applied to each copy in a mailbox (what the cache will
// hold), objects elsewhere as they were. (How pages are mapped is
// internal/listpages' test.)
func TestTransformLists(t *testing.T) {
	ctx := context.Background()
	isMailbox := func(space string) bool { return space == "mb" }
	copyIn := func(space, name string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"big": "body"}}}
		u.SetName(name)
		u.SetNamespace("ns")
		u.SetUID("uid-" + types.UID(name))
		u.SetResourceVersion("7")
		u.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
		u.SetAnnotations(map[string]string{spaces.Annotation: space, "last-applied": "x"})
		return u
	}
	pages := 0
	inner := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			pages++
			return &unstructured.UnstructuredList{Items: []unstructured.Unstructured{copyIn("mb", "a"), copyIn("wds", "b"), copyIn("mb", "c")}}, nil
		},
	}
	lw := cache.ToListerWatcherWithContext(transformLists(inner, trimmer(isMailbox)))
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, 1, pages)
	items := obj.(*unstructured.UnstructuredList).Items
	require.Len(t, items, 3)
	for i, name := range []string{"a", "b", "c"} {
		require.Equal(t, name, items[i].GetName())
		if name == "b" {
			require.Contains(t, items[i].Object, "data", "an object outside the mailboxes is left whole")
			continue
		}
		require.NotContains(t, items[i].Object, "data", "copy %s is trimmed in the list", name)
		require.Equal(t, "7", items[i].GetResourceVersion())
		require.Equal(t, map[string]string{spaces.Annotation: "mb"}, items[i].GetAnnotations())
		again, err := trimmer(isMailbox)(&items[i])
		require.NoError(t, err)
		require.Equal(t, items[i].Object, again.(*unstructured.Unstructured).Object, "trimming a trimmed copy keeps it")
	}
	require.Same(t, inner, transformLists(inner, nil), "no transform, no wrapper")
}
