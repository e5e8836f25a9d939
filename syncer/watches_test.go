// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// A syncer's caches hold each watch 30 to 60 minutes, where client-go's
// reflector asks for 5 to 10, and leave their lists and selectors as
// they were.
func TestCachesHoldLongWatches(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	fake := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"})
	rec := &recordingClient{Interface: fake}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := startInformer(ctx, listThenWatch{rec}, gvr, copySelector, nil, nil, nil)
	require.Eventually(t, func() bool { return len(rec.taken("watch")) > 0 }, 10*time.Second, 10*time.Millisecond, "a watch")
	close(r.stop)

	lists := rec.taken("list")
	require.NotEmpty(t, lists)
	for _, o := range lists {
		require.Nil(t, o.TimeoutSeconds, "a list is not given a timeout")
		require.Equal(t, edgev2alpha1.PlacementCopyLabel+"=true", o.LabelSelector, "the caller's tweak still applies")
	}
	for _, o := range rec.taken("watch") {
		require.NotNil(t, o.TimeoutSeconds)
		require.GreaterOrEqual(t, *o.TimeoutSeconds, int64(30*60))
		require.LessOrEqual(t, *o.TimeoutSeconds, int64(60*60))
		require.Equal(t, edgev2alpha1.PlacementCopyLabel+"=true", o.LabelSelector)
	}
}

// recordingClient records the options of every list and watch.
type recordingClient struct {
	dynamic.Interface
	mu   sync.Mutex
	opts map[string][]metav1.ListOptions
}

func (c *recordingClient) record(verb string, o metav1.ListOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opts == nil {
		c.opts = map[string][]metav1.ListOptions{}
	}
	c.opts[verb] = append(c.opts[verb], o)
}

func (c *recordingClient) taken(verb string) []metav1.ListOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]metav1.ListOptions(nil), c.opts[verb]...)
}

func (c *recordingClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return recordingResource{c.Interface.Resource(gvr), c}
}

type recordingResource struct {
	dynamic.NamespaceableResourceInterface
	c *recordingClient
}

func (r recordingResource) Namespace(ns string) dynamic.ResourceInterface {
	return recordingNamespace{r.NamespaceableResourceInterface.Namespace(ns), r.c}
}

type recordingNamespace struct {
	dynamic.ResourceInterface
	c *recordingClient
}

func (r recordingNamespace) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.c.record("list", o)
	return r.ResourceInterface.List(ctx, o)
}

func (r recordingNamespace) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	r.c.record("watch", o)
	return r.ResourceInterface.Watch(ctx, o)
}
