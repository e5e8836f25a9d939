// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/spaces"
)

func TestSourcesOrder(t *testing.T) {
	f := newFake()
	f.place("wds2", "b", 5)
	f.place("wds1", "z", 5)
	f.place("wds1", "a", 5)
	f.place("wds9", "old", 1)
	f.place("wds3", "gone", 0)
	delete(f.placements, spaces.Key("wds3", "", "gone")) // a slice whose placement is gone
	r := f.reconciler()
	st, _, ok := r.target(spaces.Key(inv, "", stName))
	require.True(t, ok)
	var got []string
	for _, p := range r.sources(context.Background(), st) {
		got = append(got, p.String())
		require.Equal(t, "loc1", p.dest.location.GetName())
		require.Equal(t, stName, p.dest.syncTarget.GetName())
	}
	require.Equal(t, []string{"wds9/old", "wds1/a", "wds1/z", "wds2/b"}, got)
}

// TestSourcesOutsideTheWDSInventories: a slice naming a SyncTarget of an
// inventory space its WDS does not name (forged: the scheduler writes
// none) places nothing there, whoever wrote it.
func TestSourcesOutsideTheWDSInventories(t *testing.T) {
	f := newFake()
	f.place("wds1", "mine", 5)
	f.place("wds2", "forged", 5)
	f.outside = map[string]bool{"wds2": true}
	r := f.reconciler()
	st, _, ok := r.target(spaces.Key(inv, "", stName))
	require.True(t, ok)
	var got []string
	for _, p := range r.sources(context.Background(), st) {
		got = append(got, p.String())
	}
	require.Equal(t, []string{"wds1/mine"}, got)
}
