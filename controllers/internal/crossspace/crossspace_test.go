// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
			"metadata": map[string]any{"name": strings.Clone("web"), "namespace": "apps", "uid": "u-1", "resourceVersion": "7", "generation": int64(2),
				"creationTimestamp": "2026-11-26T00:00:00Z", "deletionTimestamp": "2026-11-27T10:00:00Z",
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
	rec, ok := got.(*Copy)
	require.True(t, ok, "a copy in a mailbox is cached as a record, not %T", got)
	want := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "apps", "uid": "u-1", "resourceVersion": "7", "generation": int64(2),
			"deletionTimestamp": "2026-11-27T10:00:00Z",
			"labels":            map[string]any{edgev2alpha1.PlacementCopyLabel: "true"},
			"annotations":       map[string]any{spaces.Annotation: "inv-mb-1", "edge.kubestellar.io/content-hash": "abc"}},
		"status": map[string]any{"readyReplicas": int64(3)},
	}}
	require.Equal(t, want, Expand(got), "a copy in a mailbox keeps its identity, kubestellar's metadata and its status only")
	require.NotSame(t, Expand(got), Expand(got), "each reader gets its own object")

	// As a metav1.Object, the record says what the expanded object says.
	var m metav1.Object = rec
	require.Equal(t, "web", m.GetName())
	require.Equal(t, "apps", m.GetNamespace())
	require.Equal(t, types.UID("u-1"), m.GetUID())
	require.Equal(t, "7", m.GetResourceVersion())
	require.Equal(t, int64(2), m.GetGeneration())
	require.Equal(t, "2026-11-27T10:00:00Z", m.GetDeletionTimestamp().UTC().Format(time.RFC3339))
	require.Equal(t, want.GetLabels(), m.GetLabels())
	require.Equal(t, want.GetAnnotations(), m.GetAnnotations())
	require.Equal(t, "inv-mb-1", SpaceOf(rec))
	key, err := spaces.KeyFunc(rec)
	require.NoError(t, err)
	require.Equal(t, spaces.Key("inv-mb-1", "apps", "web"), key)
	require.Equal(t, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, rec.GetObjectKind().GroupVersionKind())
	dup := rec.DeepCopyObject().(*Copy)
	dup.status.(map[string]any)["readyReplicas"] = int64(0)
	require.Equal(t, int64(3), rec.status.(map[string]any)["readyReplicas"], "a deep copy has its own status")

	// A server-made UID is kept as a UUID; a cluster-scoped copy has no
	// namespace; the setters change what the getters and key say.
	const id = "2e9bb380-ec68-4fd9-b651-bf2cab732357"
	cluster := obj("inv-mb-1", true)
	cluster.SetNamespace("")
	cluster.SetUID(id)
	crec, err := trim(cluster)
	require.NoError(t, err)
	c := crec.(*Copy)
	require.Equal(t, types.UID(id), c.GetUID())
	require.Empty(t, c.uidText)
	require.Equal(t, "", c.GetNamespace())
	require.Equal(t, "web", c.GetName())
	require.Equal(t, "inv-mb-1|web", c.CacheKey())
	require.Equal(t, cluster.GetUID(), Expand(c).(*unstructured.Unstructured).GetUID())
	c.SetNamespace("ns2")
	c.SetName("db")
	c.SetAnnotations(map[string]string{spaces.Annotation: "inv-mb-2", "kubestellar.io/a": "b"})
	c.SetUID("not-a-uuid")
	require.Equal(t, spaces.Key("inv-mb-2", "ns2", "db"), c.CacheKey())
	require.Equal(t, []string{"inv-mb-2", "ns2", "db"}, []string{c.Space(), c.GetNamespace(), c.GetName()})
	require.Equal(t, map[string]string{spaces.Annotation: "inv-mb-2", "kubestellar.io/a": "b"}, c.GetAnnotations())
	require.Equal(t, types.UID("not-a-uuid"), c.GetUID())
	require.Equal(t, "", (&Copy{}).GetName(), "an empty record has no name")

	// The cache keys a record by its own key, made once: its space,
	// namespace and name are parts of it.
	require.Equal(t, unsafe.Pointer(unsafe.StringData(rec.key)), unsafe.Pointer(unsafe.StringData(key)), "the cache's key is the record's")
	require.Zero(t, testing.AllocsPerRun(10, func() { _, _ = spaces.KeyFunc(rec) }))
	require.Equal(t, unsafe.Pointer(unsafe.StringData(rec.key[len("inv-mb-1|apps/"):])), unsafe.Pointer(unsafe.StringData(rec.GetName())))

	// Copies share what repeats: the labels and annotations of every copy
	// of one version of an object.
	decoded := obj("inv-mb-1", true)
	other, err := trim(decoded)
	require.NoError(t, err)
	for _, s := range []string{decoded.GetName(), decoded.GetNamespace(), string(decoded.GetUID()), decoded.GetResourceVersion()} {
		for _, kept := range []string{other.(*Copy).key, other.(*Copy).uidText, other.(*Copy).resourceVersion} {
			require.False(t, kept != "" && unsafe.StringData(kept) == unsafe.StringData(s), "a record keeps no string of the object it was made from")
		}
	}
	require.Equal(t, rec.annotations, other.(*Copy).annotations)
	require.Equal(t, rec.labels, other.(*Copy).labels)
	elsewhere, err := trimmer(func(string) bool { return true })(obj("inv-mb-2", true))
	require.NoError(t, err)
	require.Equal(t, rec.annotations, elsewhere.(*Copy).annotations, "copies in two mailboxes differ only in their space")
	require.Equal(t, "inv-mb-2", elsewhere.(*Copy).GetAnnotations()[spaces.Annotation])

	more := obj("inv-mb-1", true)
	more.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true", "edge.kubestellar.io/other": "x"})
	withMore, err := trim(more)
	require.NoError(t, err)
	require.Equal(t, map[string]string{edgev2alpha1.PlacementCopyLabel: "true", "edge.kubestellar.io/other": "x"}, withMore.(*Copy).GetLabels())
	require.Equal(t, map[string]string{edgev2alpha1.PlacementCopyLabel: "true"}, rec.GetLabels())

	// Values that would confuse a separator survive: keys and values are
	// length-prefixed.
	odd := obj("inv-mb-1", true)
	odd.SetAnnotations(map[string]string{spaces.Annotation: "inv-mb-1", "kubestellar.io/a": "x\x00y=z,\n", "kubestellar.io/b": "",
		"kubestellar.io/long": strings.Repeat("v", 300)})
	oddRec, err := trim(odd)
	require.NoError(t, err)
	require.Equal(t, odd.GetAnnotations(), oddRec.(*Copy).GetAnnotations())

	again, err := trim(got)
	require.NoError(t, err)
	require.Same(t, got, again, "trimming a record keeps it")

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
	require.Equal(t, cache.DeletedFinalStateUnknown{Key: "k", Obj: want}, Expand(cache.DeletedFinalStateUnknown{Key: "k", Obj: rec}))
	require.Nil(t, trimmer(nil), "no transform unless asked")
}

// TestTransformLists: every page a list returns comes back with the
// cache's transform applied to each copy in a mailbox (what the cache will
// hold), objects elsewhere as they were.
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
			list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{copyIn("mb", "a"), copyIn("wds", "b"), copyIn("mb", "c")}}
			list.SetResourceVersion("9")
			list.SetContinue("more")
			return list, nil
		},
	}
	lw := cache.ToListerWatcherWithContext(transformLists(inner, trimmer(isMailbox)))
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, 1, pages)
	listMeta, err := meta.ListAccessor(obj)
	require.NoError(t, err)
	require.Equal(t, "9", listMeta.GetResourceVersion())
	require.Equal(t, "more", listMeta.GetContinue(), "the page keeps its place in the list")
	items, err := meta.ExtractList(obj)
	require.NoError(t, err, "a reflector reads the page as it reads any list")
	require.Len(t, items, 3)
	for i, name := range []string{"a", "b", "c"} {
		m, err := meta.Accessor(items[i])
		require.NoError(t, err)
		require.Equal(t, name, m.GetName())
		if name == "b" {
			require.Contains(t, items[i].(*unstructured.Unstructured).Object, "data", "an object outside the mailboxes is left whole")
			continue
		}
		require.IsType(t, &Copy{}, items[i], "copy %s is trimmed in the list", name)
		require.Equal(t, "7", m.GetResourceVersion())
		require.Equal(t, map[string]string{spaces.Annotation: "mb"}, m.GetAnnotations())
	}
	require.Same(t, inner, transformLists(inner, nil), "no transform, no wrapper")
}

// A Location's SyncTargets are those of its space its instance selector
// selects, read through the label index, which follows relabelling.
func TestLocatedSyncTargets(t *testing.T) {
	inf := &Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})}
	IndexSyncTargetsByLabel(inf)
	target := func(space, name string, labels map[string]string) *edgev2alpha1.SyncTarget {
		return &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{spaces.Annotation: space}}}
	}
	edge1 := target("inv1", "edge1", map[string]string{"name": "edge1", "env": "prod"})
	edge2 := target("inv1", "edge2", map[string]string{"name": "edge2", "env": "prod"})
	elsewhere := target("inv2", "edge1", map[string]string{"name": "edge1", "env": "prod"})
	for _, st := range []*edgev2alpha1.SyncTarget{edge1, edge2, elsewhere} {
		require.NoError(t, inf.Add(st))
	}
	synctargets := edgev2alpha1.GroupVersionResource{Group: edgev2alpha1.GroupName, Version: "v2alpha1", Resource: "synctargets"}
	location := func(resource edgev2alpha1.GroupVersionResource, selector *metav1.LabelSelector) *edgev2alpha1.Location {
		return &edgev2alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: "loc", Annotations: map[string]string{spaces.Annotation: "inv1"}},
			Spec: edgev2alpha1.LocationSpec{Resource: resource, InstanceSelector: selector}}
	}
	names := func(sts []*edgev2alpha1.SyncTarget) []string {
		var out []string
		for _, st := range sts {
			out = append(out, SpaceOf(st)+"/"+st.Name)
		}
		sort.Strings(out)
		return out
	}

	require.Equal(t, []string{"inv1/edge1"}, names(LocatedSyncTargets(inf, location(synctargets, &metav1.LabelSelector{MatchLabels: map[string]string{"name": "edge1"}}))))
	require.Equal(t, []string{"inv1/edge1", "inv1/edge2"}, names(LocatedSyncTargets(inf, location(synctargets, &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}))))
	require.Equal(t, []string{"inv1/edge2"}, names(LocatedSyncTargets(inf, location(synctargets, &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"edge1"}}}}))),
		"a selector without matchLabels is matched against every SyncTarget of the space")
	require.Equal(t, []string{"inv1/edge1", "inv1/edge2"}, names(LocatedSyncTargets(inf, location(synctargets, &metav1.LabelSelector{}))), "an empty selector selects all")
	require.Empty(t, LocatedSyncTargets(inf, location(synctargets, nil)), "no selector selects none")
	require.Empty(t, LocatedSyncTargets(inf, location(edgev2alpha1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		&metav1.LabelSelector{})), "a Location of other things selects no SyncTarget")
	require.Empty(t, LocatedSyncTargets(inf, location(synctargets, &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "name", Operator: "Near", Values: []string{"edge1"}}}})), "an invalid selector selects none")

	relabelled := edge2.DeepCopy()
	relabelled.Labels["name"] = "edge1"
	require.NoError(t, inf.Update(relabelled))
	require.Equal(t, []string{"inv1/edge1", "inv1/edge2"}, names(LocatedSyncTargets(inf, location(synctargets, &metav1.LabelSelector{MatchLabels: map[string]string{"name": "edge1"}}))))
}

// Indexed gives the objects of the type asked for that an index files
// under a value, and says when the cache has no such index.
func TestIndexed(t *testing.T) {
	byName := func(obj any) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		return []string{m.GetLabels()["name"]}, nil
	}
	inf := &Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{"name": byName})}
	a := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"name": "x"}, Annotations: map[string]string{spaces.Annotation: "inv1"}}}
	b := &edgev2alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"name": "x"}, Annotations: map[string]string{spaces.Annotation: "inv1"}}}
	require.NoError(t, inf.Add(a))
	require.NoError(t, inf.Add(b))
	got, ok := Indexed[*edgev2alpha1.SyncTarget](inf, "name", "x")
	require.True(t, ok)
	require.Equal(t, []*edgev2alpha1.SyncTarget{a}, got)
	got, ok = Indexed[*edgev2alpha1.SyncTarget](inf, "name", "y")
	require.True(t, ok)
	require.Empty(t, got)
	_, ok = Indexed[*edgev2alpha1.SyncTarget](inf, "no such index", "x")
	require.False(t, ok)
}
