// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// resource is a resource a clause names, resolved through discovery.
type resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

var crdResource = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// notPlaceable are groups and resources "*" never expands to: the edge
// machinery's own kinds, and events.
func notPlaceable(gr schema.GroupResource) bool {
	return gr.Group == edgev2alpha1.GroupName || gr.Group == tenancyv1alpha1.GroupName ||
		gr.Resource == "events" || gr.Group == "events.k8s.io"
}

// resolver maps clause resources to served resources, from discovery,
// refreshed when a lookup misses (at most once a second).
type resolver struct {
	disco     discovery.DiscoveryInterface
	mu        sync.Mutex
	resources []resource
	fetched   time.Time
}

func (r *resolver) refresh(force bool) error {
	if !force && !r.fetched.IsZero() || time.Since(r.fetched) < time.Second {
		return nil
	}
	lists, err := r.disco.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return err
	}
	var out []resource
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range list.APIResources {
			if strings.Contains(res.Name, "/") || !slices.Contains(res.Verbs, "list") || !slices.Contains(res.Verbs, "watch") {
				continue
			}
			out = append(out, resource{GroupVersionResource: gv.WithResource(res.Name), Kind: res.Kind, Namespaced: res.Namespaced})
		}
	}
	r.resources, r.fetched = out, time.Now()
	return nil
}

// resolve returns the resources of a clause: group nil or "*" means any
// group, a resource "*" any resource of the group(s).
func (r *resolver) resolve(group *string, names []string) ([]resource, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refresh(false); err != nil {
		return nil, err
	}
	find := func() ([]resource, []string) {
		var out []resource
		var missing []string
		for _, name := range names {
			found := false
			for _, res := range r.resources {
				if group != nil && *group != "*" && res.Group != *group {
					continue
				}
				if name == "*" {
					if !notPlaceable(res.GroupResource()) {
						out = append(out, res)
					}
					found = true
				} else if res.Resource == name {
					out = append(out, res)
					found = true
				}
			}
			if !found {
				missing = append(missing, name)
			}
		}
		return out, missing
	}
	out, missing := find()
	if len(missing) > 0 {
		if err := r.refresh(true); err != nil {
			return nil, err
		}
		out, missing = find()
	}
	if len(missing) > 0 {
		g := "any group"
		if group != nil && *group != "*" {
			g = fmt.Sprintf("group %q", *group)
		}
		return out, fmt.Errorf("no resource %s in %s is served", strings.Join(missing, ", "), g)
	}
	return out, nil
}
