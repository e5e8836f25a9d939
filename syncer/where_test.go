// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPodImage(t *testing.T) {
	pod := func(image, imageID string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "syncer", "image": image}}},
		}}
		if imageID != "" {
			u.Object["status"] = map[string]any{"containerStatuses": []any{
				map[string]any{"name": "other", "imageID": "docker-pullable://other@sha256:ffff"},
				map[string]any{"name": "syncer", "imageID": imageID},
			}}
		}
		return u
	}
	for _, tc := range []struct {
		name, image, imageID, want string
		resolved                   bool
	}{
		{"not started yet", "registry.example/kubestellar:v1", "", "registry.example/kubestellar:v1", false},
		{"resolved by the kubelet", "registry.example/kubestellar:v1", "registry.example/kubestellar@sha256:abcd", "registry.example/kubestellar:v1@sha256:abcd", true},
		{"containerd's form", "kubestellar:v1", "docker-pullable://registry.example/kubestellar@sha256:abcd", "kubestellar:v1@sha256:abcd", true},
		{"named by digest", "registry.example/kubestellar@sha256:abcd", "", "registry.example/kubestellar@sha256:abcd", true},
		{"an ID without a digest", "kubestellar:v1", "sha256:1234", "kubestellar:v1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, resolved := podImage(pod(tc.image, tc.imageID))
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.resolved, resolved)
		})
	}
}
