// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecondLockerRefused takes the lock twice (flock locks belong to open
// files, so two in one process exclude each other as two processes do): the
// second is refused with a message naming the directory, the holder and
// its pid; once the first releases, it is free again.
func TestSecondLockerRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := Acquire(dir, "server.lock", "kubestellar server")
	require.NoError(t, err)

	second, err := Acquire(dir, "server.lock", "kubestellar server")
	require.Nil(t, second)
	var inUse *InUseError
	require.True(t, errors.As(err, &inUse), "want an *InUseError, got %T: %v", err, err)
	require.Equal(t, InUseError{Dir: dir, Holder: "kubestellar server", PID: strconv.Itoa(os.Getpid())}, *inUse)
	require.EqualError(t, err, "--data-dir "+dir+" is in use by another kubestellar server (pid "+strconv.Itoa(os.Getpid())+
		"): stop it first or choose another --data-dir")

	// Another lock file in the same directory is another lock.
	other, err := Acquire(dir, "syncer.lock", "kubestellar syncer")
	require.NoError(t, err)
	other.Release()

	first.Release()
	first.Release() // twice is harmless
	again, err := Acquire(dir, "server.lock", "kubestellar server")
	require.NoError(t, err, "the lock is free once released")
	again.Release()
	var none *Lock
	none.Release()
}

// TestUnusableDirectory says which directory could not be locked.
func TestUnusableDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	_, err := Acquire(dir, "server.lock", "kubestellar server")
	require.ErrorContains(t, err, "locking --data-dir "+dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	var inUse *InUseError
	require.False(t, errors.As(err, &inUse))
}
