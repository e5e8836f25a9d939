// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// seen records the names of the objects a handler was told of.
type seen struct {
	mu    sync.Mutex
	names map[string]int
}

func (s *seen) handler() cache.ResourceEventHandler {
	return Enqueue(func(obj any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.names[obj.(*edgev2alpha1.SyncTarget).Name]++
	})
}

func (s *seen) has(names ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if s.names[n] == 0 {
			return false
		}
	}
	return true
}

// Controllers asking for the same kind share one cache: one list and one
// watch for all of them, each controller's handler told of every object,
// including one added once the cache is full.
func TestTypedShares(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme, err := NewScheme()
	require.NoError(t, err)
	target := func(name string) *edgev2alpha1.SyncTarget {
		return &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.Annotation: "inv1"}}}
	}
	var lists atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(target("edge1")).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*edgev2alpha1.SyncTargetList); ok {
				lists.Add(1)
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	clients := &Clients{Client: noWatchList{c}, Scheme: scheme}

	a, b, late := &seen{names: map[string]int{}}, &seen{names: map[string]int{}}, &seen{names: map[string]int{}}
	infA := clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, a.handler())
	IndexSyncTargetsByMailbox(infA)
	infB := clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, b.handler())
	require.Same(t, infA, infB, "one cache per kind")
	IndexSyncTargetsByMailbox(infB) // the same index again: kept, not refused
	require.NotSame(t, infA, clients.Typed(&edgev2alpha1.LocationList{}, &edgev2alpha1.Location{}, cache.ResourceEventHandlerFuncs{}))

	Run(ctx, infA, infB)
	require.True(t, WaitForSync(ctx, infA))
	require.Eventually(t, func() bool { return a.has("edge1") && b.has("edge1") }, 10*time.Second, 10*time.Millisecond)

	// A handler added to the full cache is told of what it holds before
	// Typed returns, and of what comes after.
	infLate := clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, late.handler())
	require.Same(t, infA, infLate)
	require.True(t, late.has("edge1"))
	require.NoError(t, c.Create(ctx, target("edge2")))
	require.Eventually(t, func() bool { return a.has("edge2") && b.has("edge2") && late.has("edge2") }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, int32(1), lists.Load(), "the shared cache listed once")
	_, ok := Get[*edgev2alpha1.SyncTarget](infA, "inv1", "", "edge2")
	require.True(t, ok)
}

// noWatchList is a fake client that says it cannot stream lists, as the
// fake cannot (see watchlist.DoesClientNotSupportWatchListSemantics).
type noWatchList struct{ client.WithWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
