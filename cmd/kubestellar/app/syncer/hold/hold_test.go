// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package hold

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/syncer"
)

func run(t *testing.T, cmdName string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	streams := iostreams.IOStreams{Out: &out, ErrOut: &out}
	cmd := NewCommand(streams)
	if cmdName == "release" {
		cmd = NewReleaseCommand(streams)
	}
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage = true
	err := cmd.Execute()
	return out.String(), err
}

// TestHoldAndRelease: hold writes the hold the syncer reads, release
// removes it; bad flags are errors that name them, and write nothing.
func TestHoldAndRelease(t *testing.T) {
	dir := t.TempDir()
	out, err := run(t, "hold", "--data-dir", dir, "--for", "2h", "--reason", "store open")
	require.NoError(t, err)
	require.Contains(t, out, "holding every change to this edge cluster until ")
	h, err := syncer.ReadHold(dir)
	require.NoError(t, err)
	require.Equal(t, "store open", h.Reason)
	require.NotNil(t, h.Until)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), *h.Until, time.Minute)
	require.True(t, h.ActiveAt(time.Now()))
	require.False(t, h.ActiveAt(h.Until.Add(time.Second)))

	out, err = run(t, "hold", "--data-dir", dir)
	require.NoError(t, err)
	require.Contains(t, out, "until released")
	h, err = syncer.ReadHold(dir)
	require.NoError(t, err)
	require.Nil(t, h.Until, "a hold replaces the one before")

	out, err = run(t, "release", "--data-dir", dir)
	require.NoError(t, err)
	require.Contains(t, out, "released")
	h, err = syncer.ReadHold(dir)
	require.NoError(t, err)
	require.Nil(t, h)
	out, err = run(t, "release", "--data-dir", dir)
	require.NoError(t, err)
	require.Contains(t, out, "nothing to release")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--data-dir or --sync-target is required"},
		{[]string{"--data-dir", dir, "--until", "tomorrow"}, `--until "tomorrow" is not a time in RFC 3339`},
		{[]string{"--data-dir", dir, "--until", "2020-01-01T00:00:00Z"}, "--until 2020-01-01T00:00:00Z has passed"},
		{[]string{"--data-dir", dir, "--until", "2099-01-01T00:00:00Z", "--for", "1h"}, "--until and --for both"},
		{[]string{"--data-dir", dir, "--for", "-1h"}, "--for -1h0m0s is negative"},
		{[]string{"--data-dir", dir, "--reason", strings.Repeat("x", 257)}, "--reason is 257 bytes; at most 256"},
	} {
		_, err := run(t, "hold", tc.args...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
		h, err := syncer.ReadHold(dir)
		require.NoError(t, err)
		require.Nil(t, h, "%v: a refused hold writes nothing", tc.args)
	}
}
