// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package kubeconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	kskubeconfig "github.com/kubestellar/kubestellar/server/kubeconfig"
)

// run runs the command against a kubeconfig addressing space wds1 of a
// server at https://10.0.0.1:6443 with token (none when empty), and returns
// what it printed.
func run(t *testing.T, token string, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kskubeconfig.ForSpace("https://10.0.0.1:6443", "wds1", []byte("the CA"), token), path))
	var out, errOut bytes.Buffer
	cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", path}, args...))
	cmd.SetOut(&errOut)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "neither", err: "--space or --edge is required"},
		{name: "both", args: []string{"--space", "wds1", "--edge", "edge1"}, err: "--space and --edge exclude each other"},
		{name: "bad space", args: []string{"--space", "WDS_1"}, err: "--space: "},
		{name: "edge without inventory", args: []string{"--edge", "edge1"}, err: "--edge needs --inventory-space: the space of the SyncTarget"},
		{name: "bad inventory space", args: []string{"--edge", "edge1", "--inventory-space", "Inv!"}, err: "--inventory-space: "},
		{name: "bad edge", args: []string{"--edge", "Edge_1", "--inventory-space", "inv1"}, err: `--edge "Edge_1" is not a SyncTarget name: `},
		{name: "token and token file", args: []string{"--space", "wds1", "--token", "a", "--token-file", "f"}, err: "--token and --token-file exclude each other"},
		{name: "token with white space", args: []string{"--space", "wds1", "--token", "a b"}, err: "--token: a bearer token holds no white space"},
		{name: "an argument", args: []string{"wds1"}, err: `unknown command "wds1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, "admin-token", tc.args...)
			require.ErrorContains(t, err, tc.err)
			require.Empty(t, out)
		})
	}
}

func TestKubeconfig(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "alice.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("  alice-token\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	for _, tc := range []struct {
		name        string
		callerToken string
		args        []string
		server      string
		context     string
		token       string
		err         string
	}{
		{name: "a space, the caller's token", callerToken: "admin-token", args: []string{"--space", "team-a"},
			server: "https://10.0.0.1:6443/spaces/team-a", context: "team-a", token: "admin-token"},
		{name: "the root space", callerToken: "admin-token", args: []string{"--space", "root"},
			server: "https://10.0.0.1:6443", context: "root", token: "admin-token"},
		{name: "--token", callerToken: "admin-token", args: []string{"--space", "team-a", "--token", "bob-token"},
			server: "https://10.0.0.1:6443/spaces/team-a", context: "team-a", token: "bob-token"},
		{name: "--token-file, trimmed", args: []string{"--space", "team-a", "--token-file", tokenFile},
			server: "https://10.0.0.1:6443/spaces/team-a", context: "team-a", token: "alice-token"},
		{name: "an edge", callerToken: "admin-token", args: []string{"--edge", "edge1", "--inventory-space", "inv1"},
			server: "https://10.0.0.1:6443/kubestellar/v1/edges/inv1/edge1/proxy", context: "edge-edge1", token: "admin-token"},
		{name: "empty token file", callerToken: "admin-token", args: []string{"--space", "team-a", "--token-file", empty}, err: "--token-file: " + empty + " is empty"},
		{name: "missing token file", callerToken: "admin-token", args: []string{"--space", "team-a", "--token-file", filepath.Join(dir, "none")}, err: "--token-file: open "},
		{name: "no token anywhere", args: []string{"--space", "team-a"}, err: "carries no bearer token to hand out: give one with --token or --token-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.callerToken, tc.args...)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Empty(t, out)
				return
			}
			require.NoError(t, err)
			cfg, err := clientcmd.Load([]byte(out))
			require.NoError(t, err)
			require.Equal(t, tc.context, cfg.CurrentContext)
			kctx := cfg.Contexts[cfg.CurrentContext]
			require.NotNil(t, kctx)
			cluster := cfg.Clusters[kctx.Cluster]
			require.NotNil(t, cluster)
			require.Equal(t, tc.server, cluster.Server)
			require.Equal(t, "the CA", string(cluster.CertificateAuthorityData))
			require.Equal(t, tc.token, cfg.AuthInfos[kctx.AuthInfo].Token)
			require.Len(t, cfg.Contexts, 1, "one context only: nothing else of the caller's kubeconfig")
			require.Len(t, cfg.AuthInfos, 1)
		})
	}
}
