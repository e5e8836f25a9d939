// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"slices"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/discovery"
)

// Discovery is what one space's CRDs add to discovery: the groups (for
// /apis), the resources of each group version (for /apis/GROUP/VERSION)
// and the same in aggregated form (apidiscovery.k8s.io/v2). It is built
// as the apiextensions server's discovery controller builds it for a
// cluster's CRDs, from the CRDs of one space (WithSpaceDocuments serves it).
type Discovery struct {
	Groups     []metav1.APIGroup
	Resources  map[metav1.GroupVersion]*metav1.APIResourceList
	Aggregated []apidiscoveryv2.APIGroupDiscovery
}

// DiscoveryOf builds the discovery of a space's CRDs: the established
// ones, with their served versions, newest first by Kubernetes' version
// order (the first is the preferred one).
func DiscoveryOf(crds []*apiextensionsv1.CustomResourceDefinition) Discovery {
	versions := map[string][]string{} // by group
	resources := map[metav1.GroupVersion][]metav1.APIResource{}
	aggregated := map[metav1.GroupVersion][]apidiscoveryv2.APIResourceDiscovery{}
	// In the order of their names, each resource before its subresources.
	crds = slices.Clone(crds)
	slices.SortFunc(crds, func(a, b *apiextensionsv1.CustomResourceDefinition) int { return strings.Compare(a.Name, b.Name) })
	for _, crd := range crds {
		if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		group, names := crd.Spec.Group, crd.Status.AcceptedNames
		namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
		scope := apidiscoveryv2.ScopeCluster
		if namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		verbs := metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}
		if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating) {
			verbs = metav1.Verbs{"delete", "deletecollection", "get", "list", "watch"}
		}
		storageVersionHash := ""
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				storageVersionHash = discovery.StorageVersionHash(group, v.Name, names.Kind)
			}
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if !slices.Contains(versions[group], v.Name) {
				versions[group] = append(versions[group], v.Name)
			}
			gv := metav1.GroupVersion{Group: group, Version: v.Name}
			resources[gv] = append(resources[gv], metav1.APIResource{Name: names.Plural, SingularName: names.Singular, Namespaced: namespaced,
				Kind: names.Kind, Verbs: verbs, ShortNames: names.ShortNames, Categories: names.Categories, StorageVersionHash: storageVersionHash})
			kind := &metav1.GroupVersionKind{Group: group, Version: v.Name, Kind: names.Kind}
			ar := apidiscoveryv2.APIResourceDiscovery{Resource: names.Plural, SingularResource: names.Singular, Scope: scope,
				ResponseKind: kind, Verbs: verbs, ShortNames: names.ShortNames, Categories: names.Categories}
			subresources, err := apiextensionshelpers.GetSubresourcesForVersion(crd, v.Name)
			if err == nil && subresources != nil && subresources.Status != nil {
				resources[gv] = append(resources[gv], metav1.APIResource{Name: names.Plural + "/status", Namespaced: namespaced,
					Kind: names.Kind, Verbs: metav1.Verbs{"get", "patch", "update"}})
				ar.Subresources = append(ar.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "status",
					ResponseKind: kind, Verbs: metav1.Verbs{"get", "patch", "update"}})
			}
			if err == nil && subresources != nil && subresources.Scale != nil {
				resources[gv] = append(resources[gv], metav1.APIResource{Group: autoscalingv1.GroupName, Version: "v1", Kind: "Scale",
					Name: names.Plural + "/scale", Namespaced: namespaced, Verbs: metav1.Verbs{"get", "patch", "update"}})
				ar.Subresources = append(ar.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "scale",
					ResponseKind: &metav1.GroupVersionKind{Group: autoscalingv1.GroupName, Version: "v1", Kind: "Scale"},
					Verbs:        metav1.Verbs{"get", "patch", "update"}})
			}
			aggregated[gv] = append(aggregated[gv], ar)
		}
	}

	var d Discovery
	d.Resources = map[metav1.GroupVersion]*metav1.APIResourceList{}
	groups := make([]string, 0, len(versions))
	for g := range versions {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		vs := versions[g]
		sort.Slice(vs, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0 })
		group := metav1.APIGroup{Name: g}
		ag := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}}
		for _, v := range vs {
			gv := metav1.GroupVersion{Group: g, Version: v}
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v})
			d.Resources[gv] = &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: resources[gv]}
			ag.Versions = append(ag.Versions, apidiscoveryv2.APIVersionDiscovery{Version: v, Resources: aggregated[gv],
				Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
		}
		group.PreferredVersion = group.Versions[0]
		d.Groups = append(d.Groups, group)
		d.Aggregated = append(d.Aggregated, ag)
	}
	return d
}
