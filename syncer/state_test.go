// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSavedStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := loadState(dir)
	require.NoError(t, err)
	require.Nil(t, s, "no file is no state")

	d, err := edgeObject(mailboxCopy(), deploymentsGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	d.CreateOnly = true
	id := Identity{InventorySpace: "inv1", SyncTarget: "edge1", MailboxSpace: "inv1-mb-1"}
	require.NoError(t, saveState(dir, id, []*desired{d}))
	info, err := os.Stat(filepath.Join(dir, stateFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	s, err = loadState(dir)
	require.NoError(t, err)
	require.Equal(t, "inv1-mb-1", s.MailboxSpace)
	objs := s.desiredObjects()
	require.Len(t, objs, 1)
	require.Equal(t, d.Key, objs[0].Key)
	require.Equal(t, d.Hash, objs[0].Hash)
	require.True(t, objs[0].CreateOnly)
	require.Equal(t, d.Object.Object, objs[0].Object.Object)
}

func TestCorruptStateSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, stateFile), []byte("{not json"), 0o600))
	_, err := loadState(dir)
	require.ErrorContains(t, err, "remove it")
}
