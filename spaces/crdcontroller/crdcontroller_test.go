// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crdcontroller

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// purge is one call the controller made to its purger.
type purge struct {
	gr schema.GroupResource
	// everywhere: PurgeResource; otherwise PurgeResourceOutside, with the
	// spaces among probe that keep was asked to keep.
	everywhere bool
	kept       []string
}

// recordingPurger records the purges asked of it; fail, when set, is
// returned by every call.
type recordingPurger struct {
	mu     sync.Mutex
	probe  []string
	purges []purge
	fail   error
}

func (p *recordingPurger) PurgeResource(_ context.Context, gr schema.GroupResource) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.purges = append(p.purges, purge{gr: gr, everywhere: true})
	return 1, p.fail
}

func (p *recordingPurger) PurgeResourceOutside(_ context.Context, gr schema.GroupResource, keep func(string) bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	call := purge{gr: gr}
	for _, s := range p.probe {
		if keep(s) {
			call.kept = append(call.kept, s)
		}
	}
	sort.Strings(call.kept)
	p.purges = append(p.purges, call)
	return 1, p.fail
}

func (p *recordingPurger) calls() []purge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]purge(nil), p.purges...)
}

var widgets = schema.GroupResource{Group: "example.com", Resource: "widgets"}

// crd is the CRD of widgets, bound to spaces (a value of
// spaces.BoundAnnotation, or no annotation for "").
func crd(bound string) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets"}}}
	if bound != "" {
		c.Annotations = map[string]string{spaces.BoundAnnotation: bound}
	}
	return c
}

// newTestController returns a controller over an informer whose store the
// test fills, without running it.
func newTestController(t *testing.T, p Purger, objs ...*apiextensionsv1.CustomResourceDefinition) *Controller {
	t.Helper()
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &apiextensionsv1.CustomResourceDefinition{}, 0, cache.Indexers{})
	for _, o := range objs {
		require.NoError(t, informer.GetStore().Add(o))
	}
	c, err := New(informer, p)
	require.NoError(t, err)
	return c
}

// TestProcess: what the controller removes, for each state a CRD can be in.
func TestProcess(t *testing.T) {
	deleting := crd("team-a,team-b")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, tc := range []struct {
		name  string
		store []*apiextensionsv1.CustomResourceDefinition
		want  []purge
	}{
		{name: "gone: every space's instances", want: []purge{{gr: widgets, everywhere: true}}},
		{name: "being deleted: every space's instances", store: []*apiextensionsv1.CustomResourceDefinition{deleting}, want: []purge{{gr: widgets, everywhere: true}}},
		{name: "served everywhere: nothing", store: []*apiextensionsv1.CustomResourceDefinition{crd(spaces.AllSpaces)}},
		{name: "stored before bindings (served everywhere): nothing", store: []*apiextensionsv1.CustomResourceDefinition{crd("")}},
		{name: "bound to two spaces: the others' instances", store: []*apiextensionsv1.CustomResourceDefinition{crd("team-b,team-a")},
			want: []purge{{gr: widgets, kept: []string{"team-a", "team-b"}}}},
		{name: "bound to none: every space's, through the outside purge", store: []*apiextensionsv1.CustomResourceDefinition{crd(" , ")},
			want: []purge{{gr: widgets}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &recordingPurger{probe: []string{"root", "team-a", "team-b", "team-c"}}
			c := newTestController(t, p, tc.store...)
			requeue, err := c.process(context.Background(), widgets)
			require.NoError(t, err)
			require.False(t, requeue)
			require.Equal(t, tc.want, p.calls())
		})
	}
}

// TestProcessFailure: a purge that fails is an error, so the item is
// retried; nothing is taken as done.
func TestProcessFailure(t *testing.T) {
	p := &recordingPurger{fail: errors.New("datastore unavailable")}
	c := newTestController(t, p)
	_, err := c.process(context.Background(), widgets)
	require.ErrorContains(t, err, "datastore unavailable")
}

// TestUnbound: an update is worth a purge only when a space stopped
// serving the CRD.
func TestUnbound(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		want          bool
	}{
		{before: spaces.AllSpaces, after: spaces.AllSpaces},
		{before: "", after: "team-a", want: true},
		{before: spaces.AllSpaces, after: "team-a", want: true},
		{before: "team-a", after: spaces.AllSpaces},
		{before: "team-a", after: "team-a,team-b"},
		{before: "team-a,team-b", after: "team-b", want: true},
		{before: "team-a,team-b", after: "team-b,team-a"},
		{before: "team-a", after: "team-b", want: true},
	} {
		require.Equal(t, tc.want, unbound(crd(tc.before), crd(tc.after)), "%q -> %q", tc.before, tc.after)
	}
}

// TestEventsEnqueue: a CRD is looked at when first seen, when deleted, and
// when an update deletes or unbinds it; other updates are left alone.
func TestEventsEnqueue(t *testing.T) {
	informer := &handlerRecorder{SharedIndexInformer: cache.NewSharedIndexInformer(&cache.ListWatch{}, &apiextensionsv1.CustomResourceDefinition{}, 0, cache.Indexers{})}
	c, err := New(informer, &recordingPurger{})
	require.NoError(t, err)
	h := informer.handler
	require.NotNil(t, h)

	drain := func() []schema.GroupResource {
		var out []schema.GroupResource
		for c.queue.Len() > 0 {
			item, _ := c.queue.Get()
			out = append(out, item)
			c.queue.Done(item)
			c.queue.Forget(item)
		}
		return out
	}
	h.OnAdd(crd("team-a"), true)
	require.Equal(t, []schema.GroupResource{widgets}, drain(), "at start")
	h.OnUpdate(crd("team-a"), crd("team-a,team-b"))
	require.Empty(t, drain(), "bound to one more space")
	h.OnUpdate(crd("team-a,team-b"), crd("team-b"))
	require.Equal(t, []schema.GroupResource{widgets}, drain(), "unbound from team-a")
	deleting := crd("team-b")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	h.OnUpdate(crd("team-b"), deleting)
	require.Equal(t, []schema.GroupResource{widgets}, drain(), "being deleted")
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "widgets.example.com", Obj: crd("team-b")})
	require.Equal(t, []schema.GroupResource{widgets}, drain(), "deleted while the watch was down")
}

// handlerRecorder keeps the handler the controller adds, to call it.
type handlerRecorder struct {
	cache.SharedIndexInformer
	handler cache.ResourceEventHandler
}

func (r *handlerRecorder) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	r.handler = h
	return r.SharedIndexInformer.AddEventHandler(h)
}
