// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Syncer is `kubestellar syncer join` running as a child process.
type Syncer struct {
	Bin     string
	Args    []string
	DataDir string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// JoinCommand runs `kubestellar synctarget create` against the server and
// returns the join command it printed, as arguments after the binary.
func (p *Process) JoinCommand(t testing.TB, args ...string) []string {
	t.Helper()
	cmd := exec.Command(p.Bin, append([]string{"synctarget", "create"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.Kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubestellar synctarget create %v\n%s", args, stderr.String())
	fields := strings.Fields(strings.TrimSpace(string(out)))
	require.GreaterOrEqual(t, len(fields), 3, "synctarget create printed %q", out)
	require.Equal(t, "kubestellar", fields[0], "synctarget create printed %q", out)
	return fields[1:]
}

// StartSyncer runs the binary with joinArgs (as JoinCommand returns them)
// plus the edge cluster's kubeconfig and a data dir of the test's (or
// dataDir), and stops it when the test ends.
func StartSyncer(t testing.TB, joinArgs []string, edgeKubeconfig, dataDir string, extraArgs ...string) *Syncer {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	args := append(append([]string{}, joinArgs...), "--kubeconfig", edgeKubeconfig, "--data-dir", dataDir,
		"--heartbeat-interval", "2s", "-v", "2")
	s := &Syncer{Bin: Binary(t), Args: append(args, extraArgs...), DataDir: dataDir}
	s.Start(t)
	t.Cleanup(func() {
		s.Stop(t)
		if t.Failed() {
			t.Logf("the end of the syncer's log %s:\n%s", s.LogPath, tail([]byte(s.Log()), 8000))
		}
	})
	return s
}

// Start starts the syncer (again).
func (s *Syncer) Start(t testing.TB) {
	t.Helper()
	s.LogPath = filepath.Join(s.DataDir, fmt.Sprintf("syncer-%d.log", time.Now().UnixNano()))
	logFile, err := os.Create(s.LogPath)
	require.NoError(t, err)
	s.cmd = exec.Command(s.Bin, s.Args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, s.cmd.Start())
	s.exited = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
}

// Stop sends SIGTERM and waits for the syncer to exit (killing it after 30 s).
func (s *Syncer) Stop(t testing.TB) {
	t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	terminate(t, func(sig syscall.Signal) { _ = syscall.Kill(-s.cmd.Process.Pid, sig) }, s.exited, "syncer (log: "+s.LogPath+")")
}

// Kill kills the syncer with SIGKILL, as a crash or a power cut would, and
// waits for it to be gone.
func (s *Syncer) Kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Pid is the syncer's process id.
func (s *Syncer) Pid() int { return s.cmd.Process.Pid }

// Log returns what the syncer printed so far.
func (s *Syncer) Log() string {
	data, _ := os.ReadFile(s.LogPath)
	return string(data)
}

// WaitLog waits until the syncer has printed line, failing the test (with
// the log) after timeout or if the syncer exits.
func (s *Syncer) WaitLog(t testing.TB, line string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, fmt.Errorf("the syncer exited")
		default:
		}
		return strings.Contains(s.Log(), line), nil
	})
	require.NoError(t, err, "waiting for the syncer to print %q; log:\n%s", line, tail([]byte(s.Log()), 6000))
}
