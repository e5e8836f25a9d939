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
// what is right gets as far as reading the kubeconfig (one that does not
// exist here).
func TestFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "missing.kubeconfig")
	connects := "reading kubeconfig " + kubeconfig
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "no name", err: "accepts 1 arg(s), received 0"},
		{name: "bad name", args: []string{"Team_A"}, err: `"Team_A"`},
		{name: "root", args: []string{"root"}, err: "the root space always exists"},
		{name: "mailbox", args: []string{"mb1", "--type", "mailbox"}, err: "--type mailbox: the server makes mailbox spaces, one for each SyncTarget"},
		{name: "unknown type", args: []string{"s1", "--type", "edge"}, err: `--type "edge": a space is of type wds, inventory, or none`},
		{name: "inventory for a plain space", args: []string{"s1", "--inventory-space", "inv1"}, err: "--inventory-space is for spaces of --type wds"},
		{name: "inventory for an inventory", args: []string{"s1", "--type", "inventory", "--inventory-space", "inv1"}, err: "--inventory-space is for spaces of --type wds"},
		{name: "bad inventory", args: []string{"wds1", "--type", "wds", "--inventory-space", "inv1,Inv_2"}, err: "--inventory-space: "},
		{name: "plain", args: []string{"s1"}, err: connects},
		{name: "inventory", args: []string{"inv1", "--type", "inventory"}, err: connects},
		{name: "wds with inventories", args: []string{"wds1", "--type", "wds", "--inventory-space", "inv1,inv2", "--inventory-space", "inv3"}, err: connects},
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
