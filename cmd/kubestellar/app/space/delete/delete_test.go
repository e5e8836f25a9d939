// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package delete

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
)

func TestArgs(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "missing.kubeconfig")
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "no name", err: "accepts 1 arg(s), received 0"},
		{name: "root", args: []string{"root"}, err: "the root space cannot be deleted"},
		{name: "bad name", args: []string{"Team_A"}, err: `"Team_A"`},
		{name: "a name", args: []string{"team-a"}, err: "reading kubeconfig " + kubeconfig},
		{name: "bad timeout", args: []string{"team-a", "--timeout", "soon"}, err: `invalid argument "soon" for "--timeout"`},
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
