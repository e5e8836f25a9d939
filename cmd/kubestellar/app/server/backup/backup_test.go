// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package backup

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/storage"
)

// dataDir makes a data directory holding a SQLite database.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Dir(storage.SQLitePath(dir)), 0o700))
	db, err := sql.Open("sqlite3", storage.SQLitePath(dir))
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE kine (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO kine (name) VALUES ('/registry/x')")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	return dir
}

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	cmd.SetOut(&errOut)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestBackup(t *testing.T) {
	data := dataDir(t)

	dest := t.TempDir()
	file := filepath.Join(dest, "ks.tar.gz")
	out, errOut, err := run(t, file, "--data-dir", data)
	require.NoError(t, err)
	require.Empty(t, out)
	require.Contains(t, errOut, "backed up "+data+" to "+file+": the datastore (")
	require.Equal(t, []string{"ks.tar.gz"}, entries(t, dest), "the file under its name, no temporary file left")
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	_, err = gzip.NewReader(f)
	require.NoError(t, err)

	out, errOut, err = run(t, "-", "--data-dir", data)
	require.NoError(t, err)
	require.Contains(t, errOut, "to standard output")
	_, err = gzip.NewReader(strings.NewReader(out))
	require.NoError(t, err, "the backup goes to stdout")
}

func TestBackupFails(t *testing.T) {
	dest := t.TempDir()
	_, _, err := run(t, filepath.Join(dest, "ks.tar.gz"), "--data-dir", t.TempDir())
	require.ErrorContains(t, err, "no SQLite datastore in ")
	require.Empty(t, entries(t, dest), "a failed backup leaves no file")

	_, _, err = run(t, filepath.Join(dest, "missing", "ks.tar.gz"), "--data-dir", dataDir(t))
	require.ErrorContains(t, err, "FILE: ")

	_, _, err = run(t)
	require.EqualError(t, err, "accepts 1 arg(s), received 0")
}

func TestDefaultDataDir(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cmd := NewCommand(iostreams.IOStreams{})
	require.Equal(t, server.DefaultDataDir(), cmd.Flags().Lookup("data-dir").DefValue)
}
