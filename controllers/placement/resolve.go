// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
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
// refreshed when a lookup misses (at most once a second). With CRDs per
// space (defs.PerSpace), a WDS's own custom resources are its own CRDs',
// from defs, and the root space's discovery gives the rest: the built-in
// resources and the custom ones served in every space.
type resolver struct {
	disco     discovery.DiscoveryInterface
	defs      crossspace.Definitions
	mu        sync.Mutex
	resources []resource
	fetched   time.Time
}

// perSpace tells whether a WDS's custom resources are its own CRDs'.
func (r *resolver) perSpace() bool { return r.defs != nil && r.defs.PerSpace() }

// servedIn returns the resources served in wds: the root space's (by
// discovery) that every space serves, and with CRDs per space the WDS's
// own CRDs' at their preferred versions (as discovery orders them).
func (r *resolver) servedIn(wds string) []resource {
	if !r.perSpace() {
		return r.resources
	}
	out := make([]resource, 0, len(r.resources))
	for _, res := range r.resources {
		if res.Group != "" {
			// Built-in and served everywhere, or else the root space's own
			// (served by its CRD, or one the cache has not seen yet): the
			// WDS's own are below.
			if id, ok := r.defs.ReadBy(spaces.Root, crossspace.CustomResourceName(res.GroupResource())); !ok || id != "" {
				continue
			}
		}
		out = append(out, res)
	}
	for _, crd := range r.defs.CRDsIn(wds) {
		if id, ok := r.defs.ReadBy(wds, crd.Name); !ok || id == "" {
			continue // not served yet, or served everywhere (above)
		}
		v := PreferredVersion(crd)
		if v == "" {
			continue
		}
		out = append(out, resource{GroupVersionResource: schema.GroupVersionResource{Group: crd.Spec.Group, Version: v, Resource: crd.Spec.Names.Plural},
			Kind: crd.Spec.Names.Kind, Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped})
	}
	return out
}

// PreferredVersion is the version of a CRD that discovery prefers
// (crossspace.PreferredVersion).
func PreferredVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	return crossspace.PreferredVersion(crd)
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

// resolve returns the resources of a clause of a placement in wds: group
// nil or "*" means any group, a resource "*" any resource of the
// group(s).
func (r *resolver) resolve(wds string, group *string, names []string) ([]resource, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refresh(false); err != nil {
		return nil, err
	}
	find := func() ([]resource, []string) {
		var out []resource
		var missing []string
		served := r.servedIn(wds)
		for _, name := range names {
			found := false
			for _, res := range served {
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
