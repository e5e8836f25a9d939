// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/syncer"
	"github.com/kubestellar/kubestellar/test/harness"
	"github.com/kubestellar/kubestellar/test/memedge"
)

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// simEdge is a simulated edge, as the bench's: the real syncer (package
// syncer, in this process, with its own join token) against an edge
// cluster in memory, whose one controller makes a Deployment available
// unless its pods ask for a node label (a nodeSelector): the cluster has
// no node that has one.
type simEdge struct {
	name    string
	cluster *memedge.Cluster
	mu      sync.Mutex
	// arrived is when each image first was the edge's shop/web.
	arrived map[string]time.Time
}

// startSimEdge creates a SyncTarget (synctarget create args) and runs its
// syncer, simulated, until the test ends.
func startSimEdge(t *testing.T, srv *harness.Process, name string, args ...string) *simEdge {
	t.Helper()
	join := srv.JoinCommand(t, append([]string{name}, args...)...)
	o := syncer.NewOptions()
	for i := 0; i+1 < len(join); i++ {
		switch join[i] {
		case "--server":
			o.Server = join[i+1]
		case "--token":
			o.Token = join[i+1]
		case "--sync-target":
			o.SyncTarget = join[i+1]
		}
	}
	e := &simEdge{name: name, cluster: memedge.New(), arrived: map[string]time.Time{}}
	e.cluster.Controller = nodelessDeployments
	e.cluster.OnChange = func(gvr schema.GroupVersionResource, typ watch.EventType, obj *unstructured.Unstructured) {
		if gvr != deploymentsGVR || typ == watch.Deleted || obj.GetNamespace() != "shop" || obj.GetName() != "web" {
			return
		}
		if image := firstImage(obj); image != "" {
			e.mu.Lock()
			if _, ok := e.arrived[image]; !ok {
				e.arrived[image] = time.Now()
			}
			e.mu.Unlock()
		}
	}
	o.DataDir = t.TempDir()
	o.EdgeConfig, o.EdgeQPS = e.cluster.Config(), -1
	o.Workers = 2
	o.HeartbeatInterval = 2 * time.Second
	o.Complete()
	require.NoError(t, o.Validate(), "the simulated syncer of %s, from %v", name, join)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	done := make(chan error, 1)
	go func() { done <- syncer.Run(ctx, o, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the simulated syncer of %s: %v", name, err)
		}
	})
	return e
}

// nodelessDeployments plays a Deployment's controllers on a cluster with
// nodes that have no labels: every replica is updated and available,
// unless the pods ask for a node label, when none is.
func nodelessDeployments(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	if gvr != deploymentsGVR {
		return
	}
	replicas := int64(1)
	// (As the cluster holds it, decoded from JSON: a number is a float64.)
	switch v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas"); n := v.(type) {
	case int64:
		replicas = n
	case float64:
		replicas = int64(n)
	}
	available := replicas
	if sel, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec", "nodeSelector"); len(sel) > 0 {
		available = 0
	}
	obj.Object["status"] = map[string]any{"observedGeneration": obj.GetGeneration(), "replicas": replicas,
		"updatedReplicas": replicas, "readyReplicas": available, "availableReplicas": available}
}

func firstImage(obj *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
	return image
}

// image is the image of the edge's shop/web, read through its API.
func (e *simEdge) image(t *testing.T) string {
	t.Helper()
	u, err := dynamic.NewForConfigOrDie(e.cluster.Config()).Resource(deploymentsGVR).Namespace("shop").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err, "shop/web at %s", e.name)
	return firstImage(u)
}

// arrival is when image first was the edge's (zero: never).
func (e *simEdge) arrival(image string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.arrived[image]
}
