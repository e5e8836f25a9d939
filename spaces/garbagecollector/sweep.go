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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
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
	resources, err := sweptResources(ctx, clients, c.byDefinition.Load())
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	across := map[string]metadata.Interface{}
	for _, res := range resources {
		gvr := res.gvr
		all := across[res.across]
		if all == nil {
			if all, err = clients.Metadata(res.across); err != nil {
				return n, err
			}
			across[res.across] = all
		}
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

// ReadByDefinition has the sweep read the custom resources of the CRDs
// spaces define as their own (the server's --crds-per-space) one
// definition at a time (spaces.WildcardOf): through the wildcard, a name
// two spaces define differently cannot be read at all, and a tenant who
// defined another's name its own way would stop the sweep of it.
func (c *Collector) ReadByDefinition() { c.byDefinition.Store(true) }

// swept is a resource the sweep lists, across the spaces across names
// (spaces.Wildcard, or the wildcard of a definition).
type swept struct {
	gvr    schema.GroupVersionResource
	across string
}

// sweptResources are the built-in resources and those of every CRD of any
// space, as the root space shows them to the server; byDefinition, the
// custom resources of the CRDs each space defines as its own are read by
// definition, once per definition.
func sweptResources(ctx context.Context, clients Clients, byDefinition bool) ([]swept, error) {
	disc, err := clients.Discovery(spaces.Root)
	if err != nil {
		return nil, err
	}
	lists, err := discovery.ServerPreferredResources(disc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	crdSpace := spaces.Root
	if byDefinition {
		crdSpace = spaces.Wildcard
	}
	dyn, err := clients.Dynamic(crdSpace)
	if err != nil {
		return nil, err
	}
	crds, err := dyn.Resource(crdsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	// A space's own CRDs, by definition; the root's served everywhere go
	// through the wildcard, as built-in resources do.
	own := map[schema.GroupResource]bool{}
	var out []swept
	if byDefinition {
		ids := map[string]bool{}
		for i := range crds.Items {
			crd := &crds.Items[i]
			if spaces.ServedEverywhere(crd.GetAnnotations()) {
				continue
			}
			gvr, err := crdversion.Served(crd)
			if err != nil {
				continue
			}
			own[gvr.GroupResource()] = true
			typed := &apiextensionsv1.CustomResourceDefinition{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(crd.Object, typed) != nil || !namesAccepted(typed) {
				continue // serves nothing: has no objects
			}
			if id := spaces.DefinitionIdentity(typed); !ids[id] {
				ids[id] = true
				out = append(out, swept{gvr: gvr, across: spaces.WildcardOf(id)})
			}
		}
	}
	seen := map[schema.GroupResource]bool{}
	add := func(gvr schema.GroupVersionResource) {
		if !seen[gvr.GroupResource()] && !own[gvr.GroupResource()] {
			seen[gvr.GroupResource()] = true
			out = append(out, swept{gvr: gvr, across: spaces.Wildcard})
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
	for _, crd := range crds.Items {
		if gvr, err := crdversion.Served(&crd); err == nil {
			add(gvr)
		}
	}
	return out, nil
}

// namesAccepted tells whether a CRD serves its resource: names accepted,
// or established.
func namesAccepted(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if (c.Type == apiextensionsv1.NamesAccepted || c.Type == apiextensionsv1.Established) && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
