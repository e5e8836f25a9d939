// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// contents returns what the mailbox holds now, by copy key: the objects of
// every resource the placements select or its SyncerConfig names (which
// the mailbox may still hold copies of); false when a cache has not synced.
func (r *mailboxReconciler) contents(mailbox string, claims map[string][]*claim, cfg *edgev2alpha1.SyncerConfig) (map[string]metav1.Object, bool) {
	resources := map[schema.GroupVersionResource]bool{}
	for _, cl := range claims {
		resources[cl[0].res.GroupVersionResource] = true
		if cl[0].obj.GetNamespace() != "" {
			resources[namespaceResource.GroupVersionResource] = true
		}
	}
	claimed := map[schema.GroupResource]bool{}
	for gvr := range resources {
		claimed[gvr.GroupResource()] = true
	}
	for _, res := range cfg.Spec.Resources {
		// A resource the placements claim is read in the version they
		// claim it in: the SyncerConfig names the version of the last
		// write, and a WDS that moved to another (its CRD's new preferred
		// version) would have the mailbox's copies read twice, under two
		// keys, and those of the old one deleted as placed no more.
		if gvr := (schema.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Resource}); !claimed[gvr.GroupResource()] {
			resources[gvr] = true
		}
	}
	current := map[string]metav1.Object{}
	for gvr := range resources {
		objs, ok := r.records(gvr, mailbox)
		if !ok {
			return nil, false
		}
		for _, obj := range objs {
			current[copyKey(gvr, obj.GetNamespace(), obj.GetName())] = obj
		}
	}
	return current, true
}

// decideAll makes one copy per key of what the placements claim (see
// decide), and adds the conflicts to the losers' problems.
func decideAll(sel *selection, current map[string]metav1.Object, where string) map[string]*desiredCopy {
	desired := map[string]*desiredCopy{}
	for _, k := range sortedKeys(sel.claims) {
		d, conflicts := decide(sel.claims[k], current[k], where)
		desired[k] = d
		for _, cf := range conflicts {
			sel.problems[cf.loser.key()] = append(sel.problems[cf.loser.key()], cf.problem)
		}
	}
	return desired
}

// addImpliedNamespaces adds the namespaces of namespaced copies that no
// placement places: they must exist in the mailbox, and are created when
// missing, never updated.
func addImpliedNamespaces(desired map[string]*desiredCopy) {
	for _, d := range desired {
		ns := d.obj.GetNamespace()
		if ns == "" {
			continue
		}
		k := copyKey(namespaceResource.GroupVersionResource, "", ns)
		if _, ok := desired[k]; !ok {
			desired[k] = &desiredCopy{res: namespaceResource, obj: namespaceObject(ns), implied: true}
		}
	}
}

// namespaceObject is a Namespace of that name, as a desired copy holds it.
func namespaceObject(name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("Namespace")
	obj.SetName(name)
	return obj
}

func isNamespaces(gvr schema.GroupVersionResource) bool {
	return gvr.Group == "" && gvr.Resource == "namespaces"
}
