// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is one child process of a cluster, with its output going to a log
// file in the cluster's directory.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd

	done    chan struct{} // closed when the process has been waited for
	waitErr error         // set before done is closed
}

func startProcess(name, logPath string, env []string, argv ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating log file for %s: %w", name, err)
	}
	fmt.Fprintf(logFile, "### %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how a process that has exited ended, with the end of
// its log.
func (p *process) exitError() error {
	status := "exited"
	if p.waitErr != nil {
		status = p.waitErr.Error()
	}
	return &exitError{name: p.name, status: status, logPath: p.logPath, tail: logTail(p.logPath, 20)}
}

type exitError struct {
	name, status, logPath, tail string
}

func (e *exitError) Error() string {
	return fmt.Sprintf("%s stopped unexpectedly (%s); its log is %s, which ends with:\n%s", e.name, e.status, e.logPath, e.tail)
}

// portInUse tells whether the process failed because a port it was given was
// taken meanwhile by another process.
func (e *exitError) portInUse() bool {
	return strings.Contains(e.tail, "address already in use")
}

// stop sends SIGTERM to the process's group, then SIGKILL if it has not
// exited within grace, and waits for it. It tells whether SIGKILL was needed.
func (p *process) stop(grace time.Duration) (killed bool, err error) {
	if p.exited() {
		return false, nil
	}
	if err := signalGroup(p.pid(), syscall.SIGTERM); err != nil {
		return false, fmt.Errorf("stopping %s: %w", p.name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		// The group may still hold children of the process; there are none
		// in practice, but make sure.
		_ = signalGroup(p.pid(), syscall.SIGKILL)
		return false, nil
	case <-timer.C:
	}
	if err := signalGroup(p.pid(), syscall.SIGKILL); err != nil {
		return true, fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return true, nil
}

// logTail returns the last lines of a log file.
func logTail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const max = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	data = bytes.TrimRight(data, "\n")
	parts := bytes.Split(data, []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return "    " + string(bytes.Join(parts, []byte("\n    ")))
}

// residentMemory returns the resident set size of a process, in bytes, from
// /proc (Linux only).
func residentMemory(pid int) (uint64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("parsing VmRSS of %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}
