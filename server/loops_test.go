// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func loopNames(ls []loop) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.name)
	}
	return out
}

// TestLoopsTable: every loop is named once, works on at least one item at
// a time and can be made.
func TestLoopsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range loops {
		require.NotEmpty(t, l.name)
		require.False(t, seen[l.name], "loop %s is in the table twice", l.name)
		seen[l.name] = true
		require.Positive(t, l.workers, "loop %s", l.name)
		require.NotNil(t, l.new, "loop %s", l.name)
	}
}

// TestWhatRunsWhere: one server on SQLite runs every loop but those of
// several servers; with several, every server keeps its Lease and its own
// tunnels' conditions, and the leader runs the controllers and the sweep.
func TestWhatRunsWhere(t *testing.T) {
	controllers := []string{"space", "namespace", "namespace-defaults", "crd-instances", "crd-status", "garbage-sweep", "storage-version-migrator", "space-usage", "scheduler", "mailbox", "placement-translator", "status-summarizer", "upsync"}
	for _, tc := range []struct {
		name            string
		leader, several bool
		want            []string
	}{
		{name: "alone, every server's", want: []string{"garbage-collector", "syncer-connected"}},
		{name: "alone, the leader's", leader: true, want: controllers},
		{name: "several, every server's", several: true, want: []string{"garbage-collector", "syncer-connected", "server-lease"}},
		{name: "several, the leader's", leader: true, several: true, want: append(controllers, "dead-server-sweep")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, loopNames(selectLoops(loops, tc.leader, tc.several)))
		})
	}
}
