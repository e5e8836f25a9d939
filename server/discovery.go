// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/tools/cache"
)

// legacyDiscovery keeps the non-aggregated /apis group list of the core
// server in step with CRDs. kube-aggregator does this in Kubernetes; without
// it, clients that do not use aggregated discovery would not find the
// groups served by the apiextensions server.
type legacyDiscovery struct {
	groups discovery.GroupManager
	crds   apiextensionslisters.CustomResourceDefinitionLister
}

// register adds the apiextensions group itself and follows CRDs.
func (d *legacyDiscovery) register(informer cache.SharedIndexInformer) error {
	v1 := metav1.GroupVersionForDiscovery{GroupVersion: apiextensionsv1.SchemeGroupVersion.String(), Version: "v1"}
	d.groups.AddGroup(metav1.APIGroup{Name: apiextensionsv1.GroupName, Versions: []metav1.GroupVersionForDiscovery{v1}, PreferredVersion: v1})
	sync := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			d.syncGroup(crd.Spec.Group)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj any) { sync(obj) },
		DeleteFunc: sync,
	})
	return err
}

// syncGroup lists the served versions of a group across its CRDs, most
// preferred first, as Kubernetes orders them.
func (d *legacyDiscovery) syncGroup(group string) {
	all, err := d.crds.List(labels.Everything())
	if err != nil {
		return
	}
	seen := map[string]bool{}
	var versions []string
	for _, crd := range all {
		if crd.Spec.Group != group || crd.DeletionTimestamp != nil {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served && !seen[v.Name] {
				seen[v.Name] = true
				versions = append(versions, v.Name)
			}
		}
	}
	if len(versions) == 0 {
		d.groups.RemoveGroup(group)
		return
	}
	sort.Slice(versions, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0 })
	apiGroup := metav1.APIGroup{Name: group}
	for _, v := range versions {
		apiGroup.Versions = append(apiGroup.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
	}
	apiGroup.PreferredVersion = apiGroup.Versions[0]
	d.groups.AddGroup(apiGroup)
}
