// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestNamespaceDefaults: as in a Kubernetes cluster, every namespace of a
// space gets a ServiceAccount named default and a ConfigMap
// kube-root-ca.crt holding the CA that verifies the server, so that
// `kubectl create token default` works in a namespace just made, and a
// pod's tooling finds the CA where it looks. A tenant's space gets them as
// the admin's does.
func TestNamespaceDefaults(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	letCreateSpaces(t, admin, "alice")
	a := newTenant(t, srv, "alice").ownSpace(t, "team-a")

	cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
	require.NoError(t, err)
	serverCA := strings.TrimSpace(string(cfg.Clusters["root"].CertificateAuthorityData))
	require.NotEmpty(t, serverCA)

	rootURL := strings.TrimSuffix(cfg.Clusters["root"].Server, "/")
	for _, k := range []struct {
		who, space string
		k          harness.Kubectl
	}{{"a tenant's space", "team-a", a}, {"the root space", "root", admin}} {
		t.Run(k.who, func(t *testing.T) {
			// default's kubernetes Service points at the server, and names
			// the space's own URL.
			url := poll(t, k.k, func(s string) bool { return s != "" }, "the kubernetes Service in default",
				"get", "service", "kubernetes", "-n", "default", "-o", `jsonpath={.metadata.annotations.kubestellar\.io/url}`)
			require.True(t, strings.HasSuffix(url, "/spaces/"+k.space), "the space's URL: %s", url)
			require.True(t, strings.HasPrefix(rootURL, strings.TrimSuffix(url, "/spaces/"+k.space)), "the server's address: %s, the root space at %s", url, rootURL)
			require.Equal(t, "https=443", k.k.MustRun(t, "get", "service", "kubernetes", "-n", "default", "-o", `jsonpath={.spec.ports[0].name}={.spec.ports[0].port}`))
			endpoint := poll(t, k.k, func(s string) bool { return s != "" }, "the kubernetes EndpointSlice in default",
				"get", "endpointslice", "kubernetes", "-n", "default", "-o", `jsonpath={.endpoints[0].addresses[0]}:{.ports[0].port}`)
			require.Contains(t, url, "https://"+endpoint+"/", "the EndpointSlice is where the Service's URL points")

			k.k.MustRun(t, "create", "namespace", "app")
			poll(t, k.k, equals("default"), "the default ServiceAccount in a new namespace", "get", "serviceaccount", "default", "-n", "app", "-o", "jsonpath={.metadata.name}")
			ca := poll(t, k.k, func(s string) bool { return s != "" }, "the root CA ConfigMap in a new namespace",
				"get", "configmap", "kube-root-ca.crt", "-n", "app", "-o", `jsonpath={.data.ca\.crt}`)
			require.Equal(t, serverCA, strings.TrimSpace(ca), "the CA that verifies the server")
			token := strings.TrimSpace(k.k.MustRun(t, "create", "token", "default", "-n", "app", "--duration", "10m"))
			parts := strings.Split(token, ".")
			require.Len(t, parts, 3, "a JWT")
			claims, err := base64.RawURLEncoding.DecodeString(parts[1])
			require.NoError(t, err)
			require.Contains(t, string(claims), `system:serviceaccount:app:default`)

		})
	}
}
