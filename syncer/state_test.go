// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
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

// TestSaveLoopSavesChanges: the save loop sleeps until the desired state
// changes, then saves it, with every change that followed; a save that
// fails is tried again without another change.
func TestSaveLoopSavesChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// The data directory is a file at first: the first save fails.
	require.NoError(t, os.WriteFile(dir, nil, 0o600))
	o := NewOptions()
	o.DataDir = dir
	s := &Syncer{opts: o, id: Identity{InventorySpace: "inv1", SyncTarget: "edge1", MailboxSpace: "inv1-mb-1"},
		desired: map[objKey]*desired{}, saveSoon: make(chan struct{}, 1)}
	var failures atomic.Int32
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, "cannot save the desired state") {
			failures.Add(1)
		}
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.saveLoop(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	add := func(name string) {
		d, err := edgeObject(mailboxCopy(), deploymentsGVR, "edge1", "inv1/edge1")
		require.NoError(t, err)
		d.Key.Name = name
		s.mu.Lock()
		s.desired[d.Key] = d
		s.markDirtyLocked()
		s.mu.Unlock()
	}
	saved := func() int {
		st, err := loadState(dir)
		if err != nil || st == nil {
			return -1
		}
		return len(st.Objects)
	}
	add("a")
	require.Eventually(t, func() bool { return failures.Load() >= 2 }, 10*time.Second, 10*time.Millisecond,
		"a failed save is tried again, with no other change")
	require.Equal(t, -1, saved())
	require.NoError(t, os.Remove(dir))
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.Eventually(t, func() bool { return saved() == 1 }, 10*time.Second, 10*time.Millisecond, "saved once the directory can be written")

	add("b")
	add("c")
	require.Eventually(t, func() bool { return saved() == 3 }, 10*time.Second, 10*time.Millisecond, "later changes are saved")
	s.mu.Lock()
	require.False(t, s.dirty)
	s.mu.Unlock()
}
