// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// Labels and annotations the translator puts on mailbox copies.
const (
	// ContentHashAnnotation holds the hash of what the translator last
	// wrote, so unchanged copies are not written again.
	ContentHashAnnotation = edgev2alpha1.ContentHashAnnotation
	lastApplied           = "kubectl.kubernetes.io/last-applied-configuration"
)

// strippedMetadata are fields that belong to the WDS object's life, not to
// its copies.
var strippedMetadata = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
	"ownerReferences", "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}

// jobControllerLabels are set by the Job controller of the WDS's origin
// cluster, if any; at the edge, the local one sets its own.
var jobControllerLabels = []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"}

// centerOnly reports whether a label or annotation key of a workload object
// only means something at the center, so never travels to a mailbox or an
// edge. Every key of kubestellar's domains (kubestellar.io and its
// subdomains) is the server's: those it reads on the WDS object
// (customizer, expand-parameters), those the status controller writes
// there (executing-count, which changes as edges come and go and would
// otherwise rewrite every copy and re-apply it at every edge), the space
// annotation, and any a user or another level set, which would otherwise
// pose as the translator's own bookkeeping on the copy. The translator
// adds its own keys to the copy afterwards.
func centerOnly(key string) bool {
	return edgev2alpha1.IsKubestellarKey(key)
}

// strip returns a copy of a workload object with what must not travel
// removed: identity and bookkeeping metadata, status, center-only labels
// and annotations (centerOnly), the last-applied annotation, values a
// cluster allocates (Service IPs and node ports) and the selector and
// labels a Job controller generates.
func strip(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	for _, f := range strippedMetadata {
		unstructured.RemoveNestedField(out.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(out.Object, "status")
	annotations := out.GetAnnotations()
	delete(annotations, lastApplied)
	maps.DeleteFunc(annotations, func(k, _ string) bool { return centerOnly(k) })
	setOrDrop(out.SetAnnotations, annotations)
	labels := out.GetLabels()
	maps.DeleteFunc(labels, func(k, _ string) bool { return centerOnly(k) })
	setOrDrop(out.SetLabels, labels)

	switch out.GroupVersionKind().GroupKind().String() {
	case "Service":
		// "None" is a headless Service, asked for by the user, not an
		// allocated address: it travels.
		if ip, _, _ := unstructured.NestedString(out.Object, "spec", "clusterIP"); ip != corev1.ClusterIPNone {
			unstructured.RemoveNestedField(out.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(out.Object, "spec", "clusterIPs")
		}
		unstructured.RemoveNestedField(out.Object, "spec", "healthCheckNodePort")
		if ports, ok, _ := unstructured.NestedSlice(out.Object, "spec", "ports"); ok {
			for _, p := range ports {
				if m, ok := p.(map[string]any); ok {
					delete(m, "nodePort")
				}
			}
			_ = unstructured.SetNestedSlice(out.Object, ports, "spec", "ports")
		}
	case "Job.batch":
		unstructured.RemoveNestedField(out.Object, "spec", "selector")
		unstructured.RemoveNestedField(out.Object, "spec", "manualSelector")
		for _, path := range [][]string{{"metadata", "labels"}, {"spec", "template", "metadata", "labels"}} {
			labels, ok, _ := unstructured.NestedStringMap(out.Object, path...)
			if !ok {
				continue
			}
			for _, l := range jobControllerLabels {
				delete(labels, l)
			}
			if len(labels) == 0 {
				unstructured.RemoveNestedField(out.Object, path...)
			} else {
				_ = unstructured.SetNestedStringMap(out.Object, labels, path...)
			}
		}
	}
	return out
}

func setOrDrop(set func(map[string]string), m map[string]string) {
	if len(m) == 0 {
		set(nil)
		return
	}
	set(m)
}
