// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// mailboxLimitError is the server's refusal of a copy for the mailbox
// limit of its inventory space, as server/quota makes it.
func mailboxLimitError(name string) error {
	err := apierrors.NewForbidden(cmGVR.GroupResource(), name, errors.New(`the mailboxes of the SyncTargets of inventory space "inv1" hold 10 objects, its limit`))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: edgev2alpha1.MailboxLimitReason, Message: `the mailboxes of inventory space "inv1" hold what its limit allows (10, set by SpaceQuota "q" spec.limits.mailboxObjects): copies past it are not placed`})
	return err
}

// TestMailboxLimitLeavesCopiesOut: a copy the server refuses for the
// mailbox limit of its inventory space is left out, without failing the
// reconcile: the other copies are written, the placement's problems say
// which limit (once, however many copies), and the mailbox is looked at
// again later. A namespace refused so leaves out what it would hold,
// which is not even tried.
func TestMailboxLimitLeavesCopiesOut(t *testing.T) {
	f := newFake()
	f.put(cmGVR, "wds1", configMap("default", "a", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("default", "b", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("default", "c", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("app", "d", map[string]any{"a": "1"}))
	f.place("wds1", "p", 1, cmClause("a", "b", "c", "d"))
	f.failWrite["configmaps default/a"] = mailboxLimitError("a")
	f.failWrite["configmaps default/c"] = mailboxLimitError("c")
	f.failWrite["namespaces app"] = mailboxLimitError("app")
	var requeued []time.Duration
	r := f.reconciler()
	r.requeueAfter = func(_ string, d time.Duration) { requeued = append(requeued, d) }
	requeue, err := r.reconcile(context.Background(), spaces.Key(inv, "", stName))
	require.NoError(t, err)
	require.False(t, requeue)
	require.Equal(t, []string{"recordProblems 1", "create namespaces app", "create namespaces default",
		"create configmaps default/a", "create configmaps default/b", "create configmaps default/c", "createSyncerConfig", "recordProblems 1"}, f.calls,
		"app/d is not tried: its namespace was refused")
	require.NotNil(t, f.get(cmGVR, f.mailbox(), "default", "b"))
	require.Nil(t, f.get(cmGVR, f.mailbox(), "default", "a"))
	require.Equal(t, []problem{{Reason: edgev2alpha1.MailboxLimitReason, Message: `the mailboxes of inventory space "inv1" hold what its limit allows (10, set by SpaceQuota "q" spec.limits.mailboxObjects): copies past it are not placed`}},
		f.problems[spaces.Key("wds1", "", "p")])
	require.Equal(t, []time.Duration{mailboxLimitRetry}, requeued)

	// Room is made: the next look places them, and the problem goes.
	clear(f.failWrite)
	f.calls = nil
	_, err = r.reconcile(context.Background(), spaces.Key(inv, "", stName))
	require.NoError(t, err)
	require.NotNil(t, f.get(cmGVR, f.mailbox(), "app", "d"))
	require.Empty(t, f.problems)
	require.Len(t, requeued, 1)

	// Remembered: while the inventory is known to be full, a new copy is
	// not even sent (each would be a refused write of the whole object,
	// for every mailbox); after mailboxLimitRetry, one is tried again.
	f = newFake()
	f.put(cmGVR, "wds1", configMap("default", "a", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("default", "b", map[string]any{"a": "1"}))
	f.place("wds1", "p", 1, cmClause("a", "b"))
	f.failWrite["configmaps default/a"] = mailboxLimitError("a")
	r = f.reconciler()
	r.full = newFullInventories()
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	run := func() []string {
		f.calls = nil
		_, err := r.reconcile(context.Background(), spaces.Key(inv, "", stName))
		require.NoError(t, err)
		return f.calls
	}
	require.Equal(t, []string{"recordProblems 1", "create namespaces default", "create configmaps default/a", "createSyncerConfig", "recordProblems 1"}, run(),
		"b is not sent once a is refused")
	require.Nil(t, f.get(cmGVR, f.mailbox(), "default", "b"))
	require.Len(t, f.problems[spaces.Key("wds1", "", "p")], 1)
	clear(f.failWrite)
	require.Equal(t, []string{"recordProblems 1", "recordProblems 1"}, run(), "still full, as far as the translator knows")
	now = now.Add(mailboxLimitRetry + time.Second)
	require.Equal(t, []string{"recordProblems 1", "create configmaps default/a", "create configmaps default/b"}, run())
	require.Empty(t, f.problems)

	// Any other refusal is no mailbox limit (it fails the reconcile, as
	// TestMailboxReconcileSequence shows).
	_, limited := mailboxLimit(apierrors.NewForbidden(cmGVR.GroupResource(), "a", errors.New("no")))
	require.False(t, limited)
}

// TestEmptyNamespaceGrace: a mailbox namespace whose placed contents went
// stays for a grace period (under churn they come back, and a namespace
// being deleted takes no new copies); the mailbox is looked at again when
// the period ends, and then it goes. Contents that come back meanwhile
// keep it.
func TestEmptyNamespaceGrace(t *testing.T) {
	f := newFake()
	f.put(cmGVR, "wds1", configMap("app", "cm", map[string]any{"a": "1"}))
	f.place("wds1", "p", 1, cmClause("cm"))
	now := time.Unix(1000, 0)
	var requeued []time.Duration
	r := f.reconciler()
	r.emptyNamespaces = newEmptyNamespaces(namespaceGrace)
	r.now = func() time.Time { return now }
	r.requeueAfter = func(_ string, d time.Duration) { requeued = append(requeued, d) }
	key := spaces.Key(inv, "", stName)
	run := func() []string {
		f.calls = nil
		_, err := r.reconcile(context.Background(), key)
		require.NoError(t, err)
		return f.calls
	}
	run()
	require.NotNil(t, f.get(namespaceResource.GroupVersionResource, f.mailbox(), "", "app"))

	delete(f.objects[cmGVR], spaces.Key("wds1", "app", "cm"))
	require.Equal(t, []string{"recordProblems 1", "delete configmaps app/cm", "updateSyncerConfig"}, run(), "the namespace stays for now")
	require.Equal(t, []time.Duration{namespaceGrace}, requeued)
	require.Equal(t, []edgev2alpha1.SyncedResource{{Version: "v1", Resource: "namespaces"}}, f.syncerConfigs[f.mailbox()].Spec.Resources,
		"the namespace stays the syncer's to keep")

	now = now.Add(10 * time.Second)
	require.Equal(t, []string{"recordProblems 1"}, run())
	require.Equal(t, namespaceGrace-10*time.Second, requeued[len(requeued)-1], "looked at again when the period ends")

	// The contents come back within the period: the namespace is kept,
	// and its period starts again next time.
	f.put(cmGVR, "wds1", configMap("app", "cm", map[string]any{"a": "1"}))
	require.Equal(t, []string{"recordProblems 1", "create configmaps app/cm", "updateSyncerConfig"}, run())
	delete(f.objects[cmGVR], spaces.Key("wds1", "app", "cm"))
	now = now.Add(25 * time.Second)
	require.Equal(t, []string{"recordProblems 1", "delete configmaps app/cm", "updateSyncerConfig"}, run())
	require.Equal(t, namespaceGrace, requeued[len(requeued)-1], "a new period")

	now = now.Add(namespaceGrace)
	require.Equal(t, []string{"recordProblems 1", "delete namespaces app", "updateSyncerConfig"}, run(), "then it goes")
	require.Empty(t, f.syncerConfigs[f.mailbox()].Spec.Resources)
	require.Nil(t, f.get(namespaceResource.GroupVersionResource, f.mailbox(), "", "app"))
}

// TestWriteCopiesConcurrently: a mailbox's copies are written up to
// writers at a time, never more, and only once their namespaces exist; a
// failed write is named.
func TestWriteCopiesConcurrently(t *testing.T) {
	const writers, perNamespace = 4, 10
	desired := map[string]*desiredCopy{}
	for _, ns := range []string{"a", "b"} {
		nsObj := &unstructured.Unstructured{}
		nsObj.SetAPIVersion("v1")
		nsObj.SetKind("Namespace")
		nsObj.SetName(ns)
		desired[copyKey(namespaceResource.GroupVersionResource, "", ns)] = &desiredCopy{res: namespaceResource, obj: nsObj, implied: true}
		for i := range perNamespace {
			cm := configMap(ns, fmt.Sprintf("cm-%d", i), map[string]any{"k": "v"})
			desired[copyKey(configmaps.GroupVersionResource, ns, cm.GetName())] = &desiredCopy{res: configmaps, obj: cm}
		}
	}

	run := func(t *testing.T, fail string) (created []string, maxInFlight int, err error) {
		var mu sync.Mutex
		inFlight := 0
		full := make(chan struct{})
		namespaces := map[string]bool{}
		r := &mailboxReconciler{writers: writers}
		r.create = func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			what := describe(gvr, obj.GetNamespace(), obj.GetName())
			mu.Lock()
			if isNamespaces(gvr) {
				namespaces[obj.GetName()] = true
				created = append(created, what)
				mu.Unlock()
				return nil
			}
			if !namespaces[obj.GetNamespace()] {
				t.Errorf("%s written before its namespace", what)
			}
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			if inFlight == writers {
				select {
				case <-full:
				default:
					close(full)
				}
			}
			mu.Unlock()
			// The first writes wait until the bound is reached: written one
			// at a time, the first would wait for ever.
			select {
			case <-full:
			case <-time.After(10 * time.Second):
				t.Errorf("%s: never %d writes in flight", what, writers)
			}
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			created = append(created, what)
			if what == fail {
				return errors.New("refused")
			}
			return nil
		}
		_, _, err = r.writeCopies(context.Background(), inv, desired, nil)
		return created, maxInFlight, err
	}

	created, maxInFlight, err := run(t, "")
	require.NoError(t, err)
	require.Len(t, created, len(desired))
	require.Equal(t, writers, maxInFlight, "up to the bound, never more")

	failing := describe(configmaps.GroupVersionResource, "a", "cm-1")
	created, _, err = run(t, failing)
	require.ErrorContains(t, err, "writing configmaps a/cm-1: refused")
	require.Contains(t, created, failing)
	// (That no write starts once a failure is recorded is checked one
	// write at a time, in TestMailboxReconcileSequence: here, writes
	// already in flight, and those started before the failure is seen,
	// finish.)
}

// TestWriteStaleCache: a copy the cache has not seen yet, whose create
// finds it there, is compared with the server's and updated only when it
// differs. A copy another source holds, or an object that is no copy, is
// for a reconcile whose cache has it (the error retries); an object the
// edge upsynced is never written over.
func TestWriteStaleCache(t *testing.T) {
	desired := func() *desiredCopy {
		cm := configMap("ns", "cm", map[string]any{"k": "v2"})
		cm.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: "wds1"})
		return &desiredCopy{res: configmaps, obj: cm, sourcePlacement: "p", placements: map[string]bool{"p": true}}
	}
	// What the translator writes for it, or for a variation of it.
	wanted := func(change func(d *desiredCopy)) *unstructured.Unstructured {
		var made *unstructured.Unstructured
		r := &mailboxReconciler{create: func(_ context.Context, _ schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			made = obj
			return nil
		}}
		d := desired()
		change(d)
		did, err := r.write(context.Background(), d, nil)
		require.NoError(t, err)
		require.True(t, did)
		made.SetResourceVersion("7")
		return made
	}
	notOurs := configMap("ns", "cm", map[string]any{"k": "theirs"})
	notOurs.SetResourceVersion("7")
	for _, tc := range []struct {
		name    string
		desired func(d *desiredCopy)
		live    *unstructured.Unstructured
		updated bool
		err     string
	}{
		{name: "the server has this version", live: wanted(func(*desiredCopy) {})},
		{name: "the server has an older version", live: wanted(func(d *desiredCopy) { d.obj.Object["data"] = map[string]any{"k": "v1"} }), updated: true},
		{name: "another WDS holds it", live: wanted(func(d *desiredCopy) {
			d.obj.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: "wds2"})
		}), err: "already exists"},
		{name: "another placement holds it", live: wanted(func(d *desiredCopy) { d.sourcePlacement = "q" }), err: "already exists"},
		{name: "not a copy", live: notOurs, err: "already exists"},
		{name: "create-only: there is enough", desired: func(d *desiredCopy) { d.createOnly = true }},
		{name: "an implied namespace: there is enough", desired: func(d *desiredCopy) { d.implied = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var updates []*unstructured.Unstructured
			r := &mailboxReconciler{
				create: func(_ context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
					return apierrors.NewAlreadyExists(gvr.GroupResource(), obj.GetName())
				},
				get: func(context.Context, schema.GroupVersionResource, string, string) (*unstructured.Unstructured, error) {
					if tc.live == nil {
						t.Error("read back what needs no reading")
						return nil, errors.New("no")
					}
					return tc.live.DeepCopy(), nil
				},
				update: func(_ context.Context, _ schema.GroupVersionResource, obj *unstructured.Unstructured) error {
					updates = append(updates, obj)
					return nil
				},
			}
			d := desired()
			if tc.desired != nil {
				tc.desired(d)
			}
			did, err := r.write(context.Background(), d, nil)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Empty(t, updates)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.updated, did)
			if !tc.updated {
				require.Empty(t, updates)
				return
			}
			require.Len(t, updates, 1)
			require.Equal(t, "7", updates[0].GetResourceVersion(), "the update replaces what the server has")
			require.Equal(t, map[string]any{"k": "v2"}, updates[0].Object["data"])
		})
	}

	// Seen in the cache, an object the edge upsynced stays.
	r := &mailboxReconciler{update: func(context.Context, schema.GroupVersionResource, *unstructured.Unstructured) error {
		t.Error("overwrote an upsynced object")
		return nil
	}}
	upsynced := notOurs.DeepCopy()
	upsynced.SetLabels(map[string]string{edgev2alpha1.UpsyncedLabel: "true"})
	did, err := r.write(context.Background(), desired(), upsynced)
	require.NoError(t, err)
	require.False(t, did)
}

// TestInParallelPanic: a panic in one write fails the reconcile with an
// error, not the process.
func TestInParallelPanic(t *testing.T) {
	r := &mailboxReconciler{writers: 4}
	var done atomic.Int64
	err := r.inParallel(context.Background(), []string{"a", "b", "c"}, func(k string) error {
		if k == "b" {
			panic("boom")
		}
		done.Add(1)
		return nil
	})
	require.ErrorContains(t, err, "panic on b")
	require.LessOrEqual(t, done.Load(), int64(2))
}

func copyOf(res resource, namespace, name string) (string, *desiredCopy) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetName(name)
	obj.SetNamespace(namespace)
	return copyKey(res.GroupVersionResource, namespace, name), &desiredCopy{res: res, obj: obj}
}

func TestSyncerConfigSpec(t *testing.T) {
	deployments := resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true}
	configmaps := resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	clusterroles := resource{GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"}
	widgets := resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}
	upsync := []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"pods"}, Namespaces: []string{"b"}}, {APIGroup: "apps", Resources: []string{"*"}}}

	for _, tc := range []struct {
		name   string
		copies [][2]string // resource name, namespace/name
		crds   []string
		upsync []edgev2alpha1.UpsyncClause
		want   edgev2alpha1.SyncerConfigSpec
	}{
		{name: "nothing", want: edgev2alpha1.SyncerConfigSpec{}},
		{
			name: "sorted and deduplicated",
			copies: [][2]string{
				{"deployments", "zeta/web"}, {"deployments", "alpha/web"}, {"configmaps", "alpha/a"}, {"configmaps", "alpha/b"},
				{"configmaps", "mid/a"}, {"clusterroles", "/reader"}, {"widgets", "zeta/w"}, {"namespaces", "/alpha"},
			},
			crds:   []string{"widgets.example.com", "gadgets.example.com", "apples.example.com"},
			upsync: upsync,
			want: edgev2alpha1.SyncerConfigSpec{
				Namespaces: []string{"alpha", "mid", "zeta"},
				Resources: []edgev2alpha1.SyncedResource{
					{Group: "", Version: "v1", Resource: "configmaps", Namespaced: true},
					{Group: "", Version: "v1", Resource: "namespaces", Namespaced: false},
					{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true},
					{Group: "example.com", Version: "v1beta1", Resource: "widgets", Namespaced: true},
					{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles", Namespaced: false},
				},
				CRDs:   []string{"apples.example.com", "gadgets.example.com", "widgets.example.com"},
				Upsync: upsync,
			},
		},
		{
			name:   "cluster-scoped copies add no namespace",
			copies: [][2]string{{"clusterroles", "/a"}, {"clusterroles", "/b"}},
			want: edgev2alpha1.SyncerConfigSpec{Resources: []edgev2alpha1.SyncedResource{
				{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}}},
		},
		{
			name: "CRDs and upsync alone",
			crds: []string{"b.example.com", "a.example.com"}, upsync: upsync,
			want: edgev2alpha1.SyncerConfigSpec{CRDs: []string{"a.example.com", "b.example.com"}, Upsync: upsync},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			byName := map[string]resource{"deployments": deployments, "configmaps": configmaps, "clusterroles": clusterroles,
				"widgets": widgets, "namespaces": namespaceResource}
			desired := map[string]*desiredCopy{}
			for _, c := range tc.copies {
				ns, name, _ := strings.Cut(c[1], "/")
				k, d := copyOf(byName[c[0]], ns, name)
				desired[k] = d
			}
			crdNames := map[string]bool{}
			for _, n := range tc.crds {
				crdNames[n] = true
			}
			// Maps iterate in random order: the result must not depend on it.
			for range 20 {
				require.Equal(t, tc.want, syncerConfigSpec(desired, crdNames, tc.upsync))
			}
		})
	}
}

func TestContentHash(t *testing.T) {
	obj := func(pairs ...any) *unstructured.Unstructured {
		m := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
		data := map[string]any{}
		for i := 0; i < len(pairs); i += 2 {
			data[pairs[i].(string)] = pairs[i+1]
		}
		m["data"] = data
		return &unstructured.Unstructured{Object: m}
	}
	base := obj("a", "1", "b", "2")
	h, err := contentHash(base)
	require.NoError(t, err)
	require.Regexp(t, "^[0-9a-f]{32}$", h)

	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		same bool
	}{
		{name: "same object again", obj: base, same: true},
		{name: "deep copy", obj: base.DeepCopy(), same: true},
		{name: "same content built in another order", obj: obj("b", "2", "a", "1"), same: true},
		{name: "changed value", obj: obj("a", "1", "b", "3"), same: false},
		{name: "added key", obj: obj("a", "1", "b", "2", "c", "3"), same: false},
		{name: "removed key", obj: obj("a", "1"), same: false},
		{name: "value type changed", obj: obj("a", int64(1), "b", "2"), same: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := contentHash(tc.obj)
			require.NoError(t, err)
			if tc.same {
				require.Equal(t, h, got)
			} else {
				require.NotEqual(t, h, got)
			}
		})
	}

	t.Run("unmarshalable content is an error", func(t *testing.T) {
		_, err := contentHash(&unstructured.Unstructured{Object: map[string]any{"bad": make(chan int)}})
		require.Error(t, err)
	})
}
