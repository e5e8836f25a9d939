// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// fakeDefinitions say which definition of widgets.example.com each space
// has; the test sends the CRD events.
type fakeDefinitions struct {
	mu       sync.Mutex
	of       map[string]string // space → identity
	handlers []cache.ResourceEventHandler
}

func (d *fakeDefinitions) ReadBy(space, name string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name != "widgets.example.com" {
		return "", true
	}
	id, ok := d.of[space]
	return id, ok
}

func (d *fakeDefinitions) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.handlers = append(d.handlers, h)
	return nil, nil
}

// define gives space the definition id ("": none) and sends its CRD's
// event.
func (d *fakeDefinitions) define(space, id string) {
	d.mu.Lock()
	if id == "" {
		delete(d.of, space)
	} else {
		d.of[space] = id
	}
	handlers := slices.Clone(d.handlers)
	d.mu.Unlock()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com",
		Annotations: map[string]string{spaces.Annotation: space}}}
	for _, h := range handlers {
		h.OnUpdate(crd, crd)
	}
}

// fakeCopies serve, for each across, a list of copies and a watch the test
// drives.
type fakeCopies struct {
	mu      sync.Mutex
	lists   map[string][]unstructured.Unstructured
	watches map[string]*watch.FakeWatcher
}

func (f *fakeCopies) ListerWatcher(_ schema.GroupVersionResource, across, _ string) (cache.ListerWatcher, bool) {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			list := &unstructured.UnstructuredList{Items: slices.Clone(f.lists[across])}
			list.SetResourceVersion("1")
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			w := watch.NewFake()
			f.watches[across] = w
			return w, nil
		},
	}, noWatchList{}), true
}

// noWatchList says the fake does not stream lists.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func widgetCopy(mailbox, name string) unstructured.Unstructured {
	u := mailboxCopy(mailbox, "ns", name, "wds1", "p", nil)
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetResourceVersion("1")
	return *u
}

func widgetsConfig(resources ...string) *unstructured.Unstructured {
	cfg := &edgev2alpha1.SyncerConfig{TypeMeta: metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "SyncerConfig"}}
	for _, r := range resources {
		cfg.Spec.Resources = append(cfg.Spec.Resources, edgev2alpha1.SyncedResource{Group: "example.com", Version: "v1", Resource: r})
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// TestCopyReadersByDefinition: with CRDs per space, the copies of
// widgets are read one definition at a time, each mailbox's by its own
// definition; a reader's relist replaces its own mailboxes' records only;
// a mailbox whose CRD changes moves to the other reader, and its records
// stay; a mailbox not yet serving widgets is read once it does, even
// without an event; a reader stops with its last mailbox.
func TestCopyReadersByDefinition(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	widgets := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	defs := &fakeDefinitions{of: map[string]string{"mb1": "A", "mb2": "B"}}
	copies := &fakeCopies{watches: map[string]*watch.FakeWatcher{}, lists: map[string][]unstructured.Unstructured{
		spaces.WildcardOf("A"): {widgetCopy("mb1", "w")},
		spaces.WildcardOf("B"): {widgetCopy("mb2", "w")},
	}}
	s := NewStore()
	s.ReadInProcess(copies)
	s.runCtx = ctx
	require.NoError(t, s.ReadByDefinition(defs))
	configure := func(mailbox string, cfg *unstructured.Unstructured) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.setSyncerConfig(mailbox, cfg)
	}
	for _, mb := range []string{"mb1", "mb2", "mb3"} {
		configure(mb, widgetsConfig("widgets"))
	}
	readers := func() []string {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.copyReaders[widgets] == nil {
			return nil
		}
		return slices.Sorted(maps.Keys(s.copyReaders[widgets].readers))
	}
	has := func(mailbox, name string) bool {
		_, ok := s.copyAt(copyKey{mailbox, "example.com", "widgets", "ns", name})
		return ok
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 10*time.Second, 10*time.Millisecond, what)
	}
	require.Equal(t, []string{spaces.WildcardOf("A"), spaces.WildcardOf("B")}, readers(), "a reader per definition; mb3 serves no widgets yet")
	waitFor("each mailbox's copies", func() bool { return has("mb1", "w") && has("mb2", "w") })
	reader := func(id string) *copyStore {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.copyReaders[widgets].readers[spaces.WildcardOf(id)].store
	}

	// A's relist lacks mb2's copy: that is B's to say.
	require.NoError(t, reader("A").Replace([]any{new(widgetCopy("mb1", "w"))}, "2"))
	require.True(t, has("mb2", "w"), "A's list replaced a record of B's mailbox")
	// ...and lacks one of its own: gone.
	require.NoError(t, reader("A").Add(new(widgetCopy("mb1", "gone"))))
	require.NoError(t, reader("A").Replace([]any{new(widgetCopy("mb1", "w"))}, "3"))
	require.False(t, has("mb1", "gone"))

	// mb3 comes to serve widgets by A, with no event: the tick reads it.
	copies.mu.Lock()
	copies.lists[spaces.WildcardOf("A")] = append(copies.lists[spaces.WildcardOf("A")], widgetCopy("mb3", "w"))
	copies.mu.Unlock()
	defs.mu.Lock()
	defs.of["mb3"] = "A"
	defs.mu.Unlock()
	s.mu.Lock()
	s.rereadPending()
	require.Zero(t, s.copyReaders[widgets].pending)
	s.mu.Unlock()
	// A's reader relists (its watch ends, as a 410 would end it) and
	// records mb3's copy.
	waitFor("A's watch", func() bool {
		copies.mu.Lock()
		defer copies.mu.Unlock()
		return copies.watches[spaces.WildcardOf("A")] != nil
	})
	copies.mu.Lock()
	copies.watches[spaces.WildcardOf("A")].Stop()
	copies.mu.Unlock()
	waitFor("mb3's copy", func() bool { return has("mb3", "w") })

	// mb2's CRD takes definition A: B's reader stops, mb2's record stays.
	defs.define("mb2", "A")
	require.Equal(t, []string{spaces.WildcardOf("A")}, readers())
	require.True(t, has("mb2", "w"), "the record of a mailbox that moved to a running reader")

	// mb2's CRD goes: its copies are read by no one, and forgotten once
	// A's relist replaces them.
	defs.define("mb2", "")
	require.NoError(t, reader("A").Replace([]any{new(widgetCopy("mb1", "w")), new(widgetCopy("mb3", "w"))}, "4"))
	require.False(t, has("mb2", "w"))

	// The SyncerConfigs stop naming widgets: the reader stops, and every
	// record of widgets goes with it.
	for _, mb := range []string{"mb1", "mb2", "mb3"} {
		configure(mb, widgetsConfig())
	}
	require.Empty(t, readers())
	require.False(t, has("mb1", "w") || has("mb3", "w"))
}
