// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// The variables the in-cluster manifest sets from the downward API, so
// that the syncer can report the image its pod runs.
const (
	PodNameEnv      = "KUBESTELLAR_POD_NAME"
	PodNamespaceEnv = "KUBESTELLAR_POD_NAMESPACE"
)

// ContainerName is the syncer's container in its pod.
const ContainerName = "syncer"

// where says where the syncer runs, for the SyncTarget's status: host, or
// in-cluster with its pod's image (by digest once the kubelet has
// resolved one, which is then remembered).
func (s *Syncer) where(ctx context.Context) (mode, image string) {
	if !s.inCluster {
		return edgev2alpha1.SyncerModeHost, ""
	}
	if img := s.podImage.Load(); img != nil {
		return edgev2alpha1.SyncerModeInCluster, *img
	}
	if s.podName == "" || s.podNamespace == "" {
		return edgev2alpha1.SyncerModeInCluster, ""
	}
	pod, err := s.edge.Resource(podsGVR).Namespace(s.podNamespace).Get(ctx, s.podName, metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("cannot read the syncer's own pod for its image", "pod", s.podNamespace+"/"+s.podName, "err", err)
		return edgev2alpha1.SyncerModeInCluster, ""
	}
	image, resolved := podImage(pod)
	if resolved {
		s.podImage.Store(&image)
	}
	return edgev2alpha1.SyncerModeInCluster, image
}

// podImage returns the image of the syncer's container, with the digest
// the kubelet reports for it (its imageID ends in @sha256:...), and
// whether it had one.
func podImage(pod *unstructured.Unstructured) (string, bool) {
	containers, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	image := ""
	for i, c := range containers {
		m, _ := c.(map[string]any)
		if name, _ := m["name"].(string); name == ContainerName || (i == 0 && image == "") {
			image, _ = m["image"].(string)
		}
	}
	statuses, _, _ := unstructured.NestedSlice(pod.Object, "status", "containerStatuses")
	for _, c := range statuses {
		m, _ := c.(map[string]any)
		if name, _ := m["name"].(string); name != ContainerName {
			continue
		}
		id, _ := m["imageID"].(string)
		if _, digest, ok := strings.Cut(id, "@"); ok && strings.HasPrefix(digest, "sha256:") && !strings.Contains(image, "@") {
			return image + "@" + digest, true
		}
	}
	return image, strings.Contains(image, "@sha256:")
}
