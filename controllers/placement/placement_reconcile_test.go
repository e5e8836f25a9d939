// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// fakeMailbox is the world a mailbox reconciler sees: caches as maps, and
// writes that change them, as the server and the informers would. It
// records every call that writes or reports, in order.
type fakeMailbox struct {
	syncTargets   map[string]*edgev2alpha1.SyncTarget // space|name
	slices        []*edgev2alpha1.SinglePlacementSlice
	placements    map[string]*edgev2alpha1.EdgePlacement // space|name
	locations     map[string]*edgev2alpha1.Location      // space|name
	customizers   map[string]*edgev2alpha1.Customizer    // space|namespace/name
	served        []resource
	objects       map[schema.GroupVersionResource]map[string]*unstructured.Unstructured // space|namespace/name
	notSynced     map[schema.GroupVersionResource]bool
	syncerConfigs map[string]*edgev2alpha1.SyncerConfig // mailbox
	// failWrite fails a create or update of "resource namespace/name".
	failWrite map[string]error

	calls    []string
	problems map[string][]problem // the last recorded, by placement key
	// slicesAsked are the destinations slicesFor was asked about.
	slicesAsked []string
	rv          int
	// memo lives across reconciles, as the controller's does.
	memo *copyMemo
	// deny names what the placements' writer may not read, as
	// "resource|namespace", and unanswered what cannot be asked about;
	// asked counts the questions.
	deny, unanswered map[string]bool
	asked            int
	// outside are the WDSes whose Space does not name inv among its
	// inventory spaces; every other WDS names it.
	outside map[string]bool
}

const (
	inv    = "inv1"
	stName = "edge1"
	stUID  = types.UID("uid-1")
)

func newFake() *fakeMailbox {
	f := &fakeMailbox{
		syncTargets: map[string]*edgev2alpha1.SyncTarget{}, placements: map[string]*edgev2alpha1.EdgePlacement{},
		locations: map[string]*edgev2alpha1.Location{}, customizers: map[string]*edgev2alpha1.Customizer{},
		served:        []resource{configmaps, namespaceResource},
		objects:       map[schema.GroupVersionResource]map[string]*unstructured.Unstructured{},
		notSynced:     map[schema.GroupVersionResource]bool{},
		syncerConfigs: map[string]*edgev2alpha1.SyncerConfig{}, failWrite: map[string]error{},
		memo: newCopyMemo(),
	}
	st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: stName, UID: stUID, Annotations: map[string]string{spaces.Annotation: inv}}}
	st.Status.MailboxSpace = spaces.MailboxName(inv, string(stUID))
	f.syncTargets[spaces.Key(inv, "", stName)] = st
	f.locations[spaces.Key(inv, "", "loc1")] = &edgev2alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: "loc1", Labels: map[string]string{"region": "east"}}}
	return f
}

func (f *fakeMailbox) mailbox() string { return spaces.MailboxName(inv, string(stUID)) }

// place adds a placement of a WDS, created some seconds after epoch,
// with its slice naming edge1 through loc1.
func (f *fakeMailbox) place(wds, name string, age int, clauses ...edgev2alpha1.DownsyncClause) *edgev2alpha1.EdgePlacement {
	ep := placementAt(name, age)
	ep.Annotations = map[string]string{spaces.Annotation: wds}
	ep.Spec.Downsync = clauses
	f.placements[spaces.Key(wds, "", name)] = ep
	f.slices = append(f.slices, &edgev2alpha1.SinglePlacementSlice{
		ObjectMeta:   metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.Annotation: wds}},
		Destinations: []edgev2alpha1.SinglePlacement{{Space: inv, LocationName: "loc1", SyncTargetName: stName, SyncTargetUID: stUID}},
	})
	return ep
}

// put stores an object of a space, as the cache holds it.
func (f *fakeMailbox) put(gvr schema.GroupVersionResource, space string, obj *unstructured.Unstructured) {
	obj = obj.DeepCopy()
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[spaces.Annotation] = space
	obj.SetAnnotations(a)
	if f.objects[gvr] == nil {
		f.objects[gvr] = map[string]*unstructured.Unstructured{}
	}
	f.rv++
	obj.SetResourceVersion(fmt.Sprint(f.rv))
	f.objects[gvr][spaces.Key(space, obj.GetNamespace(), obj.GetName())] = obj
}

// record is what the shared cache holds of an object: a copy in the
// mailbox as its record, anything else as it is.
func (f *fakeMailbox) record(obj *unstructured.Unstructured) metav1.Object {
	if obj.GetLabels()[edgev2alpha1.PlacementCopyLabel] == "true" && crossspace.SpaceOf(obj) == f.mailbox() {
		return crossspace.Record(obj)
	}
	return obj
}

func (f *fakeMailbox) get(gvr schema.GroupVersionResource, space, namespace, name string) *unstructured.Unstructured {
	return f.objects[gvr][spaces.Key(space, namespace, name)]
}

func configMap(namespace, name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": namespace}, "data": data}}
}

func describe(gvr schema.GroupVersionResource, namespace, name string) string {
	return gvr.Resource + " " + qualifiedName(&metav1.ObjectMeta{Namespace: namespace, Name: name})
}

func (f *fakeMailbox) reconciler() *mailboxReconciler {
	spaceOf := func(ctx context.Context) string {
		space, _ := spaces.FromContext(ctx)
		return space
	}
	return &mailboxReconciler{
		memo: f.memo,
		mayRead: func(_ context.Context, _ string, _ *edgev2alpha1.EdgePlacement, gvr schema.GroupVersionResource, namespace string) (bool, string, error) {
			f.asked++
			if f.unanswered[gvr.Resource+"|"+namespace] {
				return false, "", errors.New(gvr.Resource + " in " + namespace + ": cannot ask")
			}
			if f.deny[gvr.Resource+"|"+namespace] {
				return false, gvr.Resource + " in " + namespace + " may not be read", nil
			}
			return true, "", nil
		},
		syncTarget: func(space, name string) (*edgev2alpha1.SyncTarget, bool) {
			st, ok := f.syncTargets[spaces.Key(space, "", name)]
			return st, ok
		},
		slicesFor: func(inventory, syncTarget string) []*edgev2alpha1.SinglePlacementSlice {
			f.slicesAsked = append(f.slicesAsked, inventory+"/"+syncTarget)
			var out []*edgev2alpha1.SinglePlacementSlice
			for _, s := range f.slices {
				if slices.ContainsFunc(s.Destinations, func(d edgev2alpha1.SinglePlacement) bool {
					return d.Space == inventory && d.SyncTargetName == syncTarget
				}) {
					out = append(out, s)
				}
			}
			return out
		},
		placement: func(space, name string) (*edgev2alpha1.EdgePlacement, bool) {
			ep, ok := f.placements[spaces.Key(space, "", name)]
			return ep, ok
		},
		inventories: func(wds string) []string {
			if f.outside[wds] {
				return []string{"inv-other"}
			}
			return []string{"inv-other", inv}
		},
		location: func(space, name string) (*edgev2alpha1.Location, bool) {
			l, ok := f.locations[spaces.Key(space, "", name)]
			return l, ok
		},
		namespace: func(space, name string) (metav1.Object, bool) {
			obj := f.get(namespaceResource.GroupVersionResource, space, "", name)
			return obj, obj != nil
		},
		customizer: func(space, namespace, name string) (*edgev2alpha1.Customizer, bool) {
			c, ok := f.customizers[spaces.Key(space, namespace, name)]
			return c, ok
		},
		crds: func() []*apiextensionsv1.CustomResourceDefinition { return nil },
		resolve: func(_ *string, names []string) ([]resource, error) {
			var out []resource
			for _, n := range names {
				found := false
				for _, r := range f.served {
					if r.Resource == n {
						out, found = append(out, r), true
					}
				}
				if !found {
					return out, fmt.Errorf("no resource %s is served", n)
				}
			}
			return out, nil
		},
		objects: func(gvr schema.GroupVersionResource, space string) ([]*unstructured.Unstructured, bool) {
			if f.notSynced[gvr] {
				return nil, false
			}
			var out []*unstructured.Unstructured
			for k, obj := range f.objects[gvr] {
				if strings.HasPrefix(k, space+"|") {
					out = append(out, obj)
				}
			}
			return out, true
		},
		records: func(gvr schema.GroupVersionResource, space string) ([]metav1.Object, bool) {
			if f.notSynced[gvr] {
				return nil, false
			}
			var out []metav1.Object
			for k, obj := range f.objects[gvr] {
				if strings.HasPrefix(k, space+"|") {
					out = append(out, f.record(obj))
				}
			}
			return out, true
		},
		syncerConfig: func(mailbox string) (*edgev2alpha1.SyncerConfig, bool) {
			cfg, ok := f.syncerConfigs[mailbox]
			return cfg, ok
		},
		create: func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			what := describe(gvr, obj.GetNamespace(), obj.GetName())
			f.calls = append(f.calls, "create "+what)
			if err := f.failWrite[what]; err != nil {
				return err
			}
			f.put(gvr, spaceOf(ctx), obj)
			return nil
		},
		update: func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			what := describe(gvr, obj.GetNamespace(), obj.GetName())
			f.calls = append(f.calls, "update "+what)
			if err := f.failWrite[what]; err != nil {
				return err
			}
			if cur := f.get(gvr, spaceOf(ctx), obj.GetNamespace(), obj.GetName()); cur == nil || cur.GetResourceVersion() != obj.GetResourceVersion() {
				return apierrors.NewConflict(gvr.GroupResource(), obj.GetName(), errors.New("stale"))
			}
			f.put(gvr, spaceOf(ctx), obj)
			return nil
		},
		get: func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
			f.calls = append(f.calls, "get "+describe(gvr, namespace, name))
			if obj := f.get(gvr, spaceOf(ctx), namespace, name); obj != nil {
				return obj.DeepCopy(), nil
			}
			return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
		},
		delete: func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) error {
			f.calls = append(f.calls, "delete "+describe(gvr, namespace, name))
			delete(f.objects[gvr], spaces.Key(spaceOf(ctx), namespace, name))
			return nil
		},
		createSyncerConfig: func(ctx context.Context, cfg *edgev2alpha1.SyncerConfig) error {
			f.calls = append(f.calls, "createSyncerConfig")
			if err := f.failWrite["createSyncerConfig"]; err != nil {
				return err
			}
			f.syncerConfigs[spaceOf(ctx)] = cfg.DeepCopy()
			return nil
		},
		updateSyncerConfig: func(ctx context.Context, cfg *edgev2alpha1.SyncerConfig) error {
			f.calls = append(f.calls, "updateSyncerConfig")
			f.syncerConfigs[spaceOf(ctx)] = cfg.DeepCopy()
			return nil
		},
		recordProblems: func(mailbox string, placements map[string]bool, problems map[string][]problem) {
			f.calls = append(f.calls, fmt.Sprintf("recordProblems %d", len(placements)))
			f.problems = map[string][]problem{}
			for k, p := range problems {
				if len(p) > 0 {
					f.problems[k] = p
				}
			}
		},
	}
}

// run reconciles edge1's mailbox and returns the calls it made.
func (f *fakeMailbox) run(t *testing.T) ([]string, bool, error) {
	t.Helper()
	f.calls = nil
	requeue, err := f.reconciler().reconcile(context.Background(), spaces.Key(inv, "", stName))
	return f.calls, requeue, err
}

var cmGVR = configmaps.GroupVersionResource

func cmClause(names ...string) edgev2alpha1.DownsyncClause {
	core := ""
	return edgev2alpha1.DownsyncClause{APIGroup: &core, Resources: []string{"configmaps"}, ObjectNames: names}
}

func TestMailboxReconcileSequence(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup prepares the world; between, when set, changes it after a
		// first reconcile (whose calls then do not count).
		setup, between func(f *fakeMailbox)
		wantCalls      []string
		wantRequeue    bool
		wantErr        string
		check          func(t *testing.T, f *fakeMailbox)
	}{
		{
			name:      "no such SyncTarget",
			setup:     func(f *fakeMailbox) { delete(f.syncTargets, spaces.Key(inv, "", stName)) },
			wantCalls: nil,
		},
		{
			name: "a SyncTarget whose mailbox is not made yet",
			setup: func(f *fakeMailbox) {
				f.syncTargets[spaces.Key(inv, "", stName)].Status.MailboxSpace = ""
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			wantCalls: nil,
		},
		{
			name: "a SyncTarget being deleted",
			setup: func(f *fakeMailbox) {
				now := metav1.Now()
				f.syncTargets[spaces.Key(inv, "", stName)].DeletionTimestamp = &now
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			wantCalls: nil,
		},
		{
			name: "a new mailbox: its namespace, its copy, its SyncerConfig",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("default", "other", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default", "create configmaps default/cm", "createSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				cp := f.get(cmGVR, f.mailbox(), "default", "cm")
				require.Equal(t, "true", cp.GetLabels()[edgev2alpha1.PlacementCopyLabel])
				a := cp.GetAnnotations()
				require.Equal(t, "wds1", a[edgev2alpha1.SourceSpaceAnnotation])
				require.Equal(t, "p", a[edgev2alpha1.SourcePlacementAnnotation])
				require.Equal(t, "p", a[edgev2alpha1.PlacementsAnnotation])
				require.NotEmpty(t, a[ContentHashAnnotation])
				cfg := f.syncerConfigs[f.mailbox()]
				require.Equal(t, []string{"default"}, cfg.Spec.Namespaces)
				require.Equal(t, []edgev2alpha1.SyncedResource{{Version: "v1", Resource: "configmaps", Namespaced: true},
					{Version: "v1", Resource: "namespaces"}}, cfg.Spec.Resources)
			},
		},
		{
			name: "a label selector selects by the object's labels; a copy from upstream is never selected",
			setup: func(f *fakeMailbox) {
				labelled := func(name string, labels map[string]string) *unstructured.Unstructured {
					cm := configMap("default", name, map[string]any{"a": "1"})
					cm.SetLabels(labels)
					return cm
				}
				f.put(cmGVR, "wds1", labelled("web", map[string]string{"app": "web"}))
				f.put(cmGVR, "wds1", labelled("db", map[string]string{"app": "db"}))
				f.put(cmGVR, "wds1", labelled("copied", map[string]string{"app": "web", edgev2alpha1.PlacementCopyLabel: "true"}))
				clause := cmClause()
				clause.LabelSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}
				f.place("wds1", "p", 1, clause)
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default", "create configmaps default/web", "createSyncerConfig"},
		},
		{
			name: "nothing changed: nothing written",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between:   func(*fakeMailbox) {},
			wantCalls: []string{"recordProblems 1"},
		},
		{
			name: "a change of executing-count alone: nothing written",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between: func(f *fakeMailbox) {
				obj := f.get(cmGVR, "wds1", "default", "cm")
				obj.SetLabels(map[string]string{edgev2alpha1.ExecutingCountLabel: "3"})
				f.put(cmGVR, "wds1", obj)
			},
			wantCalls: []string{"recordProblems 1"},
		},
		{
			name: "a changed source: its copy replaced, what the syncer wrote kept",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "2"}))
				cp := f.get(cmGVR, f.mailbox(), "default", "cm")
				a := cp.GetAnnotations()
				a[edgev2alpha1.SyncErrorAnnotation] = "Refused: no"
				cp.SetAnnotations(a)
				f.put(cmGVR, f.mailbox(), cp)
			},
			wantCalls: []string{"recordProblems 1", "update configmaps default/cm"},
			check: func(t *testing.T, f *fakeMailbox) {
				cp := f.get(cmGVR, f.mailbox(), "default", "cm")
				require.Equal(t, "2", cp.Object["data"].(map[string]any)["a"])
				require.Equal(t, "Refused: no", cp.GetAnnotations()[edgev2alpha1.SyncErrorAnnotation])
			},
		},
		{
			name: "what the placement's writer may not read is not placed, reported once; asked once per namespace",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("a", "x", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("a", "y", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("b", "z", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("b", "w", map[string]any{"a": "1"}))
				f.deny = map[string]bool{"configmaps|a": true}
				f.place("wds1", "p", 1, cmClause())
			},
			wantCalls: []string{"recordProblems 1", "create namespaces b", "create configmaps b/w", "create configmaps b/z", "createSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.Equal(t, map[string][]problem{spaces.Key("wds1", "", "p"): {{"NotPermitted", "configmaps in a may not be read"}}}, f.problems)
				require.Equal(t, 2, f.asked)
			},
		},
		{
			name: "whether the writer may read cannot be asked: nothing changes, looked at again later",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("a", "x", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("b", "z", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause())
			},
			between: func(f *fakeMailbox) {
				f.unanswered = map[string]bool{"configmaps|a": true}
				f.put(cmGVR, "wds1", configMap("b", "z", map[string]any{"a": "2"}))
			},
			wantCalls: []string{"recordProblems 1"},
			wantErr:   errRetryLater.Error(),
			check: func(t *testing.T, f *fakeMailbox) {
				require.NotNil(t, f.get(cmGVR, f.mailbox(), "a", "x"), "a copy went while access could not be checked")
				require.Equal(t, map[string][]problem{spaces.Key("wds1", "", "p"): {{reasonAccessUnknown, "configmaps in a: cannot ask"}}}, f.problems)
				// Answered again: the mailbox catches up.
				f.unanswered = nil
				calls, _, err := f.run(t)
				require.NoError(t, err)
				require.Equal(t, []string{"recordProblems 1", "update configmaps b/z"}, calls)
			},
		},
		{
			name: "a copy changed in the mailbox, its hash with it: written back",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between: func(f *fakeMailbox) {
				cp := f.get(cmGVR, f.mailbox(), "default", "cm").DeepCopy()
				cp.Object["data"] = map[string]any{"a": "changed"}
				a := cp.GetAnnotations()
				a[ContentHashAnnotation] = "0123"
				cp.SetAnnotations(a)
				f.put(cmGVR, f.mailbox(), cp)
			},
			wantCalls: []string{"recordProblems 1", "update configmaps default/cm"},
			check: func(t *testing.T, f *fakeMailbox) {
				cp := f.get(cmGVR, f.mailbox(), "default", "cm")
				require.Equal(t, "1", cp.Object["data"].(map[string]any)["a"])
				require.NotEqual(t, "0123", cp.GetAnnotations()[ContentHashAnnotation])
			},
		},
		{
			name: "another placement of the WDS selects the same object: the copy names both",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between:   func(f *fakeMailbox) { f.place("wds1", "q", 2, cmClause("cm")) },
			wantCalls: []string{"recordProblems 2", "update configmaps default/cm"},
			check: func(t *testing.T, f *fakeMailbox) {
				a := f.get(cmGVR, f.mailbox(), "default", "cm").GetAnnotations()
				require.Equal(t, "p,q", a[edgev2alpha1.PlacementsAnnotation])
				require.Equal(t, "p", a[edgev2alpha1.SourcePlacementAnnotation])
			},
		},
		{
			name: "a create-only copy present is never updated",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				c := cmClause("cm")
				c.CreateOnly = true
				f.place("wds1", "p", 1, c)
			},
			between:   func(f *fakeMailbox) { f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "2"})) },
			wantCalls: []string{"recordProblems 1"},
		},
		{
			name: "no longer selected: its copy and its implied namespace go, namespaces last",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("app", "cm", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("default", "keep", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm", "keep"))
			},
			between: func(f *fakeMailbox) {
				delete(f.objects[cmGVR], spaces.Key("wds1", "app", "cm"))
				// Something in the mailbox the translator did not make stays.
				f.put(cmGVR, f.mailbox(), configMap("default", "upsynced", nil))
			},
			wantCalls: []string{"recordProblems 1", "delete configmaps app/cm", "delete namespaces app", "updateSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.NotNil(t, f.get(cmGVR, f.mailbox(), "default", "upsynced"))
				require.Equal(t, []string{"default"}, f.syncerConfigs[f.mailbox()].Spec.Namespaces)
			},
		},
		{
			name: "a slice naming another incarnation of the SyncTarget is not this mailbox's",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
				f.slices[0].Destinations[0].SyncTargetUID = "uid-0"
			},
			wantCalls: []string{"recordProblems 0", "createSyncerConfig"},
		},
		{
			name: "a placement being deleted places nothing",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				ep := f.place("wds1", "p", 1, cmClause("cm"))
				now := metav1.Now()
				ep.DeletionTimestamp = &now
			},
			wantCalls: []string{"recordProblems 0", "createSyncerConfig"},
		},
		{
			name: "a cache not synced: look again later, nothing written",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
				f.notSynced[cmGVR] = true
			},
			wantCalls:   nil,
			wantRequeue: true,
		},
		{
			name: "the mailbox's namespaces not synced: look again later",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
				f.notSynced[namespaceResource.GroupVersionResource] = true
			},
			wantCalls:   nil,
			wantRequeue: true,
		},
		{
			name: "an unknown resource: reported, the rest written, retried later",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"), edgev2alpha1.DownsyncClause{Resources: []string{"gizmos"}})
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default", "create configmaps default/cm", "createSyncerConfig"},
			wantErr:   errRetryLater.Error(),
			check: func(t *testing.T, f *fakeMailbox) {
				require.Equal(t, []problem{{"UnknownResource", "spec.downsync[1]: no resource gizmos is served"}}, f.problems[spaces.Key("wds1", "", "p")])
			},
		},
		{
			name: "a missing Customizer: reported, nothing half-made written",
			setup: func(f *fakeMailbox) {
				cm := configMap("default", "cm", map[string]any{"a": "1"})
				cm.SetAnnotations(map[string]string{edgev2alpha1.CustomizerAnnotation: "nope"})
				f.put(cmGVR, "wds1", cm)
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default", "createSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.Equal(t, []problem{{"CustomizerNotFound", "configmap default/cm names Customizer default/nope, which does not exist"}},
					f.problems[spaces.Key("wds1", "", "p")])
				require.Nil(t, f.get(cmGVR, f.mailbox(), "default", "cm"))
			},
		},
		{
			name: "two WDSes: the older placement's copy, the other told why",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds2", configMap("default", "shared", map[string]any{"v": "two"}))
				f.put(cmGVR, "wds1", configMap("default", "shared", map[string]any{"v": "one"}))
				f.place("wds2", "p", 2, cmClause("shared"))
				f.place("wds1", "p", 1, cmClause("shared"))
			},
			wantCalls: []string{"recordProblems 2", "create namespaces default", "create configmaps default/shared", "createSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				cp := f.get(cmGVR, f.mailbox(), "default", "shared")
				require.Equal(t, "one", cp.Object["data"].(map[string]any)["v"])
				require.Equal(t, "wds1", cp.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation])
				require.Len(t, f.problems, 1)
				probs := f.problems[spaces.Key("wds2", "", "p")]
				require.Len(t, probs, 1)
				require.Equal(t, edgev2alpha1.ConflictReasonOtherSpace, probs[0].Reason)
				require.Contains(t, probs[0].Message, "configmap default/shared for SyncTarget inv1/edge1 is placed from EdgePlacement wds1/p")
			},
		},
		{
			name: "two WDSes, sources changing: the copy stays the holder's",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "shared", map[string]any{"v": "one"}))
				f.place("wds1", "p", 1, cmClause("shared"))
			},
			between: func(f *fakeMailbox) {
				// A placement older than the holder's comes: the holder keeps it.
				f.put(cmGVR, "wds0", configMap("default", "shared", map[string]any{"v": "zero"}))
				f.place("wds0", "p", 0, cmClause("shared"))
				f.put(cmGVR, "wds1", configMap("default", "shared", map[string]any{"v": "one-1"}))
			},
			wantCalls: []string{"recordProblems 2", "update configmaps default/shared"},
			check: func(t *testing.T, f *fakeMailbox) {
				cp := f.get(cmGVR, f.mailbox(), "default", "shared")
				require.Equal(t, "one-1", cp.Object["data"].(map[string]any)["v"])
				require.Equal(t, edgev2alpha1.ConflictReasonOtherSpace, f.problems[spaces.Key("wds0", "", "p")][0].Reason)
			},
		},
		{
			name: "a write fails: the reconcile stops there and says what failed",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "a", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("default", "b", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("a", "b"))
				f.failWrite["configmaps default/a"] = apierrors.NewForbidden(cmGVR.GroupResource(), "a", errors.New("no"))
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default", "create configmaps default/a"},
			wantErr:   "writing configmaps default/a: configmaps \"a\" is forbidden: no",
		},
		{
			// Under a burst of new SyncTargets the server's cache of Spaces
			// lags: the mailbox the mailbox controller just made is
			// refused as unknown. That is no failure to log.
			name: "the mailbox space is not served yet: looked at again, without an error",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "a", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("a"))
				f.failWrite["namespaces default"] = fmt.Errorf("wrapped: %w", apierrors.NewNotFound(tenancyv1alpha1.Resource("spaces"), f.mailbox()))
			},
			wantCalls:   []string{"recordProblems 1", "create namespaces default"},
			wantRequeue: true,
		},
		{
			name: "another space not found: an error",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "a", map[string]any{"a": "1"}))
				f.put(cmGVR, "wds1", configMap("default", "b", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("a", "b"))
				f.failWrite["namespaces default"] = apierrors.NewNotFound(tenancyv1alpha1.Resource("spaces"), "wds1")
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default"},
			wantErr:   "writing namespaces default: spaces.tenancy.kubestellar.io \"wds1\" not found",
		},
		{
			name: "a resource of the mailbox's name not found: an error",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "a", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("a"))
				f.failWrite["namespaces default"] = apierrors.NewNotFound(cmGVR.GroupResource(), f.mailbox())
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default"},
			wantErr:   "writing namespaces default: configmaps \"" + spaces.MailboxName(inv, string(stUID)) + "\" not found",
		},
		{
			// The SyncerConfig made a moment ago, with other resources, is
			// not in the cache yet: the reconcile retries, so that the
			// retry compares the spec, rather than leave the old one.
			name: "the SyncerConfig exists but the cache does not show it yet: retried",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between: func(f *fakeMailbox) {
				delete(f.syncerConfigs, f.mailbox())
				f.failWrite["createSyncerConfig"] = apierrors.NewAlreadyExists(schema.GroupResource{Group: edgev2alpha1.SchemeGroupVersion.Group, Resource: "syncerconfigs"}, edgev2alpha1.SyncerConfigName)
			},
			wantCalls: []string{"recordProblems 1", "createSyncerConfig"},
			wantErr:   "creating the SyncerConfig: syncerconfigs.edge.kubestellar.io \"the-one\" already exists",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.setup(f)
			if tc.between != nil {
				_, requeue, err := f.run(t)
				require.NoError(t, err)
				require.False(t, requeue)
				tc.between(f)
			}
			calls, requeue, err := f.run(t)
			require.Equal(t, tc.wantCalls, calls)
			require.Equal(t, tc.wantRequeue, requeue)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
			// The mailbox is read through the destination index, never by
			// listing every slice.
			if len(f.slicesAsked) > 0 {
				require.Equal(t, inv+"/"+stName, f.slicesAsked[len(f.slicesAsked)-1])
			}
			// Once done, a reconcile of the same world writes nothing.
			if err == nil && !requeue {
				calls, _, _ := f.run(t)
				for _, c := range calls {
					require.True(t, strings.HasPrefix(c, "recordProblems"), "a second reconcile wrote: %v", calls)
				}
			}
		})
	}
}

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
	require.Equal(t, []problem{{edgev2alpha1.MailboxLimitReason,
		`the mailboxes of inventory space "inv1" hold what its limit allows (10, set by SpaceQuota "q" spec.limits.mailboxObjects): copies past it are not placed`}},
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

func TestSourcesOrder(t *testing.T) {
	f := newFake()
	f.place("wds2", "b", 5)
	f.place("wds1", "z", 5)
	f.place("wds1", "a", 5)
	f.place("wds9", "old", 1)
	f.place("wds3", "gone", 0)
	delete(f.placements, spaces.Key("wds3", "", "gone")) // a slice whose placement is gone
	r := f.reconciler()
	st, _, ok := r.target(spaces.Key(inv, "", stName))
	require.True(t, ok)
	var got []string
	for _, p := range r.sources(context.Background(), st) {
		got = append(got, p.String())
		require.Equal(t, "loc1", p.dest.location.GetName())
		require.Equal(t, stName, p.dest.syncTarget.GetName())
	}
	require.Equal(t, []string{"wds9/old", "wds1/a", "wds1/z", "wds2/b"}, got)
}

// TestSourcesOutsideTheWDSInventories: a slice naming a SyncTarget of an
// inventory space its WDS does not name (forged: the scheduler writes
// none) places nothing there, whoever wrote it.
func TestSourcesOutsideTheWDSInventories(t *testing.T) {
	f := newFake()
	f.place("wds1", "mine", 5)
	f.place("wds2", "forged", 5)
	f.outside = map[string]bool{"wds2": true}
	r := f.reconciler()
	st, _, ok := r.target(spaces.Key(inv, "", stName))
	require.True(t, ok)
	var got []string
	for _, p := range r.sources(context.Background(), st) {
		got = append(got, p.String())
	}
	require.Equal(t, []string{"wds1/mine"}, got)
}

func TestAddImpliedNamespaces(t *testing.T) {
	desired := map[string]*desiredCopy{}
	for _, c := range [][2]string{{"configmaps", "a/x"}, {"configmaps", "a/y"}, {"configmaps", "b/x"}, {"namespaces", "/b"}, {"clusterroles", "/r"}} {
		ns, name, _ := strings.Cut(c[1], "/")
		res := configmaps
		switch c[0] {
		case "namespaces":
			res = namespaceResource
		case "clusterroles":
			res = resource{GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}}
		}
		k, d := copyOf(res, ns, name)
		desired[k] = d
	}
	placedB := desired[copyKey(namespaceResource.GroupVersionResource, "", "b")]
	addImpliedNamespaces(desired)
	require.Len(t, desired, 6)
	a := desired[copyKey(namespaceResource.GroupVersionResource, "", "a")]
	require.NotNil(t, a)
	require.True(t, a.implied)
	require.Equal(t, "Namespace", a.obj.GetKind())
	require.Same(t, placedB, desired[copyKey(namespaceResource.GroupVersionResource, "", "b")], "a placed namespace stays as placed")
}

func TestSourceChanged(t *testing.T) {
	base := configMap("default", "cm", map[string]any{"a": "1"})
	base.SetResourceVersion("1")
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		want   bool
	}{
		{name: "a resync", change: func(*unstructured.Unstructured) {}, want: false},
		{name: "status alone", change: func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"ready": true}
			u.SetResourceVersion("2")
			u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubestellar-status"}})
		}, want: false},
		{name: "data", change: func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"a": "2"} }, want: true},
		{name: "a label (selectors read them)", change: func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"x": "y"}) }, want: true},
		{name: "an annotation (the Customizer is named there)", change: func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{edgev2alpha1.CustomizerAnnotation: "c"})
		}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.change(changed)
			require.Equal(t, tc.want, sourceChanged(base, changed))
		})
	}
}

// TestContentChanged: an update of a copy counts when it changes more
// than the copy's status, resource version, generation and associated
// state; the shared cache's handlers get a copy in a mailbox as its record
// (crossspace.Copy), and the records give the same answers as the objects.
func TestContentChanged(t *testing.T) {
	base := configMap("default", "cm", map[string]any{"a": "1"})
	base.SetResourceVersion("1")
	base.SetUID("4f9d1c3e-0d36-4a53-9f1b-6a1d2f0e7c11")
	base.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
	base.SetAnnotations(map[string]string{spaces.Annotation: "mb1", edgev2alpha1.SourceSpaceAnnotation: "wds1",
		edgev2alpha1.PlacementsAnnotation: "p1"})
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		want   bool
	}{
		{name: "a resync", change: func(*unstructured.Unstructured) {}, want: false},
		{name: "status, resource version and generation", change: func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"ready": true}
			u.SetResourceVersion("2")
			u.SetGeneration(3)
		}, want: false},
		{name: "the associated state the syncer reports", change: func(u *unstructured.Unstructured) {
			setAnnotation(u, edgev2alpha1.AssociatedStateAnnotation, `{"pods":1}`)
		}, want: false},
		{name: "the placements it is for", change: func(u *unstructured.Unstructured) {
			setAnnotation(u, edgev2alpha1.PlacementsAnnotation, "p1,p2")
		}, want: true},
		{name: "a kubestellar label", change: func(u *unstructured.Unstructured) {
			labels := u.GetLabels()
			labels[edgev2alpha1.UpsyncedLabel] = "true"
			u.SetLabels(labels)
		}, want: true},
		{name: "its deletion", change: func(u *unstructured.Unstructured) {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}, want: true},
		{name: "a new object of the same name", change: func(u *unstructured.Unstructured) {
			u.SetUID("0b6f3c2a-7e1d-4b9a-8c5f-2d4e6a8b0c13")
		}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := base.DeepCopy()
			setAnnotation(old, edgev2alpha1.AssociatedStateAnnotation, `{"pods":0}`)
			changed := old.DeepCopy()
			tc.change(changed)
			require.Equal(t, tc.want, contentChanged(old, changed), "the objects")
			require.Equal(t, tc.want, contentChanged(crossspace.Record(old), crossspace.Record(changed)), "their records")
		})
	}
}

func setAnnotation(u *unstructured.Unstructured, key, value string) {
	annotations := u.GetAnnotations()
	annotations[key] = value
	u.SetAnnotations(annotations)
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
