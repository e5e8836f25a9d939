// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crdcontroller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

var crdsResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// spaceCRD is a CRD of space, as the server stores it: annotated with its
// space, with the cleanup finalizer, and a schema of one string field.
func spaceCRD(space, group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Annotations: map[string]string{spaces.Annotation: space},
			Finalizers: []string{apiextensionsv1.CustomResourceCleanupFinalizer}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.TrimSuffix(plural, "s"), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: withField("size", "string")}}},
	}
}

// withField is a structural schema of an object with one field in spec.
func withField(name, typ string) *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{name: {Type: typ}}}}}}
}

// statusEnv is a status controller over an informer the test feeds from
// one fake clientset per space, standing in for the server's datastore:
// each write gets the next resource version of one counter, a write from
// an older version is a conflict, a status write changes only the status
// and any other only the rest (as the CRD strategies do), and a CRD being
// deleted goes once its last finalizer does.
type statusEnv struct {
	t        *testing.T
	informer *fedInformer
	c        *StatusController
	purger   *spacePurger
	rv       atomic.Int64

	mu      sync.Mutex
	clients map[string]*fake.Clientset
	// asked are the spaces whose client the controller asked for.
	asked []string
	// everywhere are the root CRDs every space serves.
	everywhere []*apiextensionsv1.CustomResourceDefinition
	// prepared are the CRDs prepare was handed, by space; prepareErr is
	// its answer.
	prepared   map[string][]*apiextensionsv1.CustomResourceDefinition
	prepareErr error
}

// fedInformer is an informer of every space's CRDs, keyed by space, that
// the test feeds (statusEnv.sync) through the handler the controller adds.
type fedInformer struct {
	cache.SharedIndexInformer // nil: what the controller does not call
	indexer                   cache.Indexer
	handler                   cache.ResourceEventHandler
	synced                    atomic.Bool
}

func (f *fedInformer) GetIndexer() cache.Indexer { return f.indexer }
func (f *fedInformer) GetStore() cache.Store     { return f.indexer }
func (f *fedInformer) AddIndexers(indexers cache.Indexers) error {
	return f.indexer.AddIndexers(indexers)
}
func (f *fedInformer) HasSynced() bool { return f.synced.Load() }
func (f *fedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	return nil, nil
}

// spacePurger records the purges asked of it. deleted are the counts of
// successive purges (0 after the last); fail, when set, fails them.
type spacePurger struct {
	mu      sync.Mutex
	calls   []string
	deleted []int
	fail    error
}

func (p *spacePurger) PurgeResourceIn(_ context.Context, gr schema.GroupResource, space string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, space+" "+gr.String())
	if p.fail != nil {
		return 0, p.fail
	}
	if len(p.deleted) == 0 {
		return 0, nil
	}
	n := p.deleted[0]
	p.deleted = p.deleted[1:]
	return n, nil
}

func (p *spacePurger) purges() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func newStatusEnv(t *testing.T) *statusEnv {
	t.Helper()
	e := &statusEnv{t: t, purger: &spacePurger{}, clients: map[string]*fake.Clientset{},
		prepared: map[string][]*apiextensionsv1.CustomResourceDefinition{}}
	e.informer = &fedInformer{indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})}
	c, err := NewStatus(e.informer, e.client, e.purger, func() []*apiextensionsv1.CustomResourceDefinition {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.everywhere
	}, func(crd *apiextensionsv1.CustomResourceDefinition) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		space := crd.Annotations[spaces.Annotation]
		e.prepared[space] = append(e.prepared[space], crd)
		return e.prepareErr
	})
	require.NoError(t, err)
	require.NotNil(t, e.informer.handler)
	e.c = c
	return e
}

// client is the controller's client of one space's CRDs.
func (e *statusEnv) client(space string) (apiextensionsv1client.CustomResourceDefinitionInterface, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, space)
	return e.clientset(space).ApiextensionsV1().CustomResourceDefinitions(), nil
}

// clientset returns the space's fake clientset, made on first use; e.mu
// is held.
func (e *statusEnv) clientset(space string) *fake.Clientset {
	if c := e.clients[space]; c != nil {
		return c
	}
	c := fake.NewClientset()
	tracker := c.Tracker()
	c.PrependReactor("update", "customresourcedefinitions", func(action clienttesting.Action) (bool, runtime.Object, error) {
		in := action.(clienttesting.UpdateAction).GetObject().(*apiextensionsv1.CustomResourceDefinition)
		obj, err := tracker.Get(crdsResource, "", in.Name)
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*apiextensionsv1.CustomResourceDefinition)
		if in.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(apiextensionsv1.Resource("customresourcedefinitions"), in.Name, errors.New("the object has been modified"))
		}
		out := in.DeepCopy()
		if action.GetSubresource() == "status" {
			out = cur.DeepCopy()
			out.Status = *in.Status.DeepCopy()
		} else {
			out.Status = cur.Status
		}
		out.ResourceVersion = strconv.FormatInt(e.rv.Add(1), 10)
		if out.DeletionTimestamp != nil && len(out.Finalizers) == 0 {
			return true, out, tracker.Delete(crdsResource, "", in.Name)
		}
		return true, out, tracker.Update(crdsResource, out, "")
	})
	e.clients[space] = c
	return c
}

// create stores a CRD in its space.
func (e *statusEnv) create(crds ...*apiextensionsv1.CustomResourceDefinition) {
	e.t.Helper()
	for _, crd := range crds {
		crd = crd.DeepCopy()
		crd.ResourceVersion = strconv.FormatInt(e.rv.Add(1), 10)
		e.mu.Lock()
		c := e.clientset(crd.Annotations[spaces.Annotation])
		e.mu.Unlock()
		require.NoError(e.t, c.Tracker().Add(crd))
	}
}

// change changes a stored CRD as a user's write would.
func (e *statusEnv) change(space, name string, f func(*apiextensionsv1.CustomResourceDefinition)) {
	e.t.Helper()
	crd := e.crd(space, name).DeepCopy()
	f(crd)
	crd.ResourceVersion = strconv.FormatInt(e.rv.Add(1), 10)
	e.mu.Lock()
	c := e.clientset(space)
	e.mu.Unlock()
	require.NoError(e.t, c.Tracker().Update(crdsResource, crd, ""))
}

// delete deletes a stored CRD: it is marked, and goes with its finalizer.
func (e *statusEnv) delete(space, name string) {
	e.change(space, name, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	})
}

// stored returns the space's CRDs as stored, by name.
func (e *statusEnv) stored(space string) map[string]*apiextensionsv1.CustomResourceDefinition {
	e.t.Helper()
	e.mu.Lock()
	c := e.clientset(space)
	e.mu.Unlock()
	list, err := c.Tracker().List(crdsResource, apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"), "")
	require.NoError(e.t, err)
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for i := range list.(*apiextensionsv1.CustomResourceDefinitionList).Items {
		crd := &list.(*apiextensionsv1.CustomResourceDefinitionList).Items[i]
		out[crd.Name] = crd
	}
	return out
}

// crd returns a stored CRD; the test fails if there is none.
func (e *statusEnv) crd(space, name string) *apiextensionsv1.CustomResourceDefinition {
	e.t.Helper()
	crd := e.stored(space)[name]
	require.NotNil(e.t, crd, "%s in space %s", name, space)
	return crd
}

// sync brings the informer's cache to what is stored, through its
// handler, as a watch would: adds, updates and deletes.
func (e *statusEnv) sync() {
	e.t.Helper()
	e.mu.Lock()
	var all []string
	for space := range e.clients {
		all = append(all, space)
	}
	e.mu.Unlock()
	want := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, space := range all {
		for _, crd := range e.stored(space) {
			want[spaces.Key(space, "", crd.Name)] = crd
		}
	}
	store, h := e.informer.GetIndexer(), e.informer.handler
	for key, crd := range want {
		old, exists, err := store.GetByKey(key)
		require.NoError(e.t, err)
		switch {
		case !exists:
			require.NoError(e.t, store.Add(crd))
			h.OnAdd(crd, false)
		case old.(*apiextensionsv1.CustomResourceDefinition).ResourceVersion != crd.ResourceVersion:
			require.NoError(e.t, store.Update(crd))
			h.OnUpdate(old, crd)
		}
	}
	for _, key := range store.ListKeys() {
		if _, ok := want[key]; !ok {
			old, _, _ := store.GetByKey(key)
			require.NoError(e.t, store.Delete(old))
			h.OnDelete(old)
		}
	}
}

// settle feeds the informer and processes the queue, one key at a time,
// until nothing is left to do: a key that fails is not retried (errs has
// its error), one that asks to be looked at again is.
func (e *statusEnv) settle() (errs map[string]error) {
	e.t.Helper()
	errs = map[string]error{}
	for range 1000 {
		e.sync()
		if e.c.queue.Len() == 0 {
			return errs
		}
		key, _ := e.c.queue.Get()
		requeue, err := e.c.process(context.Background(), key)
		e.c.queue.Done(key)
		e.c.queue.Forget(key)
		if err != nil {
			errs[key] = err
		} else {
			delete(errs, key)
		}
		if requeue {
			e.c.queue.Add(key)
		}
	}
	e.t.Fatal("the controller did not settle")
	return nil
}

// updates counts the writes the controller made in a space.
func (e *statusEnv) updates(space string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	if c := e.clients[space]; c != nil {
		for _, a := range c.Actions() {
			if a.GetVerb() == "update" {
				n++
			}
		}
	}
	return n
}

func condition(crd *apiextensionsv1.CustomResourceDefinition, typ apiextensionsv1.CustomResourceDefinitionConditionType) apiextensionsv1.CustomResourceDefinitionCondition {
	if c := apiextensionshelpers.FindCRDCondition(crd, typ); c != nil {
		return *c
	}
	return apiextensionsv1.CustomResourceDefinitionCondition{}
}

// requireServed says a CRD's names are all accepted and it is Established.
func requireServed(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	require.Equal(t, crd.Spec.Names, crd.Status.AcceptedNames, crd.Name)
	namesAccepted, established := condition(crd, apiextensionsv1.NamesAccepted), condition(crd, apiextensionsv1.Established)
	require.Equal(t, apiextensionsv1.ConditionTrue, namesAccepted.Status, "%s: %s", crd.Name, namesAccepted.Message)
	require.Equal(t, apiextensionsv1.ConditionTrue, established.Status, "%s: %s", crd.Name, established.Message)
	require.Equal(t, "InitialNamesAccepted", established.Reason)
}

// TestStatusSameNameInTwoSpaces: two spaces' CRDs of one name and
// different schemas are each accepted and served, each prepared with its
// own schema; the root space's CRD of that name is upstream's and is
// neither read for them nor written.
func TestStatusSameNameInTwoSpaces(t *testing.T) {
	e := newStatusEnv(t)
	a := spaceCRD("team-a", "example.com", "widgets", "Widget")
	b := spaceCRD("team-b", "example.com", "widgets", "Widget")
	b.Spec.Versions[0].Schema = withField("color", "integer")
	root := spaceCRD(spaces.Root, "example.com", "widgets", "Widget")
	e.create(a, b, root)
	require.Empty(t, e.settle())

	requireServed(t, e.crd("team-a", "widgets.example.com"))
	requireServed(t, e.crd("team-b", "widgets.example.com"))
	require.Contains(t, e.prepared["team-a"][0].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "size")
	require.Contains(t, e.prepared["team-b"][0].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "color")
	require.Empty(t, e.crd(spaces.Root, "widgets.example.com").Status.Conditions, "the root space's CRD is upstream's")
	// Even asked to, the controller leaves it alone.
	requeue, err := e.c.process(context.Background(), spaces.Key(spaces.Root, "", "widgets.example.com"))
	require.NoError(t, err)
	require.False(t, requeue)
	require.Zero(t, e.updates(spaces.Root))
	require.NotContains(t, e.asked, spaces.Root)

	// Settled: nothing more to write.
	before := e.updates("team-a") + e.updates("team-b")
	for _, space := range []string{"team-a", "team-b"} {
		e.c.queue.Add(spaces.Key(space, "", "widgets.example.com"))
	}
	require.Empty(t, e.settle())
	require.Equal(t, before, e.updates("team-a")+e.updates("team-b"), "a status unchanged is not written again")
}

// TestStatusKindConflictWithinSpace: two CRDs of a space's group asking
// for one kind: one is given it, the other is refused it (KindConflict)
// and is not Established; the same two in two spaces are both accepted.
// Once the first is deleted, the second is given the kind.
func TestStatusKindConflictWithinSpace(t *testing.T) {
	e := newStatusEnv(t)
	gizmos := func(space string) *apiextensionsv1.CustomResourceDefinition {
		crd := spaceCRD(space, "example.com", "gizmos", "Widget")
		crd.Spec.Names.ListKind = "GizmoList"
		return crd
	}
	e.create(spaceCRD("team-a", "example.com", "widgets", "Widget"), gizmos("team-a"),
		spaceCRD("team-b", "example.com", "widgets", "Widget"), gizmos("team-c"))
	require.Empty(t, e.settle())

	requireServed(t, e.crd("team-b", "widgets.example.com"))
	requireServed(t, e.crd("team-c", "gizmos.example.com"))

	var winner, loser *apiextensionsv1.CustomResourceDefinition
	for _, crd := range e.stored("team-a") {
		if condition(crd, apiextensionsv1.NamesAccepted).Status == apiextensionsv1.ConditionTrue {
			require.Nil(t, winner, "two CRDs of team-a were given kind Widget")
			winner = crd
		} else {
			loser = crd
		}
	}
	require.NotNil(t, winner)
	require.NotNil(t, loser)
	requireServed(t, winner)
	refused := condition(loser, apiextensionsv1.NamesAccepted)
	require.Equal(t, apiextensionsv1.ConditionFalse, refused.Status)
	require.Equal(t, "KindConflict", refused.Reason)
	require.Contains(t, refused.Message, `"Widget" is already in use`)
	require.Empty(t, loser.Status.AcceptedNames.Kind)
	require.Equal(t, loser.Spec.Names.Plural, loser.Status.AcceptedNames.Plural, "the free names are accepted")
	require.Equal(t, apiextensionsv1.ConditionFalse, condition(loser, apiextensionsv1.Established).Status)

	e.delete("team-a", winner.Name)
	require.Empty(t, e.settle())
	require.NotContains(t, e.stored("team-a"), winner.Name)
	requireServed(t, e.crd("team-a", loser.Name))
}

// TestStatusEverywhereNamesTaken: the names of a CRD every space serves
// are taken in every space's group: a space's CRD asking for its kind is
// refused it, one of another group is not; a name it gives up is free.
func TestStatusEverywhereNamesTaken(t *testing.T) {
	e := newStatusEnv(t)
	placements := spaceCRD(spaces.Root, "edge.example.io", "placements", "Placement")
	placements.Status.AcceptedNames = placements.Spec.Names
	e.everywhere = []*apiextensionsv1.CustomResourceDefinition{placements}
	bindings := spaceCRD("team-a", "edge.example.io", "bindings", "Placement")
	bindings.Spec.Names.ListKind = "BindingList"
	e.create(placements, bindings, spaceCRD("team-a", "other.example.io", "placements", "Placement"))
	require.Empty(t, e.settle())

	refused := condition(e.crd("team-a", "bindings.edge.example.io"), apiextensionsv1.NamesAccepted)
	require.Equal(t, apiextensionsv1.ConditionFalse, refused.Status)
	require.Equal(t, "KindConflict", refused.Reason)
	require.Contains(t, refused.Message, `"Placement" is already in use`)
	requireServed(t, e.crd("team-a", "placements.other.example.io"))

	// The server's CRD changes kind: the root CRD's new names are seen
	// through its event, and the space's CRD of the group is judged again.
	e.change(spaces.Root, "placements.edge.example.io", func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Names.Kind, crd.Spec.Names.ListKind = "Placement2", "Placement2List"
		crd.Status.AcceptedNames = crd.Spec.Names
		e.mu.Lock()
		e.everywhere = []*apiextensionsv1.CustomResourceDefinition{crd}
		e.mu.Unlock()
	})
	require.Empty(t, e.settle())
	requireServed(t, e.crd("team-a", "bindings.edge.example.io"))
	require.Zero(t, e.updates(spaces.Root))
}

// TestStatusNonStructuralSchema: a schema that is not structural gets
// NonStructuralSchema, with the violations; fixed, it loses it.
func TestStatusNonStructuralSchema(t *testing.T) {
	e := newStatusEnv(t)
	crd := spaceCRD("team-a", "example.com", "widgets", "Widget")
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{} // no type
	e.create(crd)
	require.Empty(t, e.settle())
	cond := condition(e.crd("team-a", "widgets.example.com"), apiextensionsv1.NonStructuralSchema)
	require.Equal(t, apiextensionsv1.ConditionTrue, cond.Status)
	require.Equal(t, "Violations", cond.Reason)
	require.Contains(t, cond.Message, "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value")

	e.change("team-a", "widgets.example.com", func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions[0].Schema = withField("size", "string")
	})
	require.Empty(t, e.settle())
	fixed := e.crd("team-a", "widgets.example.com")
	require.Nil(t, apiextensionshelpers.FindCRDCondition(fixed, apiextensionsv1.NonStructuralSchema))
	requireServed(t, fixed)
}

// TestStatusAPIApproval: a CRD of a protected group gets the approval
// condition its annotation earns; other groups get none.
func TestStatusAPIApproval(t *testing.T) {
	e := newStatusEnv(t)
	approved := spaceCRD("team-a", "gateway.networking.k8s.io", "gateways", "Gateway")
	approved.Annotations[apiextensionsv1.KubeAPIApprovedAnnotation] = "https://github.com/kubernetes-sigs/gateway-api/pull/1538"
	e.create(spaceCRD("team-a", "widgets.k8s.io", "widgets", "Widget"), approved, spaceCRD("team-a", "example.com", "widgets", "Widget"))
	require.Empty(t, e.settle())

	missing := condition(e.crd("team-a", "widgets.widgets.k8s.io"), apiextensionsv1.KubernetesAPIApprovalPolicyConformant)
	require.Equal(t, apiextensionsv1.ConditionFalse, missing.Status)
	require.Equal(t, "MissingAnnotation", missing.Reason)
	require.Equal(t, "ApprovedAnnotation", condition(e.crd("team-a", "gateways.gateway.networking.k8s.io"), apiextensionsv1.KubernetesAPIApprovalPolicyConformant).Reason)
	require.Nil(t, apiextensionshelpers.FindCRDCondition(e.crd("team-a", "widgets.example.com"), apiextensionsv1.KubernetesAPIApprovalPolicyConformant))
}

// TestStatusDeletePurgesItsSpaceOnly: a CRD deleted in one space has that
// space's instances purged, until a purge finds none, and then loses its
// finalizer; the same CRD in another space is left alone. A CRD whose
// names were never accepted has no instances of its own to purge.
func TestStatusDeletePurgesItsSpaceOnly(t *testing.T) {
	e := newStatusEnv(t)
	e.create(spaceCRD("team-a", "example.com", "widgets", "Widget"), spaceCRD("team-b", "example.com", "widgets", "Widget"))
	require.Empty(t, e.settle())
	b := e.crd("team-b", "widgets.example.com")
	writesB := e.updates("team-b")

	e.purger.deleted = []int{3}
	e.delete("team-a", "widgets.example.com")
	require.Empty(t, e.settle())
	require.Equal(t, []string{"team-a widgets.example.com", "team-a widgets.example.com"}, e.purger.purges(), "purged until none is found")
	require.Empty(t, e.stored("team-a"), "the finalizer removed, the CRD is gone")
	require.Equal(t, b, e.crd("team-b", "widgets.example.com"))
	require.Equal(t, writesB, e.updates("team-b"))

	// Written on its way: Terminating, then its outcome.
	var reasons []string
	for _, a := range e.clients["team-a"].Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			if c := apiextensionshelpers.FindCRDCondition(u.GetObject().(*apiextensionsv1.CustomResourceDefinition), apiextensionsv1.Terminating); c != nil {
				reasons = append(reasons, string(c.Status)+" "+c.Reason)
			}
		}
	}
	require.Equal(t, []string{"True InstanceDeletionInProgress", "False InstanceDeletionCompleted"}, reasons)

	// A CRD that never held its resource in the space (one every space
	// serves has it): the space's instances are the other CRD's, and
	// stay.
	placements := spaceCRD(spaces.Root, "edge.example.io", "placements", "Placement")
	placements.Status.AcceptedNames = placements.Spec.Names
	e.everywhere = []*apiextensionsv1.CustomResourceDefinition{placements}
	e.create(spaceCRD("team-b", "edge.example.io", "placements", "Placement"))
	require.Empty(t, e.settle())
	require.Equal(t, apiextensionsv1.ConditionFalse, condition(e.crd("team-b", "placements.edge.example.io"), apiextensionsv1.NamesAccepted).Status)
	e.delete("team-b", "placements.edge.example.io")
	require.Empty(t, e.settle())
	require.NotContains(t, e.stored("team-b"), "placements.edge.example.io")
	require.Len(t, e.purger.purges(), 2, "no purge for a CRD that never held its resource")
}

// TestStatusPurgeFailure: a purge that fails is recorded on the CRD, which
// keeps its finalizer until a purge succeeds.
func TestStatusPurgeFailure(t *testing.T) {
	e := newStatusEnv(t)
	e.create(spaceCRD("team-a", "example.com", "widgets", "Widget"))
	require.Empty(t, e.settle())
	e.purger.fail = errors.New("datastore unavailable")
	e.delete("team-a", "widgets.example.com")
	errs := e.settle()
	require.ErrorContains(t, errs[spaces.Key("team-a", "", "widgets.example.com")], "datastore unavailable")
	crd := e.crd("team-a", "widgets.example.com")
	require.Contains(t, crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
	cond := condition(crd, apiextensionsv1.Terminating)
	require.Equal(t, apiextensionsv1.ConditionTrue, cond.Status)
	require.Equal(t, "InstanceDeletionFailed", cond.Reason)
	require.Contains(t, cond.Message, "datastore unavailable")

	e.purger.mu.Lock()
	e.purger.fail = nil
	e.purger.mu.Unlock()
	e.c.queue.Add(spaces.Key("team-a", "", "widgets.example.com"))
	require.Empty(t, e.settle())
	require.Empty(t, e.stored("team-a"))
}

// TestStatusPrepareError: a CRD whose serving cannot be prepared stays
// Installing, with the error, and is retried; then it is Established, and
// stays so whatever becomes of its names.
func TestStatusPrepareError(t *testing.T) {
	e := newStatusEnv(t)
	e.prepareErr = errors.New("no room for another handler")
	e.create(spaceCRD("team-a", "example.com", "widgets", "Widget"))
	errs := e.settle()
	key := spaces.Key("team-a", "", "widgets.example.com")
	require.ErrorContains(t, errs[key], "no room for another handler")
	crd := e.crd("team-a", "widgets.example.com")
	require.Equal(t, apiextensionsv1.ConditionTrue, condition(crd, apiextensionsv1.NamesAccepted).Status)
	established := condition(crd, apiextensionsv1.Established)
	require.Equal(t, apiextensionsv1.ConditionFalse, established.Status)
	require.Equal(t, "Installing", established.Reason)
	require.Contains(t, established.Message, "no room for another handler")

	e.mu.Lock()
	e.prepareErr = nil
	e.mu.Unlock()
	e.c.queue.Add(key)
	require.Empty(t, e.settle())
	requireServed(t, e.crd("team-a", "widgets.example.com"))
	since := condition(e.crd("team-a", "widgets.example.com"), apiextensionsv1.Established).LastTransitionTime

	// A kind another CRD of the space holds: refused, still served.
	e.create(spaceCRD("team-a", "example.com", "gadgets", "Gadget"))
	require.Empty(t, e.settle())
	e.change("team-a", "widgets.example.com", func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Names.Kind = "Gadget"
	})
	require.Empty(t, e.settle())
	crd = e.crd("team-a", "widgets.example.com")
	require.Equal(t, "KindConflict", condition(crd, apiextensionsv1.NamesAccepted).Reason)
	require.Equal(t, "Widget", crd.Status.AcceptedNames.Kind, "the kind it had")
	require.Equal(t, apiextensionsv1.ConditionTrue, condition(crd, apiextensionsv1.Established).Status)
	require.Equal(t, since, condition(crd, apiextensionsv1.Established).LastTransitionTime)
}

// TestStatusEvents: what each event queues: a space's CRD, with the
// others of its group in its space when names were taken or freed; for a
// root CRD, every space's CRDs of its group when its names change, and
// never the root CRD itself.
func TestStatusEvents(t *testing.T) {
	e := newStatusEnv(t)
	store, h := e.informer.GetIndexer(), e.informer.handler
	crds := []*apiextensionsv1.CustomResourceDefinition{
		spaceCRD("team-a", "example.com", "widgets", "Widget"),
		spaceCRD("team-a", "example.com", "gizmos", "Gizmo"),
		spaceCRD("team-a", "other.example.com", "widgets", "Widget"),
		spaceCRD("team-b", "example.com", "widgets", "Widget"),
		spaceCRD(spaces.Root, "example.com", "widgets", "Widget"),
	}
	for _, crd := range crds {
		require.NoError(t, store.Add(crd))
	}
	drain := func() []string {
		var out []string
		for e.c.queue.Len() > 0 {
			key, _ := e.c.queue.Get()
			out = append(out, key)
			e.c.queue.Done(key)
			e.c.queue.Forget(key)
		}
		return out
	}
	widgetsA := crds[0]
	h.OnAdd(widgetsA, true)
	require.ElementsMatch(t, []string{"team-a|widgets.example.com", "team-a|gizmos.example.com"}, drain(), "added")

	statusOnly := widgetsA.DeepCopy()
	statusOnly.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	h.OnUpdate(widgetsA, statusOnly)
	require.Equal(t, []string{"team-a|widgets.example.com"}, drain(), "names unchanged")

	named := statusOnly.DeepCopy()
	named.Status.AcceptedNames = named.Spec.Names
	h.OnUpdate(statusOnly, named)
	require.ElementsMatch(t, []string{"team-a|widgets.example.com", "team-a|gizmos.example.com"}, drain(), "names accepted")

	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "team-a|widgets.example.com", Obj: named})
	require.ElementsMatch(t, []string{"team-a|widgets.example.com", "team-a|gizmos.example.com"}, drain(), "deleted")

	root := crds[4]
	h.OnAdd(root, true)
	require.ElementsMatch(t, []string{"team-a|widgets.example.com", "team-a|gizmos.example.com", "team-b|widgets.example.com"}, drain(), "root added")
	rootStatus := root.DeepCopy()
	rootStatus.Status.Conditions = statusOnly.Status.Conditions
	h.OnUpdate(root, rootStatus)
	require.Empty(t, drain(), "root's names unchanged")
}

// TestStatusRunOneKindAtATime: many CRDs of a space asking for one kind,
// judged by several workers while the informer lags behind the writes:
// exactly one is given the kind.
func TestStatusRunOneKindAtATime(t *testing.T) {
	e := newStatusEnv(t)
	e.informer.synced.Store(true)
	const n = 12
	for i := range n {
		crd := spaceCRD("team-a", "example.com", fmt.Sprintf("widgets%d", i), "Widget")
		crd.Spec.Names.ListKind = fmt.Sprintf("Widget%dList", i)
		e.create(crd)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.c.Run(ctx, 4)
	}()
	// The informer sees the datastore every few milliseconds, behind the
	// writes.
	tick := time.NewTicker(3 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e.sync()
		judged := 0
		for _, crd := range e.stored("team-a") {
			if apiextensionshelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted) != nil {
				judged++
			}
		}
		if judged == n && e.c.queue.Len() == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d CRDs judged", judged, n)
		<-tick.C
	}
	cancel()
	<-done
	e.c.queue.ShutDownWithDrain() // the workers' last writes done

	var given []string
	for name, crd := range e.stored("team-a") {
		if crd.Status.AcceptedNames.Kind == "Widget" {
			given = append(given, name)
			requireServed(t, crd)
		} else {
			require.Equal(t, "KindConflict", condition(crd, apiextensionsv1.NamesAccepted).Reason, name)
		}
	}
	require.Len(t, given, 1, "the kind was given to %v", given)
}
