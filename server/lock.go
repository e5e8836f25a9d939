// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import "github.com/kubestellar/kubestellar/internal/datadir"

// dataDirLock is the server's lock on its data directory: two servers on
// one data directory would share a SQLite file and a kine socket, and each
// would unlink the other's socket on shutdown.
type dataDirLock struct {
	l *datadir.Lock
}

// lockDataDir takes the lock, or says which process holds it.
func lockDataDir(dataDir string) (*dataDirLock, error) {
	l, err := datadir.Acquire(dataDir, "server.lock", "kubestellar server")
	if err != nil {
		return nil, err
	}
	return &dataDirLock{l: l}, nil
}

// release gives the lock up.
func (l *dataDirLock) release() {
	if l != nil {
		l.l.Release()
	}
}
