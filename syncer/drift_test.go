// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
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
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// placedConfigMap is what the syncer applies for a ConfigMap placed with
// the given data.
func placedConfigMap(t *testing.T, data map[string]any, createOnly bool) *desired {
	t.Helper()
	annotations := map[string]any{}
	if createOnly {
		annotations[edgev2alpha1.CreateOnlyAnnotation] = "true"
	}
	cp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg", "namespace": "app", "annotations": annotations}, "data": data}}
	d, err := edgeObject(cp, configMapsGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	return d
}

// fieldsOf is the field set a server-side apply of obj would own (lists
// taken as atomic, which is enough here), serialized as in managedFields.
func fieldsOf(t *testing.T, obj map[string]any) string {
	t.Helper()
	content := runtime.DeepCopyJSON(obj)
	delete(content, "apiVersion")
	delete(content, "kind")
	tv, err := typed.DeducedParseableType.FromUnstructured(content)
	require.NoError(t, err)
	set, err := tv.ToFieldSet()
	require.NoError(t, err)
	data, err := set.ToJSON()
	require.NoError(t, err)
	return string(data)
}

// withoutFields removes paths from a serialized field set.
func withoutFields(t *testing.T, fields string, paths ...fieldpath.Path) string {
	t.Helper()
	set := &fieldpath.Set{}
	require.NoError(t, set.FromJSON(strings.NewReader(fields)))
	set = set.Difference(fieldpath.NewSet(paths...))
	data, err := set.ToJSON()
	require.NoError(t, err)
	return string(data)
}

func managedEntry(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(fields)}
}

// applyResult is the edge object the syncer's apply of d makes: d's
// content, with uid and the syncer's managed fields.
func applyResult(t *testing.T, d *desired, uid string) *unstructured.Unstructured {
	t.Helper()
	obj := d.Object.DeepCopy()
	obj.SetUID(types.UID(uid))
	obj.SetResourceVersion("1")
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedEntry(FieldManager, metav1.ManagedFieldsOperationApply, fieldsOf(t, d.Object.Object))})
	return obj
}

func record(obj *unstructured.Unstructured, d *desired) *applied {
	return &applied{Hash: d.Hash, UID: obj.GetUID(), Fields: ownFields(obj)}
}

// TestJudge is the table of what the syncer makes of an edge object it
// should keep: in step, to apply (not drift), to verify once, drift, or
// someone else's.
func TestJudge(t *testing.T) {
	d := placedConfigMap(t, map[string]any{"mode": "placed"}, false)
	newer := placedConfigMap(t, map[string]any{"mode": "changed at the center"}, false)
	made := applyResult(t, d, "uid-1")
	rec := record(made, d)
	edit := func(f func(o *unstructured.Unstructured)) *unstructured.Unstructured {
		o := made.DeepCopy()
		f(o)
		return o
	}
	// kubectl edit of data.mode: the value changes and the field moves to
	// kubectl's entry.
	edited := edit(func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, "edited", "data", "mode")
		o.SetManagedFields([]metav1.ManagedFieldsEntry{
			managedEntry(FieldManager, metav1.ManagedFieldsOperationApply, withoutFields(t, ownFields(made), fieldpath.MakePathOrDie("data", "mode"))),
			managedEntry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:data":{"f:mode":{}}}`),
		})
	})
	// kubectl annotate: a field of kubectl's own; the syncer's entry is as
	// it was.
	annotated := edit(func(o *unstructured.Unstructured) {
		a := o.GetAnnotations()
		a["team"] = "edge"
		o.SetAnnotations(a)
		o.SetManagedFields(append(o.GetManagedFields(),
			managedEntry("kubectl-annotate", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:annotations":{"f:team":{}}}}`)))
	})
	unlabelled := edit(func(o *unstructured.Unstructured) {
		o.SetLabels(nil)
		o.SetManagedFields([]metav1.ManagedFieldsEntry{managedEntry(FieldManager, metav1.ManagedFieldsOperationApply,
			withoutFields(t, ownFields(made), fieldpath.MakePathOrDie("metadata", "labels", edgev2alpha1.SyncerOwnerLabel)))})
	})
	rehashed := edit(func(o *unstructured.Unstructured) {
		a := o.GetAnnotations()
		a[AppliedHashAnnotation] = "something else"
		o.SetAnnotations(a)
	})
	recreated := edit(func(o *unstructured.Unstructured) { o.SetUID("uid-2") })
	others := edit(func(o *unstructured.Unstructured) {
		o.SetLabels(map[string]string{"app": "theirs"})
		o.SetUID("uid-theirs")
	})
	createOnly := placedConfigMap(t, map[string]any{"mode": "placed"}, true)

	for _, tc := range []struct {
		name string
		d    *desired
		cur  *unstructured.Unstructured
		rec  *applied
		want verdict
	}{
		{name: "not at the edge yet: the syncer's first apply", d: d, want: applyDesired},
		{name: "as the syncer applied it", d: d, cur: made, rec: rec, want: inStep},
		{name: "status or an annotation of someone else's added at the edge", d: d, cur: annotated, rec: rec, want: inStep},
		{name: "a managed field changed at the edge", d: d, cur: edited, rec: rec, want: driftSuspected},
		{name: "deleted at the edge", d: d, rec: rec, want: driftSuspected},
		{name: "made again at the edge, with the syncer's label", d: d, cur: recreated, rec: rec, want: driftSuspected},
		{name: "the owner label removed at the edge", d: d, cur: unlabelled, rec: rec, want: driftSuspected},
		{name: "the applied hash changed at the edge", d: d, cur: rehashed, rec: rec, want: driftSuspected},
		{name: "new content from the center", d: newer, cur: made, rec: rec, want: applyDesired},
		{name: "new content from the center, object changed at the edge meanwhile", d: newer, cur: edited, rec: rec, want: applyDesired},
		{name: "the old content back from the center", d: d, cur: made, rec: record(applyResult(t, newer, "uid-1"), newer), want: applyDesired},
		{name: "after a restart, with the content", d: d, cur: made, want: applyToVerify},
		{name: "after a restart, changed at the edge meanwhile", d: d, cur: edited, want: applyToVerify},
		{name: "after a restart, with older content", d: newer, cur: made, want: applyDesired},
		{name: "someone else's object of that name", d: d, cur: others, want: notOurs},
		{name: "someone else's object, made after the syncer's was deleted", d: d, cur: others, rec: rec, want: notOurs},
		{name: "after a restart, the owner label removed", d: d, cur: unlabelled, want: notOurs},
		{name: "create-only, there", d: createOnly, cur: applyResult(t, createOnly, "uid-1"), want: inStep},
		{name: "create-only, changed at the edge", d: createOnly, cur: edited, rec: rec, want: inStep},
		{name: "create-only, deleted at the edge", d: createOnly, rec: record(applyResult(t, createOnly, "uid-1"), createOnly), want: applyDesired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want.String(), judge(tc.d, tc.cur, tc.rec, "edge1").String())
		})
	}
}

// TestReclaimed checks the fields an apply is found to have taken back.
func TestReclaimed(t *testing.T) {
	before := func(fields string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{}}
		o.SetManagedFields([]metav1.ManagedFieldsEntry{
			managedEntry(FieldManager, metav1.ManagedFieldsOperationApply, fields),
			// Neither another manager's entry nor the syncer's own
			// updates (of the mailbox, never at the edge) count.
			managedEntry("kubectl", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:replicas":{}}}`),
			managedEntry(FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:paused":{}}}`),
		})
		return o
	}
	full := `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`
	after := before(full)
	for _, tc := range []struct {
		name   string
		before *unstructured.Unstructured
		want   []string
	}{
		{name: "nothing changed", before: before(full)},
		{name: "scaled", before: before(`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
			want: []string{".spec.replicas"}},
		{name: "image and label changed", before: before(`{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:name":{}}}}}}}`),
			want: []string{".metadata.labels.app", `.spec.template.spec.containers[name="web"].image`}},
		{name: "deleted", want: []string{".metadata.labels.app", ".spec.replicas", `.spec.template.spec.containers[name="web"].image`,
			`.spec.template.spec.containers[name="web"].name`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reclaimed(tc.before, after)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := reclaimed(before(`{"bad:key":{}}`), after)
	require.ErrorContains(t, err, "reading the managed fields")
}

// TestKeepOwnManagedFields: the edge caches keep the syncer's entries only.
func TestKeepOwnManagedFields(t *testing.T) {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	own := managedEntry(FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{}}`)
	o.SetManagedFields([]metav1.ManagedFieldsEntry{managedEntry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, `{"f:status":{}}`), own})
	out, err := keepOwnManagedFields(o)
	require.NoError(t, err)
	require.Equal(t, []metav1.ManagedFieldsEntry{own}, out.(*unstructured.Unstructured).GetManagedFields())
	out, err = dropManagedFields(o)
	require.NoError(t, err)
	require.Empty(t, out.(*unstructured.Unstructured).GetManagedFields())
}

// TestDriftTally: reverts are added to the count the status has, and those
// made while a status write is under way wait for the next.
func TestDriftTally(t *testing.T) {
	now := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	key := objKey{GVR: configMapsGVR, Namespace: "app", Name: "cfg"}
	var tally driftTally
	st := edgev2alpha1.SyncTargetStatus{}
	require.Equal(t, driftTally{}, tally.apply(&st))
	require.Nil(t, st.Drift, "no drift, no field")

	st.Drift = &edgev2alpha1.SyncDrift{Reverted: 5}
	tally.add(driftRevert(key, true, nil, now))
	tally.add(driftRevert(key, false, []string{".data.mode"}, now))
	sent := tally.apply(&st)
	require.Equal(t, int64(7), st.Drift.Reverted)
	require.Equal(t, &edgev2alpha1.DriftRevert{Resource: "configmaps", Namespace: "app", Name: "cfg", Reason: edgev2alpha1.DriftChanged,
		Fields: []string{".data.mode"}, Time: now}, st.Drift.Last)

	// One more while the status is written.
	tally.add(driftRevert(key, true, []string{"ignored"}, now))
	tally.reported(sent)
	st = edgev2alpha1.SyncTargetStatus{Drift: &edgev2alpha1.SyncDrift{Reverted: 7}}
	tally.apply(&st)
	require.Equal(t, int64(8), st.Drift.Reverted)
	require.Equal(t, edgev2alpha1.DriftDeleted, st.Drift.Last.Reason)
	require.Empty(t, st.Drift.Last.Fields, "a deleted object names no fields")

	many := make([]string, 30)
	for i := range many {
		many[i] = ".data.k" + strconv.Itoa(i)
	}
	require.Len(t, driftRevert(key, false, many, now).Fields, edgev2alpha1.MaxDriftFields)
}

// fakeEdge is an edge cluster of ConfigMaps that does server-side apply as
// far as the syncer needs: an apply sets the applied fields and makes them
// the syncer's; a change that changes nothing does not write. The syncer's
// cache of it is a store the test fills, so it can lag.
type fakeEdge struct {
	t       *testing.T
	objs    map[string]*unstructured.Unstructured
	cache   cache.Store
	client  *dynamicfake.FakeDynamicClient
	rv, uid int
}

func newFakeEdge(t *testing.T) *fakeEdge {
	e := &fakeEdge{t: t, objs: map[string]*unstructured.Unstructured{}, cache: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	e.client = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	e.client.PrependReactor("get", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		g := a.(clienttesting.GetAction)
		if o, ok := e.objs[g.GetNamespace()+"/"+g.GetName()]; ok {
			return true, o.DeepCopy(), nil
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, g.GetName())
	})
	e.client.PrependReactor("patch", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		require.Equal(t, types.ApplyPatchType, p.GetPatchType())
		in := map[string]any{}
		require.NoError(t, json.Unmarshal(p.GetPatch(), &in))
		key := p.GetNamespace() + "/" + p.GetName()
		cur, ok := e.objs[key]
		next := &unstructured.Unstructured{Object: map[string]any{}}
		if ok {
			next = cur.DeepCopy()
		} else {
			e.uid++
			next.SetUID(types.UID(fmt.Sprintf("uid-%d", e.uid)))
		}
		merge(next.Object, in)
		var entries []metav1.ManagedFieldsEntry
		for _, m := range next.GetManagedFields() {
			if m.Manager != FieldManager {
				entries = append(entries, m)
			}
		}
		next.SetManagedFields(append(entries, managedEntry(FieldManager, metav1.ManagedFieldsOperationApply, fieldsOf(t, in))))
		e.write(key, cur, next)
		return true, e.objs[key].DeepCopy(), nil
	})
	e.client.PrependReactor("delete", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		delete(e.objs, d.GetNamespace()+"/"+d.GetName())
		return true, nil, nil
	})
	return e
}

// merge sets in's fields in obj, keeping obj's others.
func merge(obj, in map[string]any) {
	for k, v := range in {
		if m, ok := v.(map[string]any); ok {
			if have, ok := obj[k].(map[string]any); ok {
				merge(have, m)
				continue
			}
		}
		obj[k] = runtime.DeepCopyJSONValue(v)
	}
}

// write stores next unless it changes nothing.
func (e *fakeEdge) write(key string, cur, next *unstructured.Unstructured) {
	if cur != nil && equality.Semantic.DeepEqual(cur.Object, next.Object) {
		return
	}
	e.rv++
	next.SetResourceVersion(strconv.Itoa(e.rv))
	e.objs[key] = next
}

// change is a change made at the edge by someone else, who then owns the
// fields: the syncer's entry loses them.
func (e *fakeEdge) change(key string, path fieldpath.Path, f func(o *unstructured.Unstructured)) {
	cur := e.objs[key]
	next := cur.DeepCopy()
	f(next)
	var entries []metav1.ManagedFieldsEntry
	for _, m := range next.GetManagedFields() {
		if m.Manager == FieldManager {
			m = managedEntry(FieldManager, m.Operation, withoutFields(e.t, m.FieldsV1.GetRawString(), path))
		}
		entries = append(entries, m)
	}
	next.SetManagedFields(entries)
	e.write(key, cur, next)
}

// seen is the cache catching up with the edge.
func (e *fakeEdge) seen(key string) {
	if o, ok := e.objs[key]; ok {
		obj, _ := keepOwnManagedFields(o.DeepCopy())
		require.NoError(e.t, e.cache.Add(obj))
		return
	}
	if o, ok, _ := e.cache.GetByKey(key); ok {
		require.NoError(e.t, e.cache.Delete(o))
	}
}

// applies counts the syncer's applies so far.
func (e *fakeEdge) applies() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

// syncedInformer is a cache that has synced, over a store the test fills.
type syncedInformer struct {
	cache.SharedIndexInformer
	store cache.Store
}

func (i syncedInformer) HasSynced() bool           { return true }
func (i syncedInformer) GetStore() cache.Store     { return i.store }
func (i syncedInformer) GetIndexer() cache.Indexer { return nil }

func newDriftSyncer(e *fakeEdge) *Syncer {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objKey]())
	e.t.Cleanup(q.ShutDown)
	return &Syncer{
		edge: e.client, owner: "edge1", live: true, downQ: q, reportQ: q,
		desired: map[objKey]*desired{}, inStep: map[objKey]bool{}, problems: map[objKey]problem{}, applied: map[objKey]*applied{},
		edgeObjs: map[schema.GroupVersionResource]*running{
			configMapsGVR: {informer: syncedInformer{store: e.cache}},
		},
		workloadUID: map[string]objKey{}, removing: map[objKey]time.Time{}, statusNow: make(chan struct{}, 1),
		now: func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
}

// TestDriftReverted runs reconcileDownsync against a fake edge: the
// syncer's own applies are not drift, a change of a field it manages or a
// deletion is reverted and counted once, a change of someone else's field
// is left alone, and a lagging cache neither reverts nor counts anything.
func TestDriftReverted(t *testing.T) {
	ctx := context.Background()
	const cm = "app/cfg"
	key := objKey{GVR: configMapsGVR, Namespace: "app", Name: "cfg"}
	e := newFakeEdge(t)
	s := newDriftSyncer(e)
	want := func(d *desired) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if d == nil {
			delete(s.desired, key)
			return
		}
		s.desired[key] = d
	}
	reconcile := func() {
		t.Helper()
		requeue, err := s.reconcileDownsync(ctx, key)
		require.NoError(t, err)
		require.False(t, requeue)
		s.mu.Lock()
		defer s.mu.Unlock()
		require.True(t, s.inStep[key], "in step: %v", s.problems[key])
	}
	reverts := func() (int64, *edgev2alpha1.DriftRevert) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.drift.unreported, s.drift.last
	}
	data := func() string {
		v, _, _ := unstructured.NestedString(e.objs[cm].Object, "data", "mode")
		return v
	}

	// The first apply, and its echo in the cache.
	want(placedConfigMap(t, map[string]any{"mode": "placed"}, false))
	reconcile()
	require.Equal(t, 1, e.applies())
	require.Equal(t, "placed", data())
	// The cache has not seen it yet: nothing to do; nor once it has.
	reconcile()
	e.seen(cm)
	reconcile()
	require.Equal(t, 1, e.applies(), "nothing applied again")
	n, _ := reverts()
	require.Zero(t, n, "the first apply is not drift")

	// A change at the center is applied; not drift.
	want(placedConfigMap(t, map[string]any{"mode": "center"}, false))
	reconcile()
	e.seen(cm)
	require.Equal(t, 2, e.applies())
	require.Equal(t, "center", data())
	n, _ = reverts()
	require.Zero(t, n, "a change from the center is not drift")

	// Someone annotates it at the edge: not the syncer's field, left alone.
	e.change(cm, nil, func(o *unstructured.Unstructured) {
		a := o.GetAnnotations()
		a["team"] = "edge"
		o.SetAnnotations(a)
		o.SetManagedFields(append(o.GetManagedFields(), managedEntry("kubectl-annotate", metav1.ManagedFieldsOperationUpdate,
			`{"f:metadata":{"f:annotations":{"f:team":{}}}}`)))
	})
	e.seen(cm)
	reconcile()
	require.Equal(t, 2, e.applies(), "an annotation of someone else's is not drift")
	require.Equal(t, "edge", e.objs[cm].GetAnnotations()["team"])

	// Someone edits data.mode at the edge: reverted, counted, named.
	e.change(cm, fieldpath.MakePathOrDie("data", "mode"), func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, "edited", "data", "mode")
	})
	e.seen(cm)
	reconcile()
	require.Equal(t, 3, e.applies())
	require.Equal(t, "center", data(), "reverted")
	require.Equal(t, "edge", e.objs[cm].GetAnnotations()["team"], "someone else's annotation stays")
	n, last := reverts()
	require.Equal(t, int64(1), n)
	require.Equal(t, edgev2alpha1.DriftChanged, last.Reason)
	require.Equal(t, []string{".data.mode"}, last.Fields)
	// The cache still has the edited object: a fresh read says it is in
	// step; then the cache catches up.
	reconcile()
	e.seen(cm)
	reconcile()
	require.Equal(t, 3, e.applies(), "a lagging cache reverts nothing")
	n, _ = reverts()
	require.Equal(t, int64(1), n, "and counts nothing")

	// Deleted at the edge: made again, counted.
	delete(e.objs, cm)
	e.seen(cm)
	reconcile()
	require.Equal(t, 4, e.applies())
	require.Equal(t, "center", data())
	n, last = reverts()
	require.Equal(t, int64(2), n)
	require.Equal(t, edgev2alpha1.DriftDeleted, last.Reason)
	e.seen(cm)
	select {
	case <-s.statusNow:
	default:
		t.Fatal("a revert asks for the status to be written soon")
	}

	// A restarted syncer (no record) applies once to verify: not drift
	// when nothing changed...
	restarted := newDriftSyncer(e)
	restarted.desired = s.desired
	s = restarted
	reconcile()
	require.Equal(t, 5, e.applies())
	rv := e.objs[cm].GetResourceVersion()
	e.seen(cm)
	reconcile()
	require.Equal(t, 5, e.applies())
	require.Equal(t, rv, e.objs[cm].GetResourceVersion(), "the verifying apply changed nothing")
	n, _ = reverts()
	require.Zero(t, n)
	// ...drift when it changed while no syncer watched.
	e.change(cm, fieldpath.MakePathOrDie("data", "mode"), func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, "edited", "data", "mode")
	})
	e.seen(cm)
	restarted = newDriftSyncer(e)
	restarted.desired = s.desired
	s = restarted
	reconcile()
	require.Equal(t, "center", data())
	n, last = reverts()
	require.Equal(t, int64(1), n)
	require.Equal(t, []string{".data.mode"}, last.Fields)

	// Removed from the mailbox: deleted by the syncer, and its record with
	// it: placed again, it is a first apply.
	want(nil)
	_, err := s.reconcileDownsync(ctx, key)
	require.NoError(t, err)
	require.NotContains(t, e.objs, cm, "deleted by the syncer")
	e.seen(cm)
	want(placedConfigMap(t, map[string]any{"mode": "center"}, false))
	reconcile()
	n, _ = reverts()
	require.Equal(t, int64(1), n, "placing it again is not drift")
}
