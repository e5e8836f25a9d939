// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package restore

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/storage"
)

// backup returns a backup of a data directory holding a SQLite database.
func backup(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Dir(storage.SQLitePath(dir)), 0o700))
	db, err := sql.Open("sqlite3", storage.SQLitePath(dir))
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE kine (id INTEGER PRIMARY KEY, name TEXT)")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	var buf bytes.Buffer
	_, err = server.Backup(context.Background(), dir, &buf)
	require.NoError(t, err)
	return buf.Bytes()
}

func run(t *testing.T, in io.Reader, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(iostreams.IOStreams{In: in, Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	cmd.SetOut(&errOut)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	require.Empty(t, out.String())
	return errOut.String(), err
}

func TestRestore(t *testing.T) {
	data := backup(t)
	file := filepath.Join(t.TempDir(), "ks.tar.gz")
	require.NoError(t, os.WriteFile(file, data, 0o600))

	target := filepath.Join(t.TempDir(), "restored")
	errOut, err := run(t, strings.NewReader(""), file, "--data-dir", target)
	require.NoError(t, err)
	require.FileExists(t, storage.SQLitePath(target))
	require.Contains(t, errOut, "restored "+file+" into "+target+": ")
	require.Contains(t, errOut, "start the server with: kubestellar server start --data-dir "+target)

	target = filepath.Join(t.TempDir(), "from-stdin")
	_, err = run(t, bytes.NewReader(data), "-", "--data-dir", target)
	require.NoError(t, err)
	require.FileExists(t, storage.SQLitePath(target))
}

func TestRestoreFails(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		in   string
		args []string
		err  string
	}{
		{name: "no --data-dir", args: []string{"-"}, err: `required flag(s) "data-dir" not set`},
		{name: "no file", args: []string{"--data-dir", dir}, err: "accepts 1 arg(s), received 0"},
		{name: "missing file", args: []string{filepath.Join(dir, "none.tar.gz"), "--data-dir", dir}, err: "FILE: open "},
		{name: "not a backup", in: "hello", args: []string{"-", "--data-dir", filepath.Join(dir, "x")}, err: "not a kubestellar backup (gzip)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, strings.NewReader(tc.in), tc.args...)
			require.ErrorContains(t, err, tc.err)
		})
	}
}
