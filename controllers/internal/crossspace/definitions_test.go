// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// defsReadBy is what fakeDefinitions.ReadBy answers for one space and name.
type defsReadBy struct {
	id string
	ok bool
}

// fakeDefinitions are Definitions in the per-space layout, as a test sets
// them: ReadBy answers from readBy (unset: not served), Serves from served.
// It records what ReadBy was asked, and holds the handlers added, which
// crdEvent calls as the CRD informer would.
type fakeDefinitions struct {
	mu       sync.Mutex
	readBy   map[[2]string]defsReadBy
	served   map[string]bool
	asked    []string
	handlers []cache.ResourceEventHandler
}

func newFakeDefinitions() *fakeDefinitions {
	return &fakeDefinitions{readBy: map[[2]string]defsReadBy{}, served: map[string]bool{}}
}

func (f *fakeDefinitions) set(space, name, id string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readBy[[2]string{space, name}] = defsReadBy{id: id, ok: ok}
}

func (f *fakeDefinitions) serve(id string, serves bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.served[id] = serves
}

func (f *fakeDefinitions) CRDsIn(string) []*apiextensionsv1.CustomResourceDefinition { return nil }
func (f *fakeDefinitions) CRD(string, string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	return nil, false
}

func (f *fakeDefinitions) ReadBy(space, name string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, space+"/"+name)
	r := f.readBy[[2]string{space, name}]
	return r.id, r.ok
}

func (f *fakeDefinitions) Serves(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.served[id]
}

func (f *fakeDefinitions) PerSpace() bool  { return true }
func (f *fakeDefinitions) HasSynced() bool { return true }

func (f *fakeDefinitions) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = append(f.handlers, h)
	return nil, nil
}

// crdEvent tells every handler of a CRD's update (or, with deleted, its
// deletion), as the CRD informer would.
func (f *fakeDefinitions) crdEvent(deleted bool) {
	f.mu.Lock()
	handlers := append([]cache.ResourceEventHandler(nil), f.handlers...)
	f.mu.Unlock()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}}
	for _, h := range handlers {
		if deleted {
			h.OnDelete(crd)
		} else {
			h.OnUpdate(crd, crd.DeepCopy())
		}
	}
}

// dynCall is a list or watch the dynamic client was asked for, and the
// space its context named.
type dynCall struct {
	verb, resource, space string
}

// spaceRecordingDynamic is a dynamic client that records the space each
// list and watch's context names (the fake of k8s.io/client-go/dynamic/fake
// gives its reactors no context), lists the objects set for a resource and
// space, and records which spaces' watches were stopped. It refuses a
// watch-list (a streamed list), so that the reflector lists.
type spaceRecordingDynamic struct {
	mu      sync.Mutex
	calls   map[dynCall]int
	objects map[[2]string][]unstructured.Unstructured
	stopped map[[2]string]int
}

func newSpaceRecordingDynamic() *spaceRecordingDynamic {
	return &spaceRecordingDynamic{calls: map[dynCall]int{}, objects: map[[2]string][]unstructured.Unstructured{},
		stopped: map[[2]string]int{}}
}

func (d *spaceRecordingDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &spaceRecordingResource{d: d, gvr: gvr}
}

// seenCalls returns the lists and watches asked for so far.
func (d *spaceRecordingDynamic) seenCalls() []dynCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []dynCall
	for c := range d.calls {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.resource != b.resource {
			return a.resource < b.resource
		}
		if a.space != b.space {
			return a.space < b.space
		}
		return a.verb < b.verb
	})
	return out
}

func (d *spaceRecordingDynamic) stoppedWatches(resource, space string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopped[[2]string{resource, space}]
}

// spaceRecordingResource is the resource interface of spaceRecordingDynamic:
// List and Watch alone (the caches call nothing else).
type spaceRecordingResource struct {
	dynamic.NamespaceableResourceInterface
	d   *spaceRecordingDynamic
	gvr schema.GroupVersionResource
}

func (r *spaceRecordingResource) List(ctx context.Context, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	space, _ := spaces.FromContext(ctx)
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.d.calls[dynCall{verb: "list", resource: r.gvr.Resource + "." + r.gvr.Group + "/" + r.gvr.Version, space: space}]++
	list := &unstructured.UnstructuredList{}
	for _, u := range r.d.objects[[2]string{r.gvr.Resource, space}] {
		list.Items = append(list.Items, *u.DeepCopy())
	}
	list.SetResourceVersion("1")
	return list, nil
}

func (r *spaceRecordingResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil {
		return nil, errors.New("no watch-list here: list, then watch")
	}
	space, _ := spaces.FromContext(ctx)
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.d.calls[dynCall{verb: "watch", resource: r.gvr.Resource + "." + r.gvr.Group + "/" + r.gvr.Version, space: space}]++
	key := [2]string{r.gvr.Resource, space}
	return &stopRecordingWatch{FakeWatcher: watch.NewFake(), onStop: func() {
		r.d.mu.Lock()
		defer r.d.mu.Unlock()
		r.d.stopped[key]++
	}}, nil
}

// stopRecordingWatch is a watch that tells when its reader stops it.
type stopRecordingWatch struct {
	*watch.FakeWatcher
	once   sync.Once
	onStop func()
}

func (w *stopRecordingWatch) Stop() {
	w.once.Do(w.onStop)
	w.FakeWatcher.Stop()
}

var (
	widgetsV1    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widgetsV2    = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	definitionA  = strings.Repeat("a", 32)
	definitionB  = strings.Repeat("b", 32)
	widgetsNamed = CustomResourceName(widgetsV1.GroupResource())
)

// widget is a widget of a space, as a read across spaces gives it.
func widget(space, name string) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget"}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetResourceVersion("1")
	u.SetAnnotations(map[string]string{spaces.Annotation: space})
	return u
}

// widgetDefinitions are the fake Definitions of the tests: wds1 and wds2
// define widgets one way (A), wds3 another (B), shared serves them in
// every space (ReadBy's ""), and plain serves none.
func widgetDefinitions() *fakeDefinitions {
	defs := newFakeDefinitions()
	defs.set("wds1", widgetsNamed, definitionA, true)
	defs.set("wds2", widgetsNamed, definitionA, true)
	defs.set("wds3", widgetsNamed, definitionB, true)
	defs.set("shared", widgetsNamed, "", true)
	defs.set("plain", widgetsNamed, "", false)
	defs.set("wds1", "deployments.apps", "", true)
	defs.serve(definitionA, true)
	defs.serve(definitionB, true)
	return defs
}

// eachCache returns what Each visits: each cache, with the resource it
// was visited as.
func eachCache(s *SharedDynamic) map[*Informer]schema.GroupVersionResource {
	out := map[*Informer]schema.GroupVersionResource{}
	s.Each(func(gvr schema.GroupVersionResource, inf *Informer) {
		if prev, ok := out[inf]; ok {
			panic("Each visited a cache twice: as " + prev.String() + " and " + gvr.String())
		}
		out[inf] = gvr
	})
	return out
}

// TestForInRoutesByDefinition: with CRDs per space, ForIn gives the cache
// of every space (For) for a built-in resource (without asking the
// Definitions), for a custom resource read through the wildcard (ReadBy's
// id ""), and for any resource without Definitions; nil for a space that
// serves no such custom resource; and a cache per definition and version
// of a resource, the same one for every space that has that definition.
// Each visits them all, the per-definition ones as their resource.
func TestForInRoutesByDefinition(t *testing.T) {
	s := (&Clients{Dynamic: newSpaceRecordingDynamic()}).NewSharedDynamic()
	require.Same(t, s.For(widgetsV1), s.ForIn(widgetsV1, "wds1"), "without Definitions, every space's cache")

	defs := widgetDefinitions()
	require.NoError(t, s.ReadByDefinition(defs))
	require.Len(t, defs.handlers, 1, "ReadByDefinition listens to the CRDs' events")

	all := s.For(widgetsV1)
	require.Same(t, s.For(configMaps), s.ForIn(configMaps, "wds1"), "a built-in resource")
	require.Same(t, s.For(deployments), s.ForIn(deployments, "wds1"), "a resource ReadBy reads through the wildcard")
	require.Same(t, all, s.ForIn(widgetsV1, "shared"), "a custom resource served in every space")
	require.Nil(t, s.ForIn(widgetsV1, "plain"), "a space that serves no widgets")
	require.Nil(t, s.ForIn(widgetsV1, "unknown"), "a space the Definitions do not know")

	a1 := s.ForIn(widgetsV1, "wds1")
	require.NotNil(t, a1)
	require.NotSame(t, all, a1, "a space's own definition is read apart")
	require.Same(t, a1, s.ForIn(widgetsV1, "wds2"), "one cache per definition: wds2 has wds1's")
	require.Same(t, a1, s.ForIn(widgetsV1, "wds1"), "made once")
	b1 := s.ForIn(widgetsV1, "wds3")
	require.NotNil(t, b1)
	require.NotSame(t, a1, b1, "another definition, another cache")
	require.NotSame(t, all, b1)
	a2 := s.ForIn(widgetsV2, "wds1")
	require.NotNil(t, a2)
	require.NotSame(t, a1, a2, "a cache per version of a definition's resource")

	defs.mu.Lock()
	asked := append([]string(nil), defs.asked...)
	defs.mu.Unlock()
	for _, name := range asked {
		require.NotContains(t, name, "configmaps", "a built-in resource of the core group is never a custom one")
	}

	allV2 := s.For(widgetsV2)
	require.NotSame(t, allV2, a2)
	require.Equal(t, map[*Informer]schema.GroupVersionResource{
		all:                widgetsV1,
		s.For(configMaps):  configMaps,
		s.For(deployments): deployments,
		a1:                 widgetsV1,
		b1:                 widgetsV1,
		a2:                 widgetsV2,
		allV2:              widgetsV2,
	}, eachCache(s), "Each visits every cache, those of each definition too")
}

// TestForInReadsThroughTheDefinitionsWildcard: a definition's cache lists
// and watches through the space that names the definition (*~ID), whether
// it was made before Start (which runs it) or after (run at once), with
// the controllers' handlers; the cache of every space reads through "*".
func TestForInReadsThroughTheDefinitionsWildcard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn := newSpaceRecordingDynamic()
	dyn.objects[[2]string{"widgets", spaces.WildcardOf(definitionA)}] = []unstructured.Unstructured{widget("wds1", "a"), widget("wds2", "a")}
	dyn.objects[[2]string{"widgets", spaces.WildcardOf(definitionB)}] = []unstructured.Unstructured{widget("wds3", "b")}
	dyn.objects[[2]string{"widgets", spaces.Wildcard}] = []unstructured.Unstructured{widget("shared", "s")}
	s := (&Clients{Dynamic: dyn}).NewSharedDynamic()
	var mu sync.Mutex
	added := map[string]bool{}
	s.AddHandler(func(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			u := obj.(*unstructured.Unstructured)
			mu.Lock()
			defer mu.Unlock()
			added[gvr.Resource+" "+SpaceOf(u)+"/"+u.GetName()] = true
		}}
	})
	require.NoError(t, s.ReadByDefinition(widgetDefinitions()))

	before := s.ForIn(widgetsV1, "wds1")
	s.Start(ctx)
	after := s.ForIn(widgetsV1, "wds3")
	all := s.ForIn(widgetsV1, "shared")
	require.True(t, WaitForSync(ctx, before, after, all))

	require.Equal(t, []dynCall{
		{verb: "list", resource: "widgets.example.com/v1", space: "*"},
		{verb: "watch", resource: "widgets.example.com/v1", space: "*"},
		{verb: "list", resource: "widgets.example.com/v1", space: "*~" + definitionA},
		{verb: "watch", resource: "widgets.example.com/v1", space: "*~" + definitionA},
		{verb: "list", resource: "widgets.example.com/v1", space: "*~" + definitionB},
		{verb: "watch", resource: "widgets.example.com/v1", space: "*~" + definitionB},
	}, pollCalls(t, dyn, 6), "each cache reads through its own space")

	keys := func(inf *Informer) []string {
		k := inf.ListKeys()
		sort.Strings(k)
		return k
	}
	require.Equal(t, []string{"wds1|ns/a", "wds2|ns/a"}, keys(before))
	require.Equal(t, []string{"wds3|ns/b"}, keys(after))
	require.Equal(t, []string{"shared|ns/s"}, keys(all))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]bool{"widgets wds1/a": true, "widgets wds2/a": true, "widgets wds3/b": true, "widgets shared/s": true}, added,
		"the controllers' handlers are told of each definition's objects")
}

// pollCalls waits (a minute at most) for the dynamic client to have been
// asked for n distinct lists and watches, then returns them: a reflector
// watches after the cache has synced.
func pollCalls(t *testing.T, dyn *spaceRecordingDynamic, n int) []dynCall {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		calls := dyn.seenCalls()
		if len(calls) >= n || time.Now().After(deadline) {
			return calls
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRetireStopsUnservedDefinitions: a CRD event (update or delete)
// stops and forgets the caches of the definitions no space serves any
// more, and keeps the others and the caches of every space; the next
// ForIn of a retired definition makes a new cache.
func TestRetireStopsUnservedDefinitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn := newSpaceRecordingDynamic()
	s := (&Clients{Dynamic: dyn}).NewSharedDynamic()
	defs := widgetDefinitions()
	require.NoError(t, s.ReadByDefinition(defs))
	s.Start(ctx)
	all := s.For(widgetsV1)
	a := s.ForIn(widgetsV1, "wds1")
	b := s.ForIn(widgetsV1, "wds3")
	require.True(t, WaitForSync(ctx, all, a, b))
	pollCalls(t, dyn, 6)

	// An event while both are served keeps both.
	defs.crdEvent(false)
	require.Equal(t, map[*Informer]schema.GroupVersionResource{all: widgetsV1, a: widgetsV1, b: widgetsV1}, eachCache(s))
	require.Same(t, a, s.ForIn(widgetsV1, "wds2"))

	// No space serves A any more: the next CRD update retires its cache.
	defs.serve(definitionA, false)
	require.Equal(t, map[*Informer]schema.GroupVersionResource{all: widgetsV1, a: widgetsV1, b: widgetsV1}, eachCache(s),
		"retired at a CRD event, not before")
	defs.crdEvent(false)
	require.Equal(t, map[*Informer]schema.GroupVersionResource{all: widgetsV1, b: widgetsV1}, eachCache(s), "A's cache is gone")
	require.True(t, pollStopped(dyn, spaces.WildcardOf(definitionA), 1), "A's cache stopped watching")
	require.Equal(t, 0, dyn.stoppedWatches("widgets", spaces.WildcardOf(definitionB)), "B's still runs")
	require.Equal(t, 0, dyn.stoppedWatches("widgets", spaces.Wildcard), "every space's still runs")

	// Asked for again (as a stale ReadBy might), A gets a new cache.
	again := s.ForIn(widgetsV1, "wds1")
	require.NotNil(t, again)
	require.NotSame(t, a, again)
	require.Same(t, again, s.ForIn(widgetsV1, "wds2"))

	// A CRD deletion retires too: B, and the new A.
	defs.serve(definitionB, false)
	defs.crdEvent(true)
	require.Equal(t, map[*Informer]schema.GroupVersionResource{all: widgetsV1}, eachCache(s), "only every space's cache is left")
	require.True(t, pollStopped(dyn, spaces.WildcardOf(definitionB), 1), "B's cache stopped watching")
	require.Equal(t, 0, dyn.stoppedWatches("widgets", spaces.Wildcard), "every space's still runs")
}

// pollStopped waits (a minute at most) for n watches of widgets through
// space to have been stopped.
func pollStopped(dyn *spaceRecordingDynamic, space string, n int) bool {
	deadline := time.Now().Add(time.Minute)
	for dyn.stoppedWatches("widgets", space) < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestRetireBeforeStart: a definition's cache made before Start and
// retired before it is forgotten without having run; Start runs the rest.
func TestRetireBeforeStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn := newSpaceRecordingDynamic()
	s := (&Clients{Dynamic: dyn}).NewSharedDynamic()
	defs := widgetDefinitions()
	require.NoError(t, s.ReadByDefinition(defs))
	a := s.ForIn(widgetsV1, "wds1")
	b := s.ForIn(widgetsV1, "wds3")
	defs.serve(definitionA, false)
	defs.crdEvent(true)
	require.Equal(t, map[*Informer]schema.GroupVersionResource{b: widgetsV1}, eachCache(s))
	s.Start(ctx)
	require.True(t, WaitForSync(ctx, b))
	require.False(t, a.HasSynced(), "a retired cache does not run")
	require.Equal(t, []dynCall{
		{verb: "list", resource: "widgets.example.com/v1", space: "*~" + definitionB},
		{verb: "watch", resource: "widgets.example.com/v1", space: "*~" + definitionB},
	}, pollCalls(t, dyn, 2))
}
