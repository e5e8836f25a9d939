// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package harness starts kubestellar servers for tests — in-process for
// integration tests, or the built binary as a child process for end-to-end
// tests — and runs the real kubectl against them. Readiness is always polled
// with a deadline, never slept for.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RepoRoot is the root of the kubestellar repository.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FreePort returns a loopback TCP port nobody listens on.
func FreePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitReady polls https://127.0.0.1:port/readyz until it answers "ok".
func WaitReady(ctx context.Context, port int, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // readiness probe only
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// AdminConfig loads the admin kubeconfig of a data dir for one context.
func AdminConfig(t testing.TB, kubeconfig, context string) *rest.Config {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	require.NoError(t, err)
	return cfg
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// Binary returns the kubestellar binary to test: $KUBESTELLAR_BIN when set
// (make builds it once per run), else one built into a temporary directory
// once per test process.
func Binary(t testing.TB) string {
	if bin := os.Getenv("KUBESTELLAR_BIN"); bin != "" {
		_, err := os.Stat(bin)
		require.NoError(t, err, "KUBESTELLAR_BIN=%s does not exist: run 'make build'", bin)
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kubestellar-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "kubestellar")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/kubestellar")
		cmd.Dir = RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtBin
}

// Kubectl runs the real kubectl with a kubeconfig and returns its output.
type Kubectl struct {
	Kubeconfig string
}

// Run runs kubectl and returns stdout, stderr and the error.
func (k Kubectl) Run(ctx context.Context, args ...string) (string, string, error) {
	return k.RunStdin(ctx, nil, args...)
}

// RunStdin runs kubectl with stdin and returns stdout, stderr and the error.
func (k Kubectl) RunStdin(ctx context.Context, stdin io.Reader, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Stdin = stdin
	cmd.Env = k.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// MustRun runs kubectl and fails the test when it fails.
func (k Kubectl) MustRun(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := k.Run(ctx, args...)
	require.NoError(t, err, "kubectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

// MustRunStdin runs kubectl with stdin and fails the test when it fails.
func (k Kubectl) MustRunStdin(t testing.TB, stdin io.Reader, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := k.RunStdin(ctx, stdin, args...)
	require.NoError(t, err, "kubectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

// Lines starts a long-running kubectl (a watch, logs -f) and returns its
// output line by line; it is stopped when the test ends.
func (k Kubectl) Lines(t testing.TB, args ...string) <-chan string {
	t.Helper()
	return StreamLines(t, k.env(), "kubectl", args...)
}

// StreamLines starts a long-running command with env and returns its
// output line by line; it is stopped when the test ends, and its stderr
// logged if the test failed.
func StreamLines(t testing.TB, env []string, name string, args ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		for range lines { // what nobody read
		}
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s %s: stderr: %s", name, strings.Join(args, " "), stderr.String())
		}
	})
	return lines
}

func (k Kubectl) env() []string {
	return append(os.Environ(), "KUBECONFIG="+k.Kubeconfig, "KUBECACHEDIR="+filepath.Join(filepath.Dir(k.Kubeconfig), ".kube-cache"))
}

// MustFail runs kubectl, expects it to fail and returns its stderr.
func (k Kubectl) MustFail(t testing.TB, args ...string) string {
	t.Helper()
	return k.MustFailStdin(t, nil, args...)
}

// MustFailStdin runs kubectl with stdin, expects it to fail and returns
// its stderr.
func (k Kubectl) MustFailStdin(t testing.TB, stdin io.Reader, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := k.RunStdin(ctx, stdin, args...)
	require.Error(t, err, "kubectl %s was expected to fail\nstdout: %s", strings.Join(args, " "), out)
	return errOut
}
