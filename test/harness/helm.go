// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
)

// helmRecipe changes whenever the way helm is built changes, so that such a
// change gets a new cache key.
const helmRecipe = "helm-recipe-1"

// helmPackage is the helm CLI's main package, which test/helmtool requires.
const helmPackage = "helm.sh/helm/v3/cmd/helm"

// Helm returns the path of a helm CLI built from its Go module (the version
// test/helmtool/go.mod pins), building it first if this machine has not
// built that version yet. The build takes a few minutes the first time and
// needs the Go module proxy (or a warm module cache), nothing else; the
// binary is cached under <user cache dir>/kubestellar/helm/<key>, keyed by
// test/helmtool's go.mod, go.sum and sources and the Go version. Test
// processes that ask at once build once: a file lock guards the build.
//
// With -short it skips the test; otherwise a failed build fails it, saying
// why.
func Helm(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building helm from its Go module")
	}
	path, err := EnsureHelm(t.Context(), filepath.Join(RepoRoot(), "test", "helmtool"), t.Logf)
	require.NoError(t, err, "helm is built from its Go module (test/helmtool) with `go build`, which needs the Go module proxy or a module cache that has helm's modules")
	return path
}

// EnsureHelm returns the helm binary built from the module in moduleDir,
// building it if the cache does not hold it yet. logf receives progress.
func EnsureHelm(ctx context.Context, moduleDir string, logf func(string, ...any)) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to build helm: %w", err)
	}
	cacheRoot, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a cache directory for helm: %w", err)
	}
	goVersion, err := goOutput(ctx, goCmd, moduleDir, "env", "GOVERSION")
	if err != nil {
		return "", err
	}
	key, err := edgecluster.ModuleKey(moduleDir, helmRecipe, goVersion)
	if err != nil {
		return "", err
	}
	keyDir := filepath.Join(cacheRoot, "kubestellar", "helm", key)
	bin := filepath.Join(keyDir, "helm")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(keyDir, 0o755); err != nil {
		return "", fmt.Errorf("creating helm's cache directory: %w", err)
	}
	unlock, err := edgecluster.LockFile(ctx, filepath.Join(keyDir, "build.lock"), "helm", edgecluster.Logf(logf))
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have built it while this one waited.
	if isExecutable(bin) {
		return bin, nil
	}

	// helm reports the version it was stamped with, as its release build
	// does; unstamped, it says only "v3.22".
	version, err := goOutput(ctx, goCmd, moduleDir, "list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v3")
	if err != nil {
		return "", err
	}
	// Leftovers of builds whose process died; the lock is held, so no
	// build is writing them.
	if stale, err := filepath.Glob(filepath.Join(keyDir, "helm.tmp-*")); err == nil {
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
	// The binary appears under its name only when it is whole: it is
	// built under a temporary name and renamed.
	tmp := filepath.Join(keyDir, fmt.Sprintf("helm.tmp-%d", os.Getpid()))
	defer os.Remove(tmp)
	logf("helm: building %s %s from %s with %s into %s (a cold build takes a few minutes)", helmPackage, version, moduleDir, goVersion, keyDir)
	started := time.Now()
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -X helm.sh/helm/v3/internal/version.version="+version, "-o", tmp, helmPackage)
	cmd.Dir = moduleDir
	// The module is built as it is, with its own go.sum: no workspace, no
	// edits to go.mod.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("building helm: %w", ctx.Err())
		}
		return "", fmt.Errorf("building helm (go build %s in %s) failed: %w:\n%s", helmPackage, moduleDir, err, tail(out, 4096))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("installing helm into its cache: %w", err)
	}
	logf("helm: built in %s", time.Since(started).Round(100*time.Millisecond))
	return bin, nil
}

func goOutput(ctx context.Context, goCmd, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir // the toolchain that builds is the one the module's go.mod selects
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return "", fmt.Errorf("go %s in %s: %w: %s", strings.Join(args, " "), dir, err, exitErr.Stderr)
		}
		return "", fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
