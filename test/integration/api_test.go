// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubestellar/kubestellar/test/harness"
)

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// TestBuiltinKindsAreStoredInert checks the server's handling of built-in
// kinds: no defaulting, status only through the status subresource,
// generation counting spec changes, scale subresource, and restart.
func TestBuiltinKindsAreStoredInert(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	c := kube(t, s, "root")

	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "web"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Empty(t, svc.Spec.ClusterIP, "no clusterIP is allocated at the center")
	require.Empty(t, svc.Spec.Ports[0].Protocol, "nothing is defaulted")

	d := deployment("web")
	d.Status.Replicas = 7
	d, err = c.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Generation)
	require.Zero(t, d.Status.Replicas, "status is not written by create")

	d.Status.AvailableReplicas = 2
	d.Spec.Replicas = ptr.To[int32](9) // ignored by the status subresource
	d, err = c.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(2), d.Status.AvailableReplicas)
	require.Equal(t, int32(2), *d.Spec.Replicas)
	require.Equal(t, int64(1), d.Generation, "status writes do not bump the generation")

	d.Labels = map[string]string{"tier": "front"}
	d.Status.AvailableReplicas = 0 // ignored by the main resource
	d, err = c.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Generation, "metadata changes do not bump the generation")
	require.Equal(t, int32(2), d.Status.AvailableReplicas)

	scale, err := c.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(2), scale.Spec.Replicas)
	require.Equal(t, "app=web", scale.Status.Selector)
	scale.Spec.Replicas = 5
	_, err = c.AppsV1().Deployments("default").UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
	require.NoError(t, err)
	d, err = c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(5), *d.Spec.Replicas)
	require.Equal(t, int64(2), d.Generation, "a spec change bumps the generation")

	// Everything survives a restart on the same data dir.
	dataDir := s.DataDir
	s.Stop()
	s = harness.StartInProcess(t, dataDir)
	d, err = kube(t, s, "root").AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(5), *d.Spec.Replicas)
	require.Equal(t, int32(2), d.Status.AvailableReplicas)
}

// TestBadInputGetsClearErrors checks status codes and reasons for bad requests.
func TestBadInputGetsClearErrors(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "one")
	c := kube(t, s, "one")

	_, err := c.CoreV1().ConfigMaps("missing").Create(ctx, configMap("missing", "x", "x"), metav1.CreateOptions{})
	require.True(t, apierrors.IsNotFound(err), "object in a missing namespace: %v", err)
	require.Contains(t, err.Error(), `namespaces "missing" not found`)

	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "x", "x"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "x", "x"), metav1.CreateOptions{})
	require.True(t, apierrors.IsAlreadyExists(err), "duplicate: %v", err)

	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "Not_A_Name", "x"), metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "invalid name: %v", err)
	bad := configMap("default", "badkey", "x")
	bad.Data = map[string]string{"no/slash": "x"}
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, bad, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "invalid key: %v", err)

	_, err = kube(t, s, "nope").CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsNotFound(err), "missing space: %v", err)

	_, err = dyn(t, s, "one").Resource(spacesGVR()).Create(ctx, spaceObject("nested"), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "spaces are created in root only: %v", err)

	base := harness.AdminConfig(t, s.Kubeconfig, "root").Host
	token := harness.AdminConfig(t, s.Kubeconfig, "root").BearerToken
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // status codes only
	cases := []struct {
		method, path, body, token string
		want                      int
	}{
		{"GET", "/api/v1/namespaces", "", "", http.StatusUnauthorized},
		{"GET", "/api/v1/namespaces", "", "wrong-token", http.StatusUnauthorized},
		{"GET", "/readyz", "", "", http.StatusOK},
		{"GET", "/spaces/Bad_Name/api/v1/namespaces", "", token, http.StatusBadRequest},
		{"GET", "/spaces/", "", token, http.StatusBadRequest},
		{"POST", "/spaces/one/api/v1/namespaces/default/configmaps", "{not json", token, http.StatusBadRequest},
		{"POST", "/spaces/one/api/v1/namespaces/default/configmaps", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [", token, http.StatusBadRequest},
		{"POST", "/spaces/*/api/v1/namespaces", `{"metadata":{"name":"x"}}`, token, http.StatusBadRequest},
		{"GET", "/spaces/one/api/v1/namespaces/default/configmaps/absent", "", token, http.StatusNotFound},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		require.NoError(t, err)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		if strings.HasPrefix(tc.body, "apiVersion") {
			req.Header.Set("Content-Type", "application/yaml")
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := httpc.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, tc.want, resp.StatusCode, "%s %s: %s", tc.method, tc.path, body)
		require.Less(t, resp.StatusCode, 500, strconv.Itoa(resp.StatusCode))
	}
}
