package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataDirLock is an exclusive lock on a data directory: two servers on one
// data directory would share a SQLite file and a kine socket, and each would
// unlink the other's socket on shutdown.
type dataDirLock struct {
	f *os.File
}

// lockDataDir takes the lock, or says which process holds it.
func lockDataDir(dataDir string) (*dataDirLock, error) {
	path := filepath.Join(dataDir, "server.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data-dir %s is in use by another kubestellar server (pid %s): stop it first or choose another --data-dir",
				dataDir, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("locking --data-dir %s: %w", dataDir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release gives the lock up.
func (l *dataDirLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}
