// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package datadir keeps two processes off one data directory.
//
// The server and the syncer each hold an exclusive lock on a file in their
// --data-dir for as long as they run: two servers on one directory would
// share a SQLite file and a kine socket, two syncers would overwrite each
// other's saved state. The lock is flock(2), which the kernel releases when
// the process ends however it ends, so a crash never leaves a stale lock.
// The file holds the holder's pid, which the refusal names.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Lock is a held lock on a data directory.
type Lock struct {
	f *os.File
}

// InUseError says that another process holds the lock.
type InUseError struct {
	// Dir is the data directory, Holder what holds it ("kubestellar
	// server"), PID the holder's process id as its lock file says ("" if
	// the file does not say).
	Dir, Holder, PID string
}

func (e *InUseError) Error() string {
	pid := e.PID
	if pid == "" {
		pid = "unknown"
	}
	return fmt.Sprintf("--data-dir %s is in use by another %s (pid %s): stop it first or choose another --data-dir", e.Dir, e.Holder, pid)
}

// Acquire takes the lock file name in dir, on behalf of holder (how a
// second process is told who has it: "kubestellar server"), without
// waiting. If another process holds it, the error is an *InUseError.
func Acquire(dir, name, holder string) (*Lock, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking --data-dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid, _ := os.ReadFile(path)
			return nil, &InUseError{Dir: dir, Holder: holder, PID: strings.TrimSpace(string(pid))}
		}
		return nil, fmt.Errorf("locking --data-dir %s: %w", dir, err)
	}
	// Only the holder writes the file, so the pid read above is the
	// holder's (or empty, in the instant before it writes).
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up. It may be called more than once, and on nil.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
