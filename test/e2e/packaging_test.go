// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestPackagingServiceFiles installs the server and a syncer as services
// under a directory standing for / (--root), as a package build or an
// administrator preparing an image does: exactly the expected files with
// the expected modes, flags that a shell (and systemd) read back as given,
// units that systemd-analyze accepts, and nothing left after uninstall.
func TestPackagingServiceFiles(t *testing.T) {
	bin := harness.Binary(t)
	realBin, err := filepath.EvalSymlinks(bin)
	require.NoError(t, err)
	realBin, err = filepath.Abs(realBin)
	require.NoError(t, err)
	root := t.TempDir()
	work := t.TempDir() // where install runs: relative paths are relative to it
	token := "K10" + strings.Repeat("0123456789abcdef", 4) + "::abcdef.0123456789abcdef"
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubestellar %s\n%s", strings.Join(args, " "), out)
		return string(out)
	}

	// A datastore password with every character that cuts a URL or a DSN,
	// and the quotes and escapes of a shell and of systemd.
	endpoint := `mysql://ks:pw/@:?#'"$` + "`\\" + `@tcp(127.0.0.1:3306)/kubestellar`
	out := run("server", "install", "--root", root, "--port", "7443", "--data-dir", "/x", "--datastore-endpoint", endpoint)
	require.Contains(t, out, "systemctl enable --now kubestellar.service")
	out = run("syncer", "install", "--root", root, "--server", "https://127.0.0.1:6443", "--token", token,
		"--sync-target", "edge1", "--kubeconfig", "rel/path")
	require.Contains(t, out, "kubestellar-syncer@edge1.service")
	require.NotContains(t, out, token, "the token is not printed")

	require.Equal(t, map[string]fs.FileMode{
		"etc":                                    fs.ModeDir | 0o755,
		"etc/systemd":                            fs.ModeDir | 0o755,
		"etc/systemd/system":                     fs.ModeDir | 0o755,
		"etc/kubestellar":                        fs.ModeDir | 0o755,
		"etc/kubestellar/server.env":             0o600,
		"etc/kubestellar/syncer-edge1.env":       0o600,
		"etc/systemd/system/kubestellar.service": 0o644,
		"etc/systemd/system/kubestellar-syncer@.service": 0o644,
	}, walk(t, root))

	serverUnit := filepath.Join(root, "etc/systemd/system/kubestellar.service")
	syncerUnit := filepath.Join(root, "etc/systemd/system/kubestellar-syncer@.service")
	require.Contains(t, readFile(t, serverUnit), "\nExecStart="+realBin+" server start $KUBESTELLAR_ARGS\n")
	require.Contains(t, readFile(t, syncerUnit), "\nExecStart="+realBin+" syncer join $KUBESTELLAR_SYNCER_ARGS\n")
	// The secrets are variables the binary reads, never flags ExecStart expands.
	require.Equal(t, []string{"--data-dir=/x", "--port=7443"},
		envArgs(t, filepath.Join(root, "etc/kubestellar/server.env"), "KUBESTELLAR_ARGS"))
	require.Equal(t, []string{endpoint}, envArgs(t, filepath.Join(root, "etc/kubestellar/server.env"), "KUBESTELLAR_DATASTORE_ENDPOINT"))
	require.Equal(t, []string{"--data-dir=/var/lib/kubestellar-syncer/edge1", "--kubeconfig=" + filepath.Join(work, "rel/path"),
		"--server=https://127.0.0.1:6443", "--sync-target=edge1"},
		envArgs(t, filepath.Join(root, "etc/kubestellar/syncer-edge1.env"), "KUBESTELLAR_SYNCER_ARGS"))
	require.Equal(t, []string{token}, envArgs(t, filepath.Join(root, "etc/kubestellar/syncer-edge1.env"), "KUBESTELLAR_TOKEN"))

	t.Run("systemd-analyze verify", func(t *testing.T) {
		if _, err := exec.LookPath("systemd-analyze"); err != nil {
			t.Skip("systemd-analyze is not on PATH")
		}
		// The template as written, and an instance of it as systemd loads
		// it; verify also checks that ExecStart's binary exists.
		dir := t.TempDir()
		instance := filepath.Join(dir, "kubestellar-syncer@edge1.service")
		require.NoError(t, os.WriteFile(instance, []byte(readFile(t, syncerUnit)), 0o644))
		for _, unit := range []string{serverUnit, syncerUnit, instance} {
			out, err := exec.Command("systemd-analyze", "verify", "--man=no", unit).CombinedOutput()
			require.NoError(t, err, "systemd-analyze verify %s\n%s", unit, out)
			for _, line := range strings.Split(string(out), "\n") {
				require.NotContains(t, line, "kubestellar", "systemd-analyze verify %s warns", unit)
			}
		}
	})

	out = run("server", "uninstall", "--root", root)
	require.Contains(t, out, "removed "+serverUnit)
	out = run("syncer", "uninstall", "edge1", "--root", root)
	require.Contains(t, out, "removed "+syncerUnit)
	for p, mode := range walk(t, root) {
		require.True(t, mode.IsDir(), "%s is left after uninstall", p)
	}
	require.NotContains(t, walk(t, root), "etc/kubestellar")
}

// walk is every file and directory under root, with its permissions.
func walk(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		got[rel] = info.Mode() & (fs.ModeDir | fs.ModePerm)
		return nil
	}))
	return got
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

// envArgs sources an environment file in a shell and splits the variable
// name into words, as `ExecStart=... $name` does; a secret variable, which
// the binary reads from its environment, is not split.
func envArgs(t *testing.T, file, name string) []string {
	t.Helper()
	split := `eval "set -- \$$2"`
	if name == "KUBESTELLAR_TOKEN" || name == "KUBESTELLAR_DATASTORE_ENDPOINT" {
		split = `eval "set -- \"\$$2\""`
	}
	out, err := exec.Command("sh", "-c", `. "$1" && `+split+` && for a; do printf '%s\0' "$a"; done`,
		"sh", file, name).Output()
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}
