// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// background is a server process started for tests or benchmarks, outside
// any network namespace, its output appended to a log file. It dies with
// the process that started it.
type background struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

func startBackground(logPath string, argv ...string) (*background, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", strings.Join(argv, " "), err)
	}
	b := &background{name: argv[0], logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(b.exited)
	}()
	return b, nil
}

func (b *background) hasExited() bool {
	select {
	case <-b.exited:
		return true
	default:
		return false
	}
}

func (b *background) log() string {
	data, _ := os.ReadFile(b.logPath)
	return string(data)
}

// stop sends SIGTERM to the process group, and SIGKILL after 30 s.
func (b *background) stop() {
	if b == nil || b.hasExited() {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
	}
}
