// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/packaging"
)

// TestFlags: the mistakes that stop the command before it reaches the
// server, each naming its flag; --uninstall needs no server at all.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{nil, "--sync-target INVENTORY-SPACE/NAME is required"},
		{[]string{"--sync-target", "edge1"}, "--sync-target: "},
		{[]string{"--sync-target", "inv1/edge1", "--ttl", "-1h"}, "--ttl: -1h0m0s is negative"},
		{[]string{"--sync-target", "inv1/edge1", "--rbac-mode", "root"}, `--rbac-mode "root"`},
		{[]string{"--sync-target", "inv1/edge1", "--namespace", "Not_A_Namespace"}, `--namespace "Not_A_Namespace"`},
		{[]string{"--sync-target", "inv1/edge1", "--persistent-volume-claim", "A B"}, `--persistent-volume-claim "A B"`},
		{[]string{"--uninstall", "--sync-target", "inv1/edge1"}, "--uninstall needs no --sync-target"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &bytes.Buffer{}})
			cmd.SetArgs(tc.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			require.ErrorContains(t, cmd.Execute(), tc.err)
			require.Empty(t, out.String(), "nothing printed on an error")
		})
	}

	var out bytes.Buffer
	cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &bytes.Buffer{}})
	cmd.SetArgs([]string{"--uninstall", "--namespace", "edge-agent", "--kubeconfig", "/nonexistent"})
	require.NoError(t, cmd.Execute())
	objs, err := packaging.DecodeManifest(out.Bytes())
	require.NoError(t, err)
	require.Equal(t, "Namespace", objs[len(objs)-1].GetKind())
	require.Equal(t, "edge-agent", objs[len(objs)-1].GetName())
}
