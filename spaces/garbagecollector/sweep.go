// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/crdversion"
	"github.com/kubestellar/kubestellar/spaces"
)

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Sweep looks at every object of every space that has owners or the
// collector's finalizers, now and then every interval until ctx is done:
// the writes whose collection a server left undone when it stopped. Run
// it on one server (the leader); the items go to its queue.
func (c *Collector) Sweep(ctx context.Context, interval time.Duration, clients Clients) {
	logger := klog.FromContext(ctx).WithName("garbage-sweep")
	ctx = klog.NewContext(ctx, logger)
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		start := time.Now()
		n, err := c.sweep(ctx, clients)
		if err != nil {
			logger.Error(err, "sweeping for garbage failed in part, will sweep again", "after", interval)
		}
		logger.V(2).Info("swept for garbage", "items", n, "took", time.Since(start))
	}, interval, 0.1, true)
}

func (c *Collector) sweep(ctx context.Context, clients Clients) (int, error) {
	resources, err := sweptResources(ctx, clients)
	if err != nil {
		return 0, err
	}
	all, err := clients.Metadata(spaces.Wildcard)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, gvr := range resources {
		opts := metav1.ListOptions{Limit: dependentsPage, ResourceVersion: "0"}
		for {
			list, err := all.Resource(gvr).List(ctx, opts)
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				break
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("listing %s across spaces: %w", gvr.GroupResource(), err))
				break
			}
			for i := range list.Items {
				obj := &list.Items[i]
				space := obj.Annotations[spaces.Annotation]
				if space == "" {
					continue
				}
				it := item{space: space, group: gvr.Group, resource: gvr.Resource, namespace: obj.Namespace, name: obj.Name}
				switch {
				case obj.DeletionTimestamp != nil && hasCollectorFinalizer(obj.Finalizers):
					it.op = opFinalize
				case len(obj.OwnerReferences) > 0 && collects(space):
					it.op = opCheck
				default:
					continue
				}
				c.enqueue(it)
				n++
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	return n, errors.Join(errs...)
}

// sweptResources are the built-in resources and those of every CRD of any
// space, as the root space shows them to the server.
func sweptResources(ctx context.Context, clients Clients) ([]schema.GroupVersionResource, error) {
	disc, err := clients.Discovery(spaces.Root)
	if err != nil {
		return nil, err
	}
	lists, err := discovery.ServerPreferredResources(disc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	seen := map[schema.GroupResource]bool{}
	var out []schema.GroupVersionResource
	add := func(gvr schema.GroupVersionResource) {
		if !seen[gvr.GroupResource()] {
			seen[gvr.GroupResource()] = true
			out = append(out, gvr)
		}
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "delete") {
				add(gv.WithResource(r.Name))
			}
		}
	}
	dyn, err := clients.Dynamic(spaces.Root)
	if err != nil {
		return nil, err
	}
	crds, err := dyn.Resource(crdsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	for _, crd := range crds.Items {
		if gvr, err := crdversion.Served(&crd); err == nil {
			add(gvr)
		}
	}
	return out, nil
}
