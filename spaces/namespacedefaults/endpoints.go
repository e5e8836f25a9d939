// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 Endpoints are deprecated, but a cluster's API server still writes its own, and kubectl get endpoints and older tools read them.

package namespacedefaults

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubernetesEndpoints makes the Endpoints of default's kubernetes Service,
// at the server's address and port (not mirrored into an EndpointSlice:
// kubernetesService makes that).
func (r *reconciler) kubernetesEndpoints(ctx context.Context, client kubernetes.Interface, port int32) error {
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: KubernetesService, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: r.address}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
		}},
	}
	return ensure(ctx, client.CoreV1().Endpoints(metav1.NamespaceDefault), ep, func(live *corev1.Endpoints) *corev1.Endpoints {
		if equality.Semantic.DeepEqual(live.Subsets, ep.Subsets) {
			return nil
		}
		live = live.DeepCopy()
		live.Subsets = ep.Subsets
		return live
	})
}
