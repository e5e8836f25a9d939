// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/test/harness"
)

// The e2e tests wait for the server with one poll (runKubectlUntil) and
// these ways to call it.

// poll runs kubectl until its output satisfies ok, or fails after a minute.
func poll(t *testing.T, k harness.Kubectl, ok func(string) bool, what string, args ...string) string {
	t.Helper()
	return pollFor(t, time.Minute, k, ok, what, args...)
}

// pollFor is poll with a deadline of the caller's.
func pollFor(t *testing.T, timeout time.Duration, k harness.Kubectl, ok func(string) bool, what string, args ...string) string {
	t.Helper()
	last, lastErr, err := runKubectlUntil(timeout, k, "", ok, args...)
	require.NoError(t, err, "waiting for %s: kubectl %s\nlast output: %s\nlast error: %s", what, strings.Join(args, " "), last, lastErr)
	return last
}

// pollStdin runs kubectl with stdin until it succeeds: a CRD just made is
// served within moments.
func pollStdin(t *testing.T, k harness.Kubectl, stdin, what string, args ...string) {
	t.Helper()
	_, lastErr, err := runKubectlUntil(time.Minute, k, stdin, func(string) bool { return true }, args...)
	require.NoError(t, err, "waiting for %s: %s", what, lastErr)
}

// eventually says whether kubectl's output satisfies ok within timeout,
// for a caller that gathers what explains a failure before failing.
func eventually(timeout time.Duration, k harness.Kubectl, ok func(string) bool, args ...string) bool {
	_, _, err := runKubectlUntil(timeout, k, "", ok, args...)
	return err == nil
}

// runKubectlUntil runs kubectl (with stdin, if any) every 200 ms until it
// succeeds with an output ok accepts, for at most timeout, and returns
// its last output and error output. Each run has a deadline of its own,
// so that the last output is a whole answer, not one the poll's deadline
// cut off.
func runKubectlUntil(timeout time.Duration, k harness.Kubectl, stdin string, ok func(string) bool, args ...string) (last, lastErr string, err error) {
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var in io.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		}
		out, errOut, runErr := k.RunStdin(ctx, in, args...)
		last, lastErr = out, errOut
		if runErr != nil && errOut == "" {
			lastErr = runErr.Error()
		}
		return runErr == nil && ok(out), nil
	})
	return last, lastErr, err
}

// pollDenied runs a write with --dry-run=server until the server refuses
// it with an error that holds want (an admission policy reaches the
// server's caches within moments; a dry run creates nothing while it has
// not), then makes the write for real and returns its refusal.
func pollDenied(t *testing.T, k harness.Kubectl, want, what string, args ...string) string {
	t.Helper()
	dry := append(append([]string{}, args...), "--dry-run=server")
	var lastErr string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, errOut, runErr := k.Run(ctx, dry...)
		lastErr = errOut
		return runErr != nil && strings.Contains(errOut, want), nil
	})
	require.NoError(t, err, "waiting for %s: kubectl %s\nlast error: %s", what, strings.Join(dry, " "), lastErr)
	errOut := k.MustFail(t, args...)
	require.Contains(t, errOut, want, what)
	return errOut
}

// pollFailure runs kubectl until it fails with an error that holds want,
// for what becomes true at a server within moments (an edge publishing a
// new CRD's OpenAPI), and returns that error.
func pollFailure(t *testing.T, k harness.Kubectl, want, what string, args ...string) string {
	t.Helper()
	var lastErr string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, errOut, runErr := k.Run(ctx, args...)
		lastErr = errOut
		return runErr != nil && strings.Contains(errOut, want), nil
	})
	require.NoError(t, err, "waiting for %s: kubectl %s\nlast error: %s", what, strings.Join(args, " "), lastErr)
	return lastErr
}
