// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/packaging"
	"github.com/kubestellar/kubestellar/server"
)

// TestInstall installs under --root and reads the files back: the flags of
// `server start` given here are checked and passed on, the data dir always
// given, the secret kept out of them.
func TestInstall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      string // $KUBESTELLAR_TOKEN
		wantArgs []string
		notArgs  []string
		wantVar  string
		says     string
		err      string
	}{
		{name: "defaults", wantArgs: []string{"--data-dir=" + packaging.DefaultServerDataDir}},
		{name: "flags passed on", args: []string{"--port", "7443", "--tls-san", "center.example.com", "--data-dir", "/srv/ks"},
			wantArgs: []string{"--port=7443", "--data-dir=/srv/ks", "center.example.com"}},
		{name: "--token goes to a variable", args: []string{"--token", "cluster-secret"}, wantVar: "cluster-secret", notArgs: []string{"cluster-secret", "--token"}},
		{name: "$KUBESTELLAR_TOKEN goes to a variable", env: "env-secret", wantVar: "env-secret", notArgs: []string{"env-secret"},
			says: "taking " + server.TokenEnv + " from the environment"},
		{name: "bad port", args: []string{"--port", "0"}, err: "flags of `kubestellar server start`: --port 0 is not between 1 and 65535"},
		{name: "bad bind address", args: []string{"--bind-address", "everywhere"}, err: `--bind-address "everywhere" is not an IP address`},
		{name: "unknown flag", args: []string{"--colour", "blue"}, err: "unknown flag: --colour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var out, errOut bytes.Buffer
			cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			cmd.SetArgs(append([]string{"--root", root, "--no-start"}, tc.args...))
			cmd.SetOut(&errOut)
			cmd.SetErr(&errOut)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			t.Setenv(server.TokenEnv, tc.env)
			err := cmd.ExecuteContext(context.Background())
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				_, statErr := os.Stat(filepath.Join(root, packaging.ServerEnvFile))
				require.ErrorIs(t, statErr, os.ErrNotExist, "nothing written")
				return
			}
			require.NoError(t, err, errOut.String())
			require.Contains(t, out.String(), tc.says)
			unit, err := os.ReadFile(filepath.Join(root, packaging.UnitDir, packaging.ServerUnitName))
			require.NoError(t, err)
			require.Contains(t, string(unit), "Type=notify")
			data, err := os.ReadFile(filepath.Join(root, packaging.ServerEnvFile))
			require.NoError(t, err)
			vars, err := packaging.ParseEnvFile(data)
			require.NoError(t, err)
			for _, want := range tc.wantArgs {
				require.Contains(t, vars[packaging.ServerArgsVar], want)
			}
			for _, not := range tc.notArgs {
				require.NotContains(t, vars[packaging.ServerArgsVar], not)
			}
			require.Equal(t, tc.wantVar, vars[server.TokenEnv])
			require.NotContains(t, out.String()+errOut.String(), "secret", "no secret printed")
		})
	}
}
