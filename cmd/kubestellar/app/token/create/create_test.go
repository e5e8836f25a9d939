// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package create

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
)

// TestFlags: each mistake is named before the command connects anywhere;
// flags that are right get as far as reading the kubeconfig (here, one
// that does not exist).
func TestFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "missing.kubeconfig")
	connects := "reading kubeconfig " + kubeconfig
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "neither", err: "--sync-target INVENTORY-SPACE/NAME (a syncer token) or --user NAME (a user token) is required"},
		{name: "both", args: []string{"--sync-target", "inv1/edge1", "--user", "alice"}, err: "--sync-target and --user exclude each other"},
		{name: "group without user", args: []string{"--sync-target", "inv1/edge1", "--group", "team-a"}, err: "--group needs --user: groups belong to a user token"},
		{name: "sync target without space", args: []string{"--sync-target", "edge1"}, err: `--sync-target: "edge1" is not INVENTORY-SPACE/NAME`},
		{name: "sync target with a bad name", args: []string{"--sync-target", "inv1/Edge_1"}, err: `--sync-target: "inv1/Edge_1": invalid SyncTarget name`},
		{name: "sync target, negative ttl", args: []string{"--sync-target", "inv1/edge1", "--ttl", "-1h"}, err: "--ttl: -1h0m0s is negative"},
		{name: "ttl not a duration", args: []string{"--user", "alice", "--ttl", "forever"}, err: `invalid argument "forever" for "--ttl"`},
		{name: "reserved user", args: []string{"--user", "system:admin"}, err: `--user/--group: the user name "system:admin" starts with "system:"`},
		{name: "reserved group", args: []string{"--user", "alice", "--group", "system:masters"}, err: `--user/--group: the group "system:masters" starts with "system:"`},
		{name: "empty group", args: []string{"--user", "alice", "--group", ""}, err: "--user/--group: the group is empty"},
		{name: "user, negative ttl", args: []string{"--user", "alice", "--ttl", "-5m"}, err: "--ttl: -5m0s is negative"},
		{name: "an argument", args: []string{"edge1"}, err: `unknown command "edge1"`},
		{name: "a syncer token", args: []string{"--sync-target", "inv1/edge1", "--ttl", "24h", "--description", "rebuild"}, err: connects},
		{name: "a user token", args: []string{"--user", "alice", "--group", "team-a", "--group", "team-b", "--ttl", "720h"}, err: connects},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, tc.args...))
			cmd.SetOut(&errOut)
			cmd.SetErr(&errOut)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			require.ErrorContains(t, cmd.Execute(), tc.err)
			require.Empty(t, out.String())
		})
	}
}
