// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// toolModule is a Go module beside the tools module whose commands the
// harness builds once per machine (the standalone kine, konnectivity), each
// cached under a key of its own: the module's go.mod, go.sum and sources,
// its recipe and the Go version.
type toolModule struct {
	what string // for messages: "kine"
	// dir is the module's directory; when empty, $envDir, else dirName
	// beside the tools module.
	dir, envDir, dirName string
	modulePath           string // its go.mod's module line
	recipe               string // changes whenever the way it is built changes
	cachePrefix          string // of its cache directory's name
	cgo                  bool
	// test builds each command as the test binary of its package (go
	// test -c), not as a command.
	test bool
	// ldflags, when set, gives the linker flags from the versions of the
	// modules versions names (a version stamped into the binaries).
	ldflags func(versions map[string]string) (string, error)
	note    string // said while the build runs: how long it takes
	// commands are the binaries built, by file name, and their packages.
	commands map[string]string
	// versions names the modules whose versions are recorded beside the
	// binaries, in versionsFile, as a JSON object with these keys.
	versions     map[string]string
	versionsFile string
	// buildHint tells what to do when $KUBESTELLAR_EDGECLUSTER_BIN lacks a
	// binary.
	buildHint string
}

// ensureToolModule returns the directory holding m's binaries, building
// them first if this machine has not built them yet. With
// $KUBESTELLAR_EDGECLUSTER_BIN set, the binaries there are used.
func (o BuildOptions) ensureToolModule(ctx context.Context, m toolModule) (string, error) {
	if err := o.defaults(); err != nil {
		return "", err
	}
	if o.PrebuiltDir != "" {
		for name := range m.commands {
			if _, err := os.Stat(filepath.Join(o.PrebuiltDir, name)); err != nil {
				return "", fmt.Errorf("%s=%s has no %s: %s, or unset %s: %w", EnvBinDir, o.PrebuiltDir, name, m.buildHint, EnvBinDir, err)
			}
		}
		return o.PrebuiltDir, nil
	}
	dir := m.dir
	if dir == "" {
		dir = os.Getenv(m.envDir)
	}
	if dir == "" {
		dir = filepath.Join(filepath.Dir(o.ToolsDir), m.dirName)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || !bytes.Contains(data, []byte("module "+m.modulePath+"\n")) {
		return "", fmt.Errorf("the %s module (%s) is not in %s: run from the kubestellar repository, or set %s", m.what, m.modulePath, dir, m.envDir)
	}
	mo := o
	mo.ToolsDir = dir // where the go command runs
	goVersion, err := mo.goEnv(ctx, "GOVERSION")
	if err != nil {
		return "", err
	}
	key, err := ModuleKey(dir, m.recipe, goVersion)
	if err != nil {
		return "", err
	}
	keyDir := filepath.Join(o.CacheDir, m.cachePrefix+key)
	binDir := filepath.Join(keyDir, "bin")
	built := func() bool {
		for name := range m.commands {
			if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
				return false
			}
		}
		return true
	}
	if built() {
		return binDir, nil
	}
	if err := os.MkdirAll(keyDir, 0o755); err != nil {
		return "", fmt.Errorf("creating the %s cache directory: %w", m.what, err)
	}
	unlock, err := LockFile(ctx, filepath.Join(keyDir, "build.lock"), m.what, o.Logf)
	if err != nil {
		return "", err
	}
	defer unlock()
	if built() { // built while this one waited
		return binDir, nil
	}
	if err := mo.buildToolModule(ctx, m, keyDir); err != nil {
		return "", err
	}
	return binDir, nil
}

// buildToolModule builds m's commands into keyDir/bin, through a temporary
// directory, so that a build cut short leaves no binary behind.
func (o *BuildOptions) buildToolModule(ctx context.Context, m toolModule, keyDir string) error {
	started := time.Now()
	logPath := filepath.Join(keyDir, "build.log")
	buildLog, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating build log: %w", err)
	}
	defer buildLog.Close()
	var paths []string
	for _, path := range m.versions {
		paths = append(paths, path)
	}
	mods, err := o.listModules(ctx, paths...)
	if err != nil {
		return err
	}
	versions := map[string]string{}
	for k, path := range m.versions {
		versions[k] = mods[path].Version
	}
	o.Logf("edgecluster: building %s %v into %s; build log %s", m.what, versions, keyDir, logPath)
	tmp, err := buildDir(keyDir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, pkg := range m.commands {
		build := o.goBuild
		if m.test {
			build = o.goTestBuild
		}
		ldflags := ""
		if m.ldflags != nil {
			if ldflags, err = m.ldflags(versions); err != nil {
				return err
			}
		}
		if err := build(ctx, buildLog, logPath, name, m.note, filepath.Join(tmp, name), pkg, ldflags, m.cgo); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(versions, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, m.versionsFile), append(data, '\n'), 0o644); err != nil {
		return err
	}
	binDir := filepath.Join(keyDir, "bin")
	_ = os.RemoveAll(binDir)
	if err := os.Rename(tmp, binDir); err != nil {
		return fmt.Errorf("installing %s: %w", m.what, err)
	}
	o.Logf("edgecluster: %s ready in %s (took %s)", m.what, binDir, since(started))
	return nil
}

// buildDir makes the temporary directory a build writes its binaries to
// in keyDir, before it renames it to bin, and removes the leftovers of
// builds whose process died (the caller holds the build lock, so no build
// is using them).
func buildDir(keyDir string) (string, error) {
	if stale, err := filepath.Glob(filepath.Join(keyDir, "bin.tmp-*")); err == nil {
		for _, dir := range stale {
			_ = os.RemoveAll(dir)
		}
	}
	tmp, err := os.MkdirTemp(keyDir, "bin.tmp-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return tmp, nil
}
