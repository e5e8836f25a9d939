// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Process is `kubestellar server start` running as a child process.
type Process struct {
	Bin        string
	DataDir    string
	Port       int
	Kubeconfig string
	LogPath    string
	// logs are the LogPaths of every start, shown when the test fails.
	logs   []string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartBinary starts the built server on a fresh data dir (or dataDir, to
// restart on an existing one) and stops it when the test ends.
func StartBinary(t testing.TB, dataDir string, extraArgs ...string) *Process {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	p := &Process{Bin: Binary(t), DataDir: dataDir, Port: FreePort(t),
		Kubeconfig: filepath.Join(dataDir, "admin.kubeconfig")}
	p.start(t, extraArgs...)
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			for _, path := range p.logs {
				log, _ := os.ReadFile(path)
				t.Logf("the end of the server's log %s:\n%s", path, tail(log, 8000))
			}
		}
	})
	return p
}

func (p *Process) start(t testing.TB, extraArgs ...string) {
	t.Helper()
	p.LogPath = filepath.Join(p.DataDir, fmt.Sprintf("server-%d.log", time.Now().UnixNano()))
	p.logs = append(p.logs, p.LogPath)
	logFile, err := os.Create(p.LogPath)
	require.NoError(t, err)
	args := append([]string{"server", "start", "--data-dir", p.DataDir, "--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(p.Port)}, extraArgs...)
	p.cmd = exec.Command(p.Bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, p.cmd.Start())
	p.exited = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := WaitReady(ctx, p.Port, 60*time.Second); err != nil {
		p.signal(syscall.SIGKILL)
		<-p.exited
		log, _ := os.ReadFile(p.LogPath)
		t.Fatalf("server not ready: %v\n%s", err, tail(log, 4000))
	}
}

// Restart starts the server again on the same data dir and port, stopping
// it first (SIGTERM) if it still runs: a second process beside the first
// would wait for the data dir's lock while the first answered on the port.
func (p *Process) Restart(t testing.TB, extraArgs ...string) {
	t.Helper()
	p.Stop(t)
	p.start(t, extraArgs...)
}

func (p *Process) signal(sig syscall.Signal) {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// Stop sends SIGTERM and waits for the process to exit, returning how long
// it took; after 30 s it kills the process and fails the test.
func (p *Process) Stop(t testing.TB) time.Duration {
	t.Helper()
	return terminate(t, p.signal, p.exited, "server (log: "+p.LogPath+")")
}

// terminate sends SIGTERM through signal and waits until exited closes,
// returning how long it took; after 30 s it sends SIGKILL and fails the
// test naming what.
func terminate(t testing.TB, signal func(syscall.Signal), exited <-chan struct{}, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-exited:
		return 0
	default:
	}
	signal(syscall.SIGTERM)
	select {
	case <-exited:
		return time.Since(start)
	case <-time.After(30 * time.Second):
		signal(syscall.SIGKILL)
		<-exited
		t.Errorf("%s did not exit within 30s of SIGTERM", what)
		return time.Since(start)
	}
}

// Kill sends SIGKILL, as a crash would, and waits for the process to go.
func (p *Process) Kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// Kubectl returns a kubectl runner for the admin kubeconfig.
func (p *Process) Kubectl() Kubectl { return Kubectl{Kubeconfig: p.Kubeconfig} }

// CLI runs the kubestellar binary's client commands with the admin kubeconfig.
func (p *Process) CLI(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(p.Bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.Kubeconfig)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubestellar %v\n%s", args, out)
	return string(out)
}

// CLIStdout runs the kubestellar binary's client commands with the admin
// kubeconfig and returns their stdout alone.
func (p *Process) CLIStdout(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(p.Bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubestellar %v\n%s%s", args, out, stderr.String())
	return string(out)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Pid is the server's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// BaseURL is the server's URL, without a space.
func (p *Process) BaseURL() string { return fmt.Sprintf("https://127.0.0.1:%d", p.Port) }
