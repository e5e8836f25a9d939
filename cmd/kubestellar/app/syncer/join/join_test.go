// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package join

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/syncer"
)

// TestJoinToken: where the join token comes from, and the mistakes that
// stop the command before it connects anywhere (the token's, the edge
// pacing's), none of them printing the token.
func TestJoinToken(t *testing.T) {
	const token = "K10" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		env  string
		err  string
	}{
		{name: "--token and --token-file", args: []string{"--token", token, "--token-file", tokenFile}, err: "--token and --token-file exclude each other"},
		{name: "empty token file", args: []string{"--token-file", empty}, err: "--token-file " + empty + " is empty"},
		{name: "missing token file", args: []string{"--token-file", filepath.Join(dir, "missing")}, err: "--token-file: open " + filepath.Join(dir, "missing")},
		{name: "no token anywhere", err: "--token is required (or --token-file, or $KUBESTELLAR_TOKEN)"},
		{name: "a bad token from the environment", env: "not-a-token", err: "malformed token"},
		{name: "no edge rate", args: []string{"--token-file", tokenFile, "--edge-qps", "0"}, err: "--edge-qps must be positive, or -1"},
		{name: "no edge burst", args: []string{"--token-file", tokenFile, "--edge-burst", "0"}, err: "--edge-burst must be at least 1"},
		{name: "a rate that is not a number", args: []string{"--token-file", tokenFile, "--edge-qps", "fast"}, err: `invalid argument "fast" for "--edge-qps"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
			cmd.SetArgs(append([]string{"--server", "https://127.0.0.1:1", "--sync-target", "edge1", "--data-dir", t.TempDir()}, tc.args...))
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			t.Setenv(syncer.TokenEnv, tc.env)
			err := cmd.Execute()
			require.ErrorContains(t, err, tc.err)
			require.NotContains(t, err.Error()+out.String(), "0123456789abcdef", "the token is not printed")
		})
	}
}

func TestLoadToken(t *testing.T) {
	const token = "abcdef.0123456789abcdef"
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte(" "+token+"\n"), 0o600))
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == syncer.TokenEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name, flag, file, env string
		want, from            string
	}{
		{name: "flag", flag: token, env: "other", want: token, from: "--token"},
		{name: "file, trimmed", file: file, env: "other", want: token, from: "--token-file"},
		{name: "environment", env: token, want: token, from: "$KUBESTELLAR_TOKEN"},
		{name: "nowhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := syncer.NewOptions()
			o.Token, o.TokenFile = tc.flag, tc.file
			from, err := o.LoadToken(env(tc.env))
			require.NoError(t, err)
			require.Equal(t, tc.want, o.Token)
			require.Equal(t, tc.from, from)
		})
	}
}
