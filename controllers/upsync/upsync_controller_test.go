// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package upsync

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestResourcesGrowWhileReconciling is the regression test of a data race
// that aborted the server ("concurrent map iteration and map write"):
// reconcile lists the resources whose upsynced objects are cached while
// another worker starts the cache of a new one. The race detector (make
// test runs this package with -race) fails it should the list go unguarded
// again.
func TestResourcesGrowWhileReconciling(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var gvrs []schema.GroupVersionResource
	listKinds := map[schema.GroupVersionResource]string{}
	for i := range 20 {
		gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: fmt.Sprintf("things%d", i)}
		gvrs = append(gvrs, gvr)
		listKinds[gvr] = fmt.Sprintf("Things%dList", i)
	}
	c := New(&crossspace.Clients{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)}, nil)
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() {
		for _, gvr := range gvrs {
			c.informerFor(gvr, "wds1")
		}
	})
	errs := make(chan error, 1)
	wg.Go(func() {
		// A SyncTarget that is gone: reconcile looks at every cached
		// resource, to remove what was upsynced from it.
		for range 200 {
			if _, err := c.r.reconcile(ctx, spaces.Key("inv1", "", "gone")); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	require.ElementsMatch(t, gvrs, c.knownResources())
	for _, gvr := range gvrs {
		require.Same(t, c.informerFor(gvr, "wds1"), c.informerFor(gvr, "wds2"), "one cache per resource")
	}
}
