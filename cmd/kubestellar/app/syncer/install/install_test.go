// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/packaging"
)

func TestDefaultKubeconfig(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".kube"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".kube", "config"), nil, 0o600))
	wd, err := os.Getwd()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, env, home string
		homeErr         error
		want, from, err string
	}{
		{name: "from $KUBECONFIG, made absolute", env: "edge.kubeconfig", home: home, want: filepath.Join(wd, "edge.kubeconfig"), from: "$KUBECONFIG"},
		{name: "$KUBECONFIG with empty entries", env: ":/etc/edge.kubeconfig:", home: home, want: "/etc/edge.kubeconfig", from: "$KUBECONFIG"},
		{name: "$KUBECONFIG naming several", env: "/a:/b", home: home, err: "names 2 files"},
		{name: "from home", home: home, want: filepath.Join(home, ".kube", "config"), from: "~/.kube/config"},
		{name: "none", home: t.TempDir()},
		{name: "no home", homeErr: errors.New("no home")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{
				getenv:  func(string) string { return tc.env },
				homeDir: func() (string, error) { return tc.home, tc.homeErr },
			}
			got, from, err := o.defaultKubeconfig()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.from, from)
		})
	}
}

// TestInstallKeepsTheTokenOffTheCommandLine installs under --root and reads
// the environment file back: the token is never among the flags that
// ExecStart expands, and never printed.
func TestInstallKeepsTheTokenOffTheCommandLine(t *testing.T) {
	const token = "K10" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "edge1.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	for _, tc := range []struct {
		name     string
		args     []string
		env      string // $KUBESTELLAR_TOKEN
		wantArgs string // in KUBESTELLAR_SYNCER_ARGS
		wantVar  bool   // KUBESTELLAR_TOKEN in the file
		says     string
		err      string
	}{
		{name: "--token-file is recorded", args: []string{"--token-file", tokenFile}, wantArgs: "--token-file=" + tokenFile},
		{name: "--token goes to a variable", args: []string{"--token", token}, wantVar: true},
		{name: "$KUBESTELLAR_TOKEN goes to a variable", env: token, wantVar: true, says: "taking KUBESTELLAR_TOKEN from the environment"},
		{name: "--token-file wins over $KUBESTELLAR_TOKEN", args: []string{"--token-file", tokenFile}, env: "not-even-a-token", wantArgs: "--token-file=" + tokenFile},
		{name: "both flags", args: []string{"--token", token, "--token-file", tokenFile}, err: "--token and --token-file exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var out, errOut bytes.Buffer
			cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			cmd.SetArgs(append([]string{"--root", root, "--server", "https://127.0.0.1:6443", "--sync-target", "edge1",
				"--kubeconfig", "/etc/edge1.kubeconfig"}, tc.args...))
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			t.Setenv("KUBESTELLAR_TOKEN", tc.env)
			err := cmd.ExecuteContext(context.Background())
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "0123456789abcdef")
				return
			}
			require.NoError(t, err, errOut.String())
			require.NotContains(t, out.String()+errOut.String(), "0123456789abcdef", "the token is not printed")
			require.Contains(t, out.String(), tc.says)
			data, err := os.ReadFile(filepath.Join(root, packaging.SyncerEnvFile("edge1")))
			require.NoError(t, err)
			vars, err := packaging.ParseEnvFile(data)
			require.NoError(t, err)
			require.NotContains(t, vars[packaging.SyncerArgsVar], "0123456789abcdef", "the token is in the flags ExecStart expands")
			require.Contains(t, vars[packaging.SyncerArgsVar], tc.wantArgs)
			if tc.wantVar {
				require.Equal(t, token, vars["KUBESTELLAR_TOKEN"])
			} else {
				require.NotContains(t, vars, "KUBESTELLAR_TOKEN")
			}
		})
	}
}
