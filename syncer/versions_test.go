// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

var (
	widgetsV1beta1 = schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "widgets"}
	widgetsV1      = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgetsV1beta1 = schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "gadgets"}
)

// widgetCopy is a mailbox copy of the Widget app/name in a version.
func widgetCopy(version, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/" + version, "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "app", "labels": map[string]any{edgev2alpha1.PlacementCopyLabel: "true"}},
		"spec":     map[string]any{"size": int64(3)},
	}}
}

// versionedEdge is an edge cluster that serves a resource in several
// versions, as an API server serves a CRD's: one object, whichever version
// names it. An apply replaces the object's content but for its UID; a
// delete honours its UID precondition.
type versionedEdge struct {
	client *dynamicfake.FakeDynamicClient
	objs   map[string]*unstructured.Unstructured // by group/resource/namespace/name
	uid    int
}

func edgeKeyOf(gvr schema.GroupVersionResource, namespace, name string) string {
	return gvr.GroupResource().String() + "/" + namespace + "/" + name
}

func newVersionedEdge(t *testing.T) *versionedEdge {
	e := &versionedEdge{objs: map[string]*unstructured.Unstructured{}}
	e.client = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	e.client.PrependReactor("get", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		g := a.(clienttesting.GetAction)
		o, ok := e.objs[edgeKeyOf(g.GetResource(), g.GetNamespace(), g.GetName())]
		if !ok {
			return true, nil, apierrors.NewNotFound(g.GetResource().GroupResource(), g.GetName())
		}
		o = o.DeepCopy()
		o.SetAPIVersion(g.GetResource().GroupVersion().String())
		return true, o, nil
	})
	e.client.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		require.Equal(t, types.ApplyPatchType, p.GetPatchType())
		next := &unstructured.Unstructured{}
		require.NoError(t, next.UnmarshalJSON(p.GetPatch()))
		key := edgeKeyOf(p.GetResource(), p.GetNamespace(), p.GetName())
		if cur, ok := e.objs[key]; ok {
			next.SetUID(cur.GetUID())
		} else {
			e.uid++
			next.SetUID(types.UID(fmt.Sprintf("uid-%d", e.uid)))
		}
		e.objs[key] = next
		return true, next.DeepCopy(), nil
	})
	e.client.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		key := edgeKeyOf(d.GetResource(), d.GetNamespace(), d.GetName())
		cur, ok := e.objs[key]
		if !ok {
			return true, nil, apierrors.NewNotFound(d.GetResource().GroupResource(), d.GetName())
		}
		if p := d.GetDeleteOptions().Preconditions; p != nil && p.UID != nil && *p.UID != cur.GetUID() {
			return true, nil, apierrors.NewConflict(d.GetResource().GroupResource(), d.GetName(), fmt.Errorf("UID precondition failed"))
		}
		delete(e.objs, key)
		return true, nil, nil
	})
	return e
}

// widget is the edge Widget app/name, nil when there is none.
func (e *versionedEdge) widget(name string) *unstructured.Unstructured {
	return e.objs[edgeKeyOf(widgetsV1, "app", name)]
}

// deletes counts the deletes of the edge Widget app/name asked so far, in
// any version.
func (e *versionedEdge) deletes(name string) int {
	n := 0
	for _, a := range e.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok && d.GetResource().GroupResource() == widgetsV1.GroupResource() && d.GetName() == name {
			n++
		}
	}
	return n
}

// unsyncedInformer is an edge cache that never syncs: the syncer reads the
// edge afresh each time.
type unsyncedInformer struct{ cache.SharedIndexInformer }

func (unsyncedInformer) HasSynced() bool { return false }

// versionFixture is a syncer between a fake mailbox, whose caches are real
// informers, and a versionedEdge; its downsync queue is worked by the test.
type versionFixture struct {
	t       *testing.T
	ctx     context.Context
	s       *Syncer
	edge    *versionedEdge
	mailbox *dynamicfake.FakeDynamicClient

	mu   sync.Mutex
	held map[schema.GroupVersionResource]chan struct{} // lists of the mailbox kept waiting (holdList)
}

func newVersionFixture(t *testing.T, copies ...runtime.Object) *versionFixture {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &versionFixture{t: t, ctx: ctx, edge: newVersionedEdge(t), held: map[schema.GroupVersionResource]chan struct{}{}}
	f.mailbox = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		widgetsV1beta1: "WidgetList", widgetsV1: "WidgetList", gadgetsV1beta1: "GadgetList"}, copies...)
	f.mailbox.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		release := f.held[a.GetResource()]
		f.mu.Unlock()
		if release != nil {
			<-release
		}
		return false, nil, nil
	})
	down := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objKey]())
	reports := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objKey]())
	t.Cleanup(down.ShutDown)
	t.Cleanup(reports.ShutDown)
	edgeCache := func() *running { return &running{informer: unsyncedInformer{}, stop: make(chan struct{})} }
	f.s = &Syncer{
		mailboxCaches: listThenWatch{f.mailbox}, edge: f.edge.client, owner: "edge1", live: true, downQ: down, reportQ: reports,
		desired: map[objKey]*desired{}, handover: map[objKey]bool{}, inStep: map[objKey]bool{}, problems: map[objKey]problem{},
		applied: map[objKey]*applied{}, copies: map[schema.GroupVersionResource]*running{}, upsyncGVRs: map[schema.GroupVersionResource]bool{},
		edgeObjs:    map[schema.GroupVersionResource]*running{widgetsV1beta1: edgeCache(), widgetsV1: edgeCache()},
		workloadUID: map[string]objKey{}, removing: map[objKey]time.Time{}, now: time.Now,
	}
	f.s.id.InventorySpace, f.s.id.SyncTarget = "inv1", "edge1"
	t.Cleanup(f.s.stopInformers)
	return f
}

// config makes the SyncerConfig name the resources gvrs.
func (f *versionFixture) config(gvrs ...schema.GroupVersionResource) {
	f.t.Helper()
	spec := edgev2alpha1.SyncerConfigSpec{}
	for _, g := range gvrs {
		spec.Resources = append(spec.Resources, edgev2alpha1.SyncedResource{Group: g.Group, Version: g.Version, Resource: g.Resource, Namespaced: true})
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&edgev2alpha1.SyncerConfig{
		ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName}, Spec: spec})
	require.NoError(f.t, err)
	f.s.onConfig(f.ctx, &unstructured.Unstructured{Object: u})
}

// holdList keeps the mailbox's list of gvr, and so its cache's sync,
// waiting until release is called.
func (f *versionFixture) holdList(gvr schema.GroupVersionResource) (release func()) {
	c := make(chan struct{})
	f.mu.Lock()
	f.held[gvr] = c
	f.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(c) }) }
	f.t.Cleanup(release)
	return release
}

// drain reconciles what the downsync queue holds, as its workers would.
func (f *versionFixture) drain() {
	f.t.Helper()
	for f.s.downQ.Len() > 0 {
		k, _ := f.s.downQ.Get()
		_, err := f.s.reconcileDownsync(f.ctx, k)
		f.s.downQ.Done(k)
		require.NoError(f.t, err, "reconciling %s", k)
	}
}

// until drains the queue until cond holds.
func (f *versionFixture) until(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.drain()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// handedOver is how many objects wait for their new version's copies.
func (f *versionFixture) handedOver() int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return len(f.s.handover)
}

// TestVersionChangeKeepsEdgeObjects: when the SyncerConfig moves a
// resource to another version, an object the new version's copies hold too
// is handed over: kept at the edge (same UID, never deleted), then applied
// as the new version says; an event of the old version's edge cache later
// deletes nothing either.
func TestVersionChangeKeepsEdgeObjects(t *testing.T) {
	f := newVersionFixture(t, widgetCopy("v1beta1", "a"), widgetCopy("v1", "a"))
	oldKey := objKey{GVR: widgetsV1beta1, Namespace: "app", Name: "a"}
	newKey := objKey{GVR: widgetsV1, Namespace: "app", Name: "a"}

	f.config(widgetsV1beta1)
	f.until("the v1beta1 copy is at the edge", func() bool { return f.edge.widget("a") != nil })
	uid := f.edge.widget("a").GetUID()

	f.config(widgetsV1)
	f.until("the v1 copy is applied and the handover settled", func() bool {
		o := f.edge.widget("a")
		return o != nil && o.GetAPIVersion() == widgetsV1.GroupVersion().String() && f.handedOver() == 0
	})
	require.Zero(t, f.edge.deletes("a"), "never deleted at the edge")
	require.Equal(t, uid, f.edge.widget("a").GetUID(), "the same edge object")

	// The old version's edge cache still runs, and queues the old key at
	// the object's next change.
	f.s.downQ.Add(oldKey)
	f.drain()
	require.Zero(t, f.edge.deletes("a"), "an event of the old version deletes nothing")
	require.NotNil(t, f.edge.widget("a"))
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	require.NotContains(t, f.s.desired, oldKey)
	require.Contains(t, f.s.desired, newKey)
	require.False(t, f.s.inStep[oldKey], "the old key's state is forgotten")
	require.True(t, f.s.inStep[newKey])
}

// TestVersionChangeDeletesWhatTheNewVersionLacks: an object of the old
// version that the new version's copies do not hold is deleted at the
// edge, but only once they have been read: until then, nothing of the
// resource is deleted, whatever queues it.
func TestVersionChangeDeletesWhatTheNewVersionLacks(t *testing.T) {
	f := newVersionFixture(t, widgetCopy("v1beta1", "a"), widgetCopy("v1", "a"), widgetCopy("v1beta1", "gone"))
	f.config(widgetsV1beta1)
	f.until("both copies are at the edge", func() bool { return f.edge.widget("a") != nil && f.edge.widget("gone") != nil })
	uid := f.edge.widget("a").GetUID()

	release := f.holdList(widgetsV1)
	f.config(widgetsV1)
	// Edge events of the old version queue its keys meanwhile.
	for _, name := range []string{"a", "gone"} {
		f.s.downQ.Add(objKey{GVR: widgetsV1beta1, Namespace: "app", Name: name})
	}
	f.drain()
	require.NotNil(t, f.edge.widget("gone"), "kept while the new version's copies are not read")
	require.NotNil(t, f.edge.widget("a"))
	require.Zero(t, f.edge.deletes("gone"))
	require.Zero(t, f.edge.deletes("a"))
	require.Equal(t, 2, f.handedOver(), "both wait for the new version's copies")

	release()
	f.until("what the new version lacks is deleted", func() bool { return f.edge.widget("gone") == nil })
	require.Equal(t, 1, f.edge.deletes("gone"))
	require.Zero(t, f.edge.deletes("a"))
	require.Equal(t, uid, f.edge.widget("a").GetUID())
	require.Zero(t, f.handedOver())
}

// TestResourceLeavingTheConfigIsDeleted: a resource the SyncerConfig no
// longer names in any version (another resource of its group does not
// count) has its objects deleted at the edge at once, without waiting for
// any cache.
func TestResourceLeavingTheConfigIsDeleted(t *testing.T) {
	f := newVersionFixture(t, widgetCopy("v1beta1", "a"), widgetCopy("v1", "a"))
	f.config(widgetsV1beta1)
	f.until("the copy is at the edge", func() bool { return f.edge.widget("a") != nil })

	f.holdList(gadgetsV1beta1)
	f.config(gadgetsV1beta1)
	f.drain()
	require.Nil(t, f.edge.widget("a"), "deleted at the edge")
	require.Equal(t, 1, f.edge.deletes("a"))
	require.Zero(t, f.handedOver())
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	require.Empty(t, f.s.desired)
}
