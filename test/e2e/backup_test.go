// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestBackupAndRestore backs up a running server's data directory with
// `kubestellar server backup`, restores it into a new one with `server
// restore`, and starts a server there: the same spaces and objects (as of
// the backup, not after), the same CA and the same tokens.
func TestBackupAndRestore(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "kept")
	const n = 25
	for i := range n {
		k.MustRun(t, "--context", "kept", "create", "configmap", fmt.Sprintf("cm-%02d", i), fmt.Sprintf("--from-literal=i=%d", i))
	}
	aliceToken := strings.TrimSpace(srv.CLIStdout(t, "token", "create", "--user", "alice"))

	// While the server serves.
	backup := filepath.Join(t.TempDir(), "kubestellar.tar.gz")
	bin := func(args ...string) (string, error) {
		out, err := exec.Command(srv.Bin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := bin("server", "backup", backup, "--data-dir", srv.DataDir)
	require.NoError(t, err, out)
	require.Contains(t, out, "backed up "+srv.DataDir+" to "+backup)
	info, err := os.Stat(backup)
	require.NoError(t, err)
	require.Positive(t, info.Size())
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the backup holds the CA's key")
	k.MustRun(t, "--context", "kept", "create", "configmap", "after-the-backup")
	srv.Stop(t)

	restored := filepath.Join(t.TempDir(), "restored")
	out, err = bin("server", "restore", backup, "--data-dir", restored)
	require.NoError(t, err, out)
	require.Contains(t, out, "kubestellar server start --data-dir "+restored)
	// Never over a data directory that holds a database.
	out, err = bin("server", "restore", backup, "--data-dir", restored)
	require.Error(t, err)
	require.Contains(t, out, "already holds a database")
	// Nor from something that is no backup.
	out, err = bin("server", "restore", filepath.Join(srv.DataDir, "admin.kubeconfig"), "--data-dir", filepath.Join(t.TempDir(), "x"))
	require.Error(t, err)
	require.Contains(t, out, "not a kubestellar backup")
	for _, secret := range []string{"pki/ca.key", "admin.token", "db/state.db"} {
		info, err := os.Stat(filepath.Join(restored, secret))
		require.NoError(t, err, secret)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "%s is the owner's only", secret)
	}
	require.Equal(t, readFile(t, filepath.Join(srv.DataDir, "pki", "ca.crt")), readFile(t, filepath.Join(restored, "pki", "ca.crt")), "the same CA")

	again := harness.StartBinary(t, restored)
	require.Contains(t, again.CLI(t, "space", "list"), "kept")
	kept := filepath.Join(t.TempDir(), "kept.kubeconfig")
	require.NoError(t, os.WriteFile(kept, []byte(again.CLIStdout(t, "kubeconfig", "--space", "kept")), 0o600))
	names := strings.Fields(harness.Kubectl{Kubeconfig: kept}.MustRun(t, "get", "configmaps", "-o", `jsonpath={.items[*].metadata.name}`))
	require.Contains(t, names, "cm-00")
	require.Contains(t, names, fmt.Sprintf("cm-%02d", n-1))
	require.NotContains(t, names, "after-the-backup", "written after the backup")
	// A token of the server before is one of the server now.
	tokenFile := filepath.Join(t.TempDir(), "alice.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(aliceToken), 0o600))
	alice := filepath.Join(t.TempDir(), "alice.kubeconfig")
	require.NoError(t, os.WriteFile(alice, []byte(again.CLIStdout(t, "kubeconfig", "--space", "kept", "--token-file", tokenFile)), 0o600))
	require.Contains(t, harness.Kubectl{Kubeconfig: alice}.MustRun(t, "auth", "whoami"), "alice")

	// A data directory without a SQLite datastore says what to do instead.
	out, err = bin("server", "backup", filepath.Join(t.TempDir(), "b.tar.gz"), "--data-dir", t.TempDir())
	require.Error(t, err)
	require.Contains(t, out, "pg_dump")
}
