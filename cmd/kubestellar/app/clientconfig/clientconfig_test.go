// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package clientconfig

import (
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/kubeconfig"
)

// TestPath: --kubeconfig, then the first file of $KUBECONFIG, then the
// admin kubeconfig of the default data directory.
func TestPath(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct {
		name, flag, env, want string
	}{
		{name: "flag wins", flag: "/a/flag.kubeconfig", env: "/b/env.kubeconfig", want: "/a/flag.kubeconfig"},
		{name: "first of $KUBECONFIG", env: "/b/one" + string(filepath.ListSeparator) + "/b/two", want: "/b/one"},
		{name: "default data dir", want: filepath.Join(server.DefaultDataDir(), kubeconfig.AdminFile)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(clientcmd.RecommendedConfigPathEnvVar, tc.env)
			require.Equal(t, tc.want, (&Options{Kubeconfig: tc.flag}).Path())
		})
	}
}

func writeKubeconfig(t *testing.T, cfg *clientcmdapi.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// testCA returns a certificate in PEM, as a kubeconfig holds a CA.
func testCA(t *testing.T) []byte {
	srv := httptest.NewTLSServer(nil)
	srv.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func TestLoad(t *testing.T) {
	ca := testCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca, 0o600))
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["wds1"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443/spaces/wds1", CertificateAuthorityData: ca}
	cfg.Clusters["plain"] = &clientcmdapi.Cluster{Server: "https://10.0.0.2:6443/", CertificateAuthority: caFile}
	cfg.Clusters["bad-ca"] = &clientcmdapi.Cluster{Server: "https://10.0.0.3:6443", CertificateAuthority: filepath.Join(t.TempDir(), "missing")}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "admin-token"}
	cfg.Contexts["wds1"] = &clientcmdapi.Context{Cluster: "wds1", AuthInfo: "admin"}
	cfg.Contexts["plain"] = &clientcmdapi.Context{Cluster: "plain", AuthInfo: "nobody"}
	cfg.Contexts["dangling"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "admin"}
	cfg.Contexts["bad-ca"] = &clientcmdapi.Context{Cluster: "bad-ca", AuthInfo: "admin"}
	cfg.CurrentContext = "wds1"
	path := writeKubeconfig(t, cfg)
	missing := filepath.Join(t.TempDir(), "missing.kubeconfig")

	for _, tc := range []struct {
		name, context, path string
		base, ca, token     string
		err                 string
	}{
		{name: "current context, space path stripped", base: "https://10.0.0.1:6443", ca: string(ca), token: "admin-token"},
		{name: "--context, CA file, trailing slash, no such user", context: "plain", base: "https://10.0.0.2:6443", ca: string(ca)},
		{name: "no such context", context: "other", err: `kubeconfig ` + path + ` has no context "other" (use --context)`},
		{name: "context naming a missing cluster", context: "dangling", err: `kubeconfig ` + path + `: context "dangling" names missing cluster "gone"`},
		{name: "unreadable CA file", context: "bad-ca", err: "no such file or directory"},
		{name: "no kubeconfig", path: missing, err: "reading kubeconfig " + missing + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{Kubeconfig: path, Context: tc.context}
			if tc.path != "" {
				o.Kubeconfig = tc.path
			}
			loaded, err := o.Load()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, path, loaded.Path)
			require.Equal(t, tc.base, loaded.BaseURL)
			require.Equal(t, tc.ca, string(loaded.CAData))
			require.Equal(t, tc.token, loaded.Token)
			// Every space is reached from the root, whatever space the
			// context names.
			require.Equal(t, tc.base+"/spaces/inv1", loaded.RESTConfig("inv1").Host)
			require.Equal(t, tc.base, loaded.RESTConfig("root").Host, "the root space is the server's root")
			require.Equal(t, tc.token, loaded.RESTConfig("inv1").BearerToken)
			_, err = loaded.Dynamic("inv1")
			require.NoError(t, err)
		})
	}
}
