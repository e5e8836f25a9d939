// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
	"fmt"
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
	"k8s.io/client-go/util/workqueue"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

var (
	secretsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	pvcsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	statefulSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	widgetsGVR      = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// item is an edge object for the tables: mine marks it with the syncer's
// owner label; owners are the UIDs (and kinds) of its owner references.
func item(gvr schema.GroupVersionResource, name string, mine bool, owners ...metav1.OwnerReference) edgeItem {
	m := metav1.ObjectMeta{Name: name, Namespace: "data", UID: types.UID(gvr.Resource + "/" + name), OwnerReferences: owners}
	if mine {
		m.Labels = map[string]string{edgev2alpha1.SyncerOwnerLabel: "edge1"}
	}
	return edgeItem{GVR: gvr, Meta: m}
}

func ownerRef(apiVersion, kind string, gvr schema.GroupVersionResource, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(gvr.Resource + "/" + name)}
}

func withLabel(it edgeItem, k, v string) edgeItem {
	if it.Meta.Labels == nil {
		it.Meta.Labels = map[string]string{}
	}
	it.Meta.Labels[k] = v
	return it
}

func terminating(it edgeItem) edgeItem {
	now := metav1.Now()
	it.Meta.DeletionTimestamp = &now
	return it
}

var testScope = map[schema.GroupKind]bool{
	{Kind: "ConfigMap"}: true, {Kind: "Secret"}: true, {Kind: "Service"}: true, {Kind: "Node"}: false,
	{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "ReplicaSet"}: true, {Group: "apps", Kind: "StatefulSet"}: true,
}

func TestHolders(t *testing.T) {
	deploy := item(deploymentsGVR, "web", true)
	rs := item(replicaSetsGVR, "web-1", false, ownerRef("apps/v1", "Deployment", deploymentsGVR, "web"))
	pod := item(podsGVR, "web-1-a", false, ownerRef("apps/v1", "ReplicaSet", replicaSetsGVR, "web-1"))
	sts := item(statefulSetsGVR, "db", true)
	for _, tc := range []struct {
		name  string
		items []edgeItem
		scope map[schema.GroupKind]bool // nil: the instances of a CRD
		want  []string
	}{
		{name: "only what the syncer made, and what every namespace has", scope: testScope, items: []edgeItem{
			item(configMapsGVR, "settings", true), item(configMapsGVR, rootCAConfigMap, false), item(serviceAccountsGVR, defaultServiceAccount, false),
		}},
		{name: "a Secret made at the edge", scope: testScope, want: []string{"secrets/edge-made"}, items: []edgeItem{
			item(configMapsGVR, "settings", true), item(secretsGVR, "edge-made", false),
		}},
		{name: "a PVC a placed StatefulSet keeps (retention Retain: no owner)", scope: testScope, want: []string{"persistentvolumeclaims/data-db-0"}, items: []edgeItem{
			sts, item(pvcsGVR, "data-db-0", false),
		}},
		{name: "a PVC a placed StatefulSet deletes with it (retention Delete: owned)", scope: testScope, items: []edgeItem{
			sts, item(pvcsGVR, "data-db-0", false, ownerRef("apps/v1", "StatefulSet", statefulSetsGVR, "db")),
		}},
		{name: "the ReplicaSets and pods of a placed Deployment", scope: testScope, items: []edgeItem{deploy, rs, pod}},
		{name: "the ReplicaSet and pod of a Deployment already deleted: the garbage collector removes them", scope: testScope, items: []edgeItem{rs, pod}},
		{name: "an owner gone is not presumed gone among a CRD's instances", want: []string{"replicasets.apps/web-1"}, items: []edgeItem{rs}},
		{name: "owned by a cluster-scoped object", scope: testScope, want: []string{"configmaps/per-node"}, items: []edgeItem{
			item(configMapsGVR, "per-node", false, ownerRef("v1", "Node", schema.GroupVersionResource{Resource: "nodes"}, "n1")),
		}},
		{name: "owned by a kind the edge does not serve", scope: testScope, want: []string{"configmaps/odd"}, items: []edgeItem{
			item(configMapsGVR, "odd", false, ownerRef("example.com/v1", "Gadget", widgetsGVR, "g")),
		}},
		{name: "owned by something made at the edge", scope: testScope, want: []string{"configmaps/child", "secrets/parent"}, items: []edgeItem{
			item(secretsGVR, "parent", false), item(configMapsGVR, "child", false, ownerRef("v1", "Secret", secretsGVR, "parent")),
		}},
		{name: "owned both by what the syncer made and by something else", scope: testScope, want: []string{"configmaps/both", "secrets/parent"}, items: []edgeItem{
			deploy, item(secretsGVR, "parent", false),
			item(configMapsGVR, "both", false, ownerRef("apps/v1", "Deployment", deploymentsGVR, "web"), ownerRef("v1", "Secret", secretsGVR, "parent")),
		}},
		{name: "an ownership cycle", scope: testScope, want: []string{"configmaps/a", "configmaps/b"}, items: []edgeItem{
			item(configMapsGVR, "a", false, ownerRef("v1", "ConfigMap", configMapsGVR, "b")),
			item(configMapsGVR, "b", false, ownerRef("v1", "ConfigMap", configMapsGVR, "a")),
		}},
		{name: "being deleted already", scope: testScope, items: []edgeItem{terminating(item(secretsGVR, "old", false))}},
		{name: "made by another syncer", scope: testScope, want: []string{"secrets/theirs"}, items: []edgeItem{
			withLabel(item(secretsGVR, "theirs", false), edgev2alpha1.SyncerOwnerLabel, "edge2"),
		}},
		{name: "the controller's Endpoints of a placed Service, and of one gone", scope: testScope, items: []edgeItem{
			item(servicesGVR, "web", true),
			withLabel(item(endpointsGVR, "web", false), endpointsManagedByLabel, endpointsController),
			withLabel(item(endpointsGVR, "gone", false), endpointsManagedByLabel, endpointsController),
		}},
		{name: "Endpoints of a Service made at the edge, and Endpoints made by hand", scope: testScope,
			want: []string{"endpoints/external", "endpoints/theirs", "services/theirs"}, items: []edgeItem{
				item(servicesGVR, "theirs", false),
				withLabel(item(endpointsGVR, "theirs", false), endpointsManagedByLabel, endpointsController),
				item(endpointsGVR, "external", false),
			}},
		{name: "a CRD's instances: the syncer's and one made at the edge", want: []string{"widgets.example.com/w2"}, items: []edgeItem{
			item(widgetsGVR, "w1", true), item(widgetsGVR, "w2", false),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, it := range holders(tc.items, "edge1", tc.scope) {
				got = append(got, it.GVR.GroupResource().String()+"/"+it.Meta.Name)
			}
			require.ElementsMatch(t, tc.want, got)
		})
	}
}

// recordingQueue records when keys are to be looked at again.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[objKey]
	after map[objKey]time.Duration
}

func (q *recordingQueue) AddAfter(key objKey, d time.Duration) { q.after[key] = d }

// removalFixture is a syncer with a fake edge (a namespace "data" and a
// CRD "widgets.example.com", both made by it), a clock and stub contents.
type removalFixture struct {
	s        *Syncer
	edge     *dynamicfake.FakeDynamicClient
	queue    *recordingQueue
	clock    time.Time
	contents map[string][]edgeItem // by namespace ("" for every namespace)
	listErr  error
}

func newRemovalFixture(t *testing.T) *removalFixture {
	f := &removalFixture{clock: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), contents: map[string][]edgeItem{}}
	nsCopy := &unstructured.Unstructured{}
	nsCopy.SetAPIVersion("v1")
	nsCopy.SetKind("Namespace")
	nsCopy.SetName("data")
	ns, err := edgeObject(nsCopy, namespacesGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	crdCopy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{"group": "example.com", "names": map[string]any{"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": false}, map[string]any{"name": "v1", "served": true, "storage": true}}},
	}}
	crd, err := edgeObject(crdCopy, crdsGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	var edgeObjs []runtime.Object
	records := map[objKey]*applied{}
	for _, d := range []*desired{ns, crd} {
		o := d.Object.DeepCopy()
		o.SetUID(types.UID("uid-" + d.Key.Name))
		o.SetResourceVersion("7")
		edgeObjs = append(edgeObjs, o)
		// Made by this syncer, in this run.
		records[d.Key] = &applied{Hash: d.Hash, UID: o.GetUID(), Fields: ownFields(o)}
	}
	f.edge = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{namespacesGVR: "NamespaceList", crdsGVR: "CustomResourceDefinitionList"}, edgeObjs...)
	f.queue = &recordingQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objKey]()),
		after: map[objKey]time.Duration{}}
	t.Cleanup(f.queue.ShutDown)
	f.s = &Syncer{
		edge: f.edge, owner: "edge1", live: true, downQ: f.queue, reportQ: f.queue,
		desired: map[objKey]*desired{ns.Key: ns, crd.Key: crd}, inStep: map[objKey]bool{}, problems: map[objKey]problem{},
		applied:  records,
		edgeObjs: map[schema.GroupVersionResource]*running{}, workloadUID: map[string]objKey{},
		removing: map[objKey]time.Time{}, now: func() time.Time { return f.clock },
		removalGrace: removalGrace, keptRecheck: keptRecheck,
		contents: edgeContents{
			resources: func(context.Context) ([]servedResource, error) {
				return []servedResource{
					{GVR: configMapsGVR, Kind: "ConfigMap", Namespaced: true, Listable: true},
					{GVR: secretsGVR, Kind: "Secret", Namespaced: true, Listable: true},
					{GVR: pvcsGVR, Kind: "PersistentVolumeClaim", Namespaced: true, Listable: true},
					{GVR: schema.GroupVersionResource{Version: "v1", Resource: "events"}, Kind: "Event", Namespaced: true, Listable: true},
					{GVR: namespacesGVR, Kind: "Namespace", Listable: true},
				}, nil
			},
			list: func(_ context.Context, gvr schema.GroupVersionResource, namespace string) ([]metav1.ObjectMeta, error) {
				if f.listErr != nil {
					return nil, f.listErr
				}
				require.NotEqual(t, "events", gvr.Resource, "events are not looked into")
				var out []metav1.ObjectMeta
				for _, it := range f.contents[namespace] {
					if it.GVR == gvr {
						out = append(out, it.Meta)
					}
				}
				return out, nil
			},
		},
	}
	return f
}

var (
	dataNS     = objKey{GVR: namespacesGVR, Name: "data"}
	widgetsCRD = objKey{GVR: crdsGVR, Name: "widgets.example.com"}
)

// unplace removes key from the mailbox, as the copy informer does.
func (f *removalFixture) unplace(key objKey) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.removeDesiredLocked(key)
}

func (f *removalFixture) reconcile(t *testing.T, key objKey) error {
	t.Helper()
	requeue, err := f.s.reconcileDownsync(context.Background(), key)
	require.False(t, requeue)
	return err
}

// effects are the writes made at the edge, in order.
func (f *removalFixture) effects() []string {
	var out []string
	for _, a := range f.edge.Actions() {
		switch a := a.(type) {
		case clienttesting.DeleteActionImpl:
			p := a.DeleteOptions.Preconditions
			out = append(out, fmt.Sprintf("delete %s %s uid=%s rv=%s", a.Resource.Resource, a.Name, *p.UID, *p.ResourceVersion))
		case clienttesting.GetAction, clienttesting.ListAction, clienttesting.WatchAction:
		default:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func (f *removalFixture) problem(key objKey) (problem, bool) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	p, ok := f.s.problems[key]
	return p, ok
}

func TestRemovalOfANamespace(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contents    []edgeItem
		listErr     error
		wantEffects []string
		wantProblem string // part of the KeptInUse message; "" for none
		wantErr     string
	}{
		{name: "only what the syncer made: deleted, if unchanged since read",
			contents:    []edgeItem{item(configMapsGVR, "settings", true), item(serviceAccountsGVR, defaultServiceAccount, false), item(configMapsGVR, rootCAConfigMap, false)},
			wantEffects: []string{"delete namespaces data uid=uid-data rv=7"}},
		{name: "a Secret made at the edge: kept and reported",
			contents:    []edgeItem{item(secretsGVR, "edge-made", false)},
			wantProblem: "namespace data left the mailbox but holds objects that this syncer did not make (secrets/edge-made)"},
		{name: "a PVC: kept and reported",
			contents:    []edgeItem{item(pvcsGVR, "data-db-0", false), item(configMapsGVR, "settings", true)},
			wantProblem: "(persistentvolumeclaims/data-db-0)"},
		{name: "what it holds cannot be read: kept and reported, and retried",
			listErr:     apierrors.NewForbidden(secretsGVR.GroupResource(), "", errors.New("no")),
			wantProblem: "until the syncer can tell that it holds nothing the syncer did not make", wantErr: "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRemovalFixture(t)
			f.contents["data"], f.listErr = tc.contents, tc.listErr
			f.unplace(dataNS)
			require.NoError(t, f.reconcile(t, dataNS))
			require.Empty(t, f.effects(), "nothing is deleted within the grace period")
			require.Equal(t, removalGrace, f.queue.after[dataNS], "looked at again when it ends")

			f.clock = f.clock.Add(removalGrace)
			err := f.reconcile(t, dataNS)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantEffects, f.effects())
			p, has := f.problem(dataNS)
			if tc.wantProblem == "" {
				require.False(t, has, "no problem reported: %v", p)
				return
			}
			require.True(t, has)
			require.Equal(t, edgev2alpha1.SyncReasonKeptInUse, p.Reason)
			require.Contains(t, p.Message, tc.wantProblem)
			if tc.wantErr == "" {
				require.Equal(t, keptRecheck, f.queue.after[dataNS], "looked at again later")
				// Once what held it is gone, it goes; the report with it.
				f.contents["data"] = nil
				f.clock = f.clock.Add(keptRecheck)
				require.NoError(t, f.reconcile(t, dataNS))
				require.Equal(t, []string{"delete namespaces data uid=uid-data rv=7"}, f.effects())
				_, has = f.problem(dataNS)
				require.False(t, has, "the report goes with it")
			}
		})
	}
}

// A namespace whose placed objects briefly went to zero is neither deleted
// nor made again.
func TestRemovalBrieflyZero(t *testing.T) {
	f := newRemovalFixture(t)
	f.s.mu.Lock()
	back := f.s.desired[dataNS]
	f.s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	f.unplace(dataNS)
	require.NoError(t, f.reconcile(t, dataNS))
	// Back 10 s later, and processed: in step, as it was.
	f.clock = f.clock.Add(10 * time.Second)
	f.s.mu.Lock()
	f.s.setDesiredLocked(back)
	f.s.mu.Unlock()
	_, err := f.s.reconcileDownsync(ctx, dataNS)
	require.NoError(t, err)
	// Gone again 10 s later, back and gone again before the worker saw it.
	f.clock = f.clock.Add(10 * time.Second)
	f.unplace(dataNS)
	f.clock = f.clock.Add(5 * time.Second)
	f.s.mu.Lock()
	f.s.setDesiredLocked(back)
	f.s.removeDesiredLocked(dataNS)
	f.s.mu.Unlock()
	// The first grace period is over; the last one is not.
	f.clock = f.clock.Add(10 * time.Second)
	require.NoError(t, f.reconcile(t, dataNS))
	require.Empty(t, f.effects(), "neither deleted nor made again")
	require.Equal(t, 20*time.Second, f.queue.after[dataNS])
	// Still out of the mailbox when its last grace period ends: it goes.
	f.clock = f.clock.Add(20 * time.Second)
	require.NoError(t, f.reconcile(t, dataNS))
	require.Equal(t, []string{"delete namespaces data uid=uid-data rv=7"}, f.effects())
}

func TestRemovalWaitsForWhatTheMailboxStillHolds(t *testing.T) {
	f := newRemovalFixture(t)
	cm := objKey{GVR: configMapsGVR, Namespace: "data", Name: "settings"}
	f.s.desired[cm] = &desired{Key: cm}
	f.unplace(dataNS)
	f.clock = f.clock.Add(removalGrace)
	require.NoError(t, f.reconcile(t, dataNS))
	require.Empty(t, f.effects())
	require.Equal(t, removalGrace, f.queue.after[dataNS])
	_, has := f.problem(dataNS)
	require.False(t, has)
}

func TestRemovalOfANamespaceAdoptedAtTheEdge(t *testing.T) {
	f := newRemovalFixture(t)
	f.contents["data"] = []edgeItem{item(secretsGVR, "edge-made", false)}
	f.unplace(dataNS)
	f.clock = f.clock.Add(removalGrace)
	require.NoError(t, f.reconcile(t, dataNS))
	_, has := f.problem(dataNS)
	require.True(t, has)
	// The edge's admin takes it over: the syncer lets it be, and says nothing more.
	ns, err := f.edge.Resource(namespacesGVR).Get(context.Background(), "data", metav1.GetOptions{})
	require.NoError(t, err)
	ns.SetLabels(nil)
	_, err = f.edge.Resource(namespacesGVR).Update(context.Background(), ns, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.edge.ClearActions()
	f.clock = f.clock.Add(keptRecheck)
	require.NoError(t, f.reconcile(t, dataNS))
	require.Empty(t, f.effects())
	_, has = f.problem(dataNS)
	require.False(t, has)
}

func TestRemovalOfACRD(t *testing.T) {
	f := newRemovalFixture(t)
	f.contents[""] = []edgeItem{item(widgetsGVR, "w1", true), withNamespace(item(widgetsGVR, "w2", false), "other")}
	f.unplace(widgetsCRD)
	f.clock = f.clock.Add(removalGrace)
	require.NoError(t, f.reconcile(t, widgetsCRD))
	require.Empty(t, f.effects(), "a CRD with instances the syncer did not make stays")
	p, has := f.problem(widgetsCRD)
	require.True(t, has)
	require.Equal(t, edgev2alpha1.SyncReasonKeptInUse, p.Reason)
	require.Contains(t, p.Message, "CRD widgets.example.com left the mailbox but has instances that this syncer did not make (other/w2)")

	f.contents[""] = f.contents[""][:1]
	f.clock = f.clock.Add(keptRecheck)
	require.NoError(t, f.reconcile(t, widgetsCRD))
	require.Equal(t, []string{"delete customresourcedefinitions widgets.example.com uid=uid-widgets.example.com rv=7"}, f.effects(),
		"with only the syncer's instances, it goes")
}

func withNamespace(it edgeItem, ns string) edgeItem {
	it.Meta.Namespace = ns
	return it
}

// A namespace deleted in the mailbox stays there, Terminating, until the
// server has emptied it: the syncer counts it as gone from the mailbox
// from then on (its grace period starts), not once the server is done.
// An event from a copy cache that has stopped changes nothing.
func TestTerminatingCopyHasLeftTheMailbox(t *testing.T) {
	f := newRemovalFixture(t)
	f.s.copies = map[schema.GroupVersionResource]*running{namespacesGVR: {}}
	nsCopy := &unstructured.Unstructured{}
	nsCopy.SetAPIVersion("v1")
	nsCopy.SetKind("Namespace")
	nsCopy.SetName("data")

	deleted := nsCopy.DeepCopy()
	now := metav1.NewTime(f.clock)
	deleted.SetDeletionTimestamp(&now)
	f.s.onCopy(namespacesGVR, deleted)
	f.s.mu.Lock()
	_, wanted := f.s.desired[dataNS]
	left, removing := f.s.removing[dataNS]
	f.s.mu.Unlock()
	require.False(t, wanted, "a Terminating copy is not desired")
	require.True(t, removing, "its grace period has started")
	require.Equal(t, f.clock, left)
	require.NoError(t, f.reconcile(t, dataNS))
	require.Equal(t, removalGrace, f.queue.after[dataNS], "looked at again when the grace period ends")
	require.Empty(t, f.effects(), "nothing deleted at the edge during the grace period")

	// The SyncerConfig no longer names namespaces: a late event of the
	// stopped cache does not bring the copy back.
	f.s.copies = map[schema.GroupVersionResource]*running{}
	f.s.onCopy(namespacesGVR, nsCopy)
	f.s.mu.Lock()
	_, wanted = f.s.desired[dataNS]
	f.s.mu.Unlock()
	require.False(t, wanted, "an event of a stopped cache is ignored")

	// A new copy (placed again) is desired again.
	f.s.copies = map[schema.GroupVersionResource]*running{namespacesGVR: {}}
	f.s.onCopy(namespacesGVR, nsCopy)
	f.s.mu.Lock()
	_, wanted = f.s.desired[dataNS]
	f.s.mu.Unlock()
	require.True(t, wanted, "placed again")
}
