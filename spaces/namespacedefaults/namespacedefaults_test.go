// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package namespacedefaults

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubestellar/kubestellar/spaces"
)

// TestReconcile: a namespace gets its default ServiceAccount and its root
// CA ConfigMap; a ConfigMap whose CA is not the server's is brought up to
// date; a namespace that has both is left alone (no write); mailboxes are
// never asked about.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	r := &reconciler{kube: func(string) (kubernetes.Interface, error) { return client, nil }, ca: "CA-PEM"}

	require.NoError(t, r.reconcile(ctx, "team-a", "app"))
	_, err := client.CoreV1().ServiceAccounts("app").Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	cm, err := client.CoreV1().ConfigMaps("app").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ca.crt": "CA-PEM"}, cm.Data)

	cm.Data = map[string]string{"ca.crt": "someone else's", "extra": "x"}
	_, err = client.CoreV1().ConfigMaps("app").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, r.reconcile(ctx, "team-a", "app"))
	cm, err = client.CoreV1().ConfigMaps("app").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ca.crt": "CA-PEM"}, cm.Data, "the server's CA, alone")

	client.ClearActions()
	require.NoError(t, r.reconcile(ctx, "team-a", "app"))
	for _, a := range client.Actions() {
		require.Equal(t, "get", a.GetVerb(), "nothing written when all is there: %v", a)
	}

	// A namespace being deleted refuses creates: not retried.
	client.PrependReactor("create", "serviceaccounts", func(k8stesting.Action) (bool, runtimeObject, error) {
		return true, nil, namespaceTerminating("going")
	})
	require.NoError(t, r.reconcile(ctx, "team-a", "going"))

	c := &Controller{}
	mailbox := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: map[string]string{spaces.Annotation: spaces.MailboxName("inv", "0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b6a")}}}
	require.True(t, inMailbox(mailbox))
	c.enqueue(mailbox) // a nil queue would panic: mailboxes never reach it
}

// TestKubernetesService: default, and only default, gets the kubernetes
// Service, its Endpoints and its EndpointSlice at the server's address
// and port, with the space's URL; a server at a new port brings them up to
// date; a tenant's edits of the Service's ports are put back.
func TestKubernetesService(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	r := &reconciler{kube: func(string) (kubernetes.Interface, error) { return client, nil }, ca: "CA-PEM", address: "192.0.2.7", port: 6443}

	require.NoError(t, r.reconcile(ctx, "team-a", "app"))
	_, err := client.CoreV1().Services("app").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "only default gets the Service: %v", err)

	require.NoError(t, r.reconcile(ctx, "team-a", "default"))
	svc, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "https://192.0.2.7:6443/spaces/team-a", svc.Annotations[URLAnnotation])
	require.Equal(t, []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(6443)}}, svc.Spec.Ports)
	ep, err := client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{}) //nolint:staticcheck // what kubectl get endpoints reads
	require.NoError(t, err)
	require.Equal(t, "192.0.2.7", ep.Subsets[0].Addresses[0].IP)
	require.Equal(t, int32(6443), ep.Subsets[0].Ports[0].Port)
	slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, discoveryv1.AddressTypeIPv4, slice.AddressType)
	require.Equal(t, []string{"192.0.2.7"}, slice.Endpoints[0].Addresses)
	require.Equal(t, "kubernetes", slice.Labels[discoveryv1.LabelServiceName])

	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
	_, err = client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	r.port = 7443
	require.NoError(t, r.reconcile(ctx, "team-a", "default"))
	svc, err = client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, intstr.FromInt32(7443), svc.Spec.Ports[0].TargetPort)
	require.Equal(t, "https://192.0.2.7:7443/spaces/team-a", svc.Annotations[URLAnnotation])
	slice, err = client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(7443), *slice.Ports[0].Port)

	client.ClearActions()
	require.NoError(t, r.reconcile(ctx, "team-a", "default"))
	for _, a := range client.Actions() {
		require.Equal(t, "get", a.GetVerb(), "nothing written when all is there: %v", a)
	}
}

type runtimeObject = runtime.Object

func namespaceTerminating(ns string) error {
	err := apierrors.NewForbidden(corev1.Resource("serviceaccounts"), "default", errors.New("unable to create new content in namespace "+ns+" because it is being terminated"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace " + ns + " is being terminated", Field: "metadata.namespace"})
	return err
}
