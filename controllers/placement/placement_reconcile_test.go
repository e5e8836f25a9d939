// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	syncTargets map[string]*edgev2alpha1.SyncTarget // space|name
	slices      []*edgev2alpha1.SinglePlacementSlice
	placements  map[string]*edgev2alpha1.EdgePlacement // space|name
	locations   map[string]*edgev2alpha1.Location      // space|name
	customizers map[string]*edgev2alpha1.Customizer    // space|namespace/name
	served      []resource
	objects     map[schema.GroupVersionResource]map[string]*unstructured.Unstructured // space|namespace/name
	notSynced   map[schema.GroupVersionResource]bool
	// unmade are mailboxes whose space is not made yet.
	unmade        map[string]bool
	syncerConfigs map[string]*edgev2alpha1.SyncerConfig // mailbox
	// serverSyncerConfigs are the server's, where the cache's (syncerConfigs) is behind.
	serverSyncerConfigs map[string]*edgev2alpha1.SyncerConfig
	// failWrite fails a create or update of "resource namespace/name".
	failWrite map[string]error

	calls    []string
	problems map[string][]problem // the last recorded, by placement key
	// dependencies are the last recorded, by placement key.
	dependencies map[string][]edgev2alpha1.DependencyReference
	crds         []*apiextensionsv1.CustomResourceDefinition
	// perSpace stores CRDs per space (--crds-per-space), in objects, as
	// any other object: crds is not read then.
	perSpace bool
	// slicesAsked are the destinations slicesFor was asked about.
	slicesAsked []string
	// spaceReads counts the reads of every object of a resource in a
	// space; namespaceReads are the namespaces read one at a time.
	spaceReads     int
	namespaceReads []string
	rv             int
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
	// admitted are the Progressive placements (by key) whose rollout
	// admits edge1 to the revision it asks about; asked records the
	// revision last asked about, by placement key.
	admitted    map[string]bool
	revisionFor map[string]string
	// completed are the snapshots of the last completed revisions, by
	// placement key.
	completed map[string]*rolloutSnapshot
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
	// Its syncer has come; TestMailboxReconcileSequence's cases of a
	// SyncTarget without one clear the condition.
	st.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: metav1.ConditionTrue}}
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
	r := &mailboxReconciler{
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
		mailboxMade: func(name string) bool { return !f.unmade[name] },
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
		crdsIn: func(space string) []*apiextensionsv1.CustomResourceDefinition {
			var out []*apiextensionsv1.CustomResourceDefinition
			for _, crd := range f.crds {
				if spaces.BindingsOf(crd.Annotations).Has(space) {
					out = append(out, crd)
				}
			}
			return out
		},
		crdIn: func(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
			for _, crd := range f.crds {
				if crd.Name == name && spaces.BindingsOf(crd.Annotations).Has(space) {
					return crd, true
				}
			}
			return nil, false
		},
		resolve: func(_ string, _ *string, names []string) ([]resource, error) {
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
			f.spaceReads++
			var out []*unstructured.Unstructured
			for k, obj := range f.objects[gvr] {
				if strings.HasPrefix(k, space+"|") {
					out = append(out, obj)
				}
			}
			return out, true
		},
		objectsIn: func(gvr schema.GroupVersionResource, space, namespace string) ([]*unstructured.Unstructured, bool) {
			if f.notSynced[gvr] {
				return nil, false
			}
			f.namespaceReads = append(f.namespaceReads, namespace)
			var out []*unstructured.Unstructured
			for _, obj := range f.objects[gvr] {
				if indexed, _ := indexByWorkloadNamespace(obj); slices.Contains(indexed, spaces.Key(space, namespace, "")) {
					out = append(out, obj)
				}
			}
			return out, true
		},
		object: func(gvr schema.GroupVersionResource, space, namespace, name string) (*unstructured.Unstructured, bool, bool) {
			if f.notSynced[gvr] {
				return nil, false, false
			}
			obj := f.get(gvr, space, namespace, name)
			return obj, obj != nil, true
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
			if err := f.failWrite["updateSyncerConfig"]; err != nil {
				delete(f.failWrite, "updateSyncerConfig") // once
				return err
			}
			f.syncerConfigs[spaceOf(ctx)] = cfg.DeepCopy()
			return nil
		},
		getSyncerConfig: func(ctx context.Context) (*edgev2alpha1.SyncerConfig, error) {
			f.calls = append(f.calls, "getSyncerConfig")
			if cfg := f.serverSyncerConfigs[spaceOf(ctx)]; cfg != nil {
				delete(f.failWrite, "createSyncerConfig") // it exists
				return cfg.DeepCopy(), nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: edgev2alpha1.SchemeGroupVersion.Group, Resource: "syncerconfigs"}, edgev2alpha1.SyncerConfigName)
		},
		admits: func(placement, destination, revision string) bool {
			if f.revisionFor == nil {
				f.revisionFor = map[string]string{}
			}
			f.revisionFor[placement] = revision
			return destination == spaces.Key(inv, "", stName) && f.admitted[placement]
		},
		completed: func(_ context.Context, p source) (*rolloutSnapshot, error) {
			return f.completed[p.key()], nil
		},
		recordProblems: func(mailbox string, sel *selection) {
			f.calls = append(f.calls, fmt.Sprintf("recordProblems %d", len(sel.placements)))
			f.problems = map[string][]problem{}
			f.dependencies = map[string][]edgev2alpha1.DependencyReference{}
			for k := range sel.placements {
				if deps := sel.dependenciesOf(k); len(deps) > 0 {
					f.dependencies[k] = deps
				}
			}
			for k, p := range sel.problems {
				if len(p) > 0 {
					f.problems[k] = p
				}
			}
		},
	}
	if f.perSpace {
		r.perSpace = true
		r.crdsIn = func(space string) []*apiextensionsv1.CustomResourceDefinition {
			var out []*apiextensionsv1.CustomResourceDefinition
			for k, obj := range f.objects[crdGVR] {
				if strings.HasPrefix(k, space+"|") {
					out = append(out, typedCRD(obj))
				}
			}
			return out
		}
		r.crdIn = func(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
			if obj := f.get(crdGVR, space, "", name); obj != nil {
				return typedCRD(obj), true
			}
			return nil, false
		}
	}
	return r
}

// typedCRD is a CRD the fake stores as an object, as the server's cache
// of CRDs holds it.
func typedCRD(obj *unstructured.Unstructured) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, crd); err != nil {
		panic(err)
	}
	return crd
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
			name: "a SyncTarget that names its mailbox, whose space is not made yet",
			setup: func(f *fakeMailbox) {
				f.unmade = map[string]bool{f.mailbox(): true}
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
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
			name: "nothing placed and no syncer yet: no SyncerConfig",
			setup: func(f *fakeMailbox) {
				f.syncTargets[spaces.Key(inv, "", stName)].Status.Conditions = nil
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
			},
			wantCalls: []string{"recordProblems 0"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.NotContains(t, f.syncerConfigs, f.mailbox())
			},
		},
		{
			name: "nothing placed, and the syncer comes: an empty SyncerConfig, which its syncer waits for",
			setup: func(f *fakeMailbox) {
				f.syncTargets[spaces.Key(inv, "", stName)].Status.Conditions = nil
			},
			between: func(f *fakeMailbox) {
				f.syncTargets[spaces.Key(inv, "", stName)].Status.Conditions = []metav1.Condition{
					{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: metav1.ConditionFalse}}
			},
			wantCalls: []string{"recordProblems 0", "createSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.Equal(t, edgev2alpha1.SyncerConfigSpec{}, f.syncerConfigs[f.mailbox()].Spec)
			},
		},
		{
			name: "nothing placed, and a heartbeat without a tunnel's condition: an empty SyncerConfig",
			setup: func(f *fakeMailbox) {
				st := f.syncTargets[spaces.Key(inv, "", stName)]
				st.Status.Conditions = nil
				now := metav1.Now()
				st.Status.LastSyncerHeartbeatTime = &now
			},
			wantCalls: []string{"recordProblems 0", "createSyncerConfig"},
		},
		{
			name: "something placed before the syncer comes: the SyncerConfig with the copies",
			setup: func(f *fakeMailbox) {
				f.syncTargets[spaces.Key(inv, "", stName)].Status.Conditions = nil
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			wantCalls: []string{"recordProblems 1", "create namespaces default", "create configmaps default/cm", "createSyncerConfig"},
		},
		{
			name: "a SyncerConfig emptied keeps being written, syncer or not",
			setup: func(f *fakeMailbox) {
				f.syncTargets[spaces.Key(inv, "", stName)].Status.Conditions = nil
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between:   func(f *fakeMailbox) { f.placements = map[string]*edgev2alpha1.EdgePlacement{}; f.slices = nil },
			wantCalls: []string{"recordProblems 0", "delete configmaps default/cm", "delete namespaces default", "updateSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.Equal(t, edgev2alpha1.SyncerConfigSpec{}, f.syncerConfigs[f.mailbox()].Spec)
			},
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
				require.Equal(t, map[string][]problem{spaces.Key("wds1", "", "p"): {{Reason: "NotPermitted", Message: "configmaps in a may not be read"}}}, f.problems)
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
				require.Equal(t, map[string][]problem{spaces.Key("wds1", "", "p"): {{Reason: reasonAccessUnknown, Message: "configmaps in a: cannot ask"}}}, f.problems)
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
				require.Equal(t, []problem{{Reason: "UnknownResource", Message: "spec.downsync[1]: no resource gizmos is served"}}, f.problems[spaces.Key("wds1", "", "p")])
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
				require.Equal(t, []problem{{Reason: "CustomizerNotFound", Message: "configmap default/cm names Customizer default/nope, which does not exist"}},
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
			// not in the cache yet: it is read from the server and its
			// spec compared, rather than the old one left or the mailbox
			// failed.
			name: "the SyncerConfig exists but the cache does not show it yet: read again",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between: func(f *fakeMailbox) {
				old := f.syncerConfigs[f.mailbox()].DeepCopy()
				old.Spec.Namespaces = []string{"elsewhere"}
				f.serverSyncerConfigs = map[string]*edgev2alpha1.SyncerConfig{f.mailbox(): old}
				delete(f.syncerConfigs, f.mailbox())
				f.failWrite["createSyncerConfig"] = apierrors.NewAlreadyExists(schema.GroupResource{Group: edgev2alpha1.SchemeGroupVersion.Group, Resource: "syncerconfigs"}, edgev2alpha1.SyncerConfigName)
			},
			wantCalls: []string{"recordProblems 1", "createSyncerConfig", "getSyncerConfig", "updateSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.Equal(t, []string{"default"}, f.syncerConfigs[f.mailbox()].Spec.Namespaces)
			},
		},
		{
			name: "the SyncerConfig in the cache is behind: a conflict, read again",
			setup: func(f *fakeMailbox) {
				f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
				f.place("wds1", "p", 1, cmClause("cm"))
			},
			between: func(f *fakeMailbox) {
				f.serverSyncerConfigs = map[string]*edgev2alpha1.SyncerConfig{f.mailbox(): f.syncerConfigs[f.mailbox()].DeepCopy()}
				f.put(cmGVR, "wds1", configMap("other", "cm", map[string]any{"a": "1"}))
				f.failWrite["updateSyncerConfig"] = apierrors.NewConflict(schema.GroupResource{Group: edgev2alpha1.SchemeGroupVersion.Group, Resource: "syncerconfigs"}, edgev2alpha1.SyncerConfigName, errors.New("stale"))
			},
			wantCalls: []string{"recordProblems 1", "create namespaces other", "create configmaps other/cm", "updateSyncerConfig", "getSyncerConfig", "updateSyncerConfig"},
			check: func(t *testing.T, f *fakeMailbox) {
				require.Equal(t, []string{"default", "other"}, f.syncerConfigs[f.mailbox()].Spec.Namespaces)
			},
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

func TestGVROfKeyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name               string
		gvr                schema.GroupVersionResource
		namespace, objName string
	}{
		{name: "core namespaced", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, namespace: "ns", objName: "cm"},
		{name: "core cluster-scoped", gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, objName: "ns"},
		{name: "named group", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, namespace: "default", objName: "web"},
		{name: "dotted group, beta version", gvr: schema.GroupVersionResource{Group: "widgets.example.com", Version: "v1beta2", Resource: "widgets"},
			namespace: "a", objName: "w.with.dots"},
		{name: "cluster-scoped in a named group", gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
			objName: "system:aggregate-to-view"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := copyKey(tc.gvr, tc.namespace, tc.objName)
			require.Equal(t, tc.gvr, gvrOfKey(k))
		})
	}
}

func TestCopyKeysDiffer(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	keys := map[string]bool{
		copyKey(cm, "a", "x"):      true,
		copyKey(cm, "b", "x"):      true,
		copyKey(cm, "a", "y"):      true,
		copyKey(cm, "", "x"):       true,
		copyKey(secrets, "a", "x"): true,
		copyKey(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "configmaps"}, "a", "x"): true,
	}
	require.Len(t, keys, 6)
}
