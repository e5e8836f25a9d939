// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// archive is a gzipped tar of the given headers, each with its content.
func archive(t *testing.T, entries ...tarEntry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.header
		h.Size = int64(len(e.content))
		if h.Mode == 0 {
			h.Mode = 0o600
		}
		require.NoError(t, tw.WriteHeader(&h))
		_, err := tw.Write([]byte(e.content))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return &buf
}

type tarEntry struct {
	header  tar.Header
	content string
}

func file(name, content string) tarEntry {
	return tarEntry{header: tar.Header{Name: name, Typeflag: tar.TypeReg}, content: content}
}

// TestRestoreRefuses: a backup made by someone else must not write outside
// the data directory, make links, or pass for a backup without a
// database; and nothing is ever restored over a database.
func TestRestoreRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{name: "a path out of the data directory", entries: []tarEntry{file("db/state.db", "x"), file("../escaped", "x")}, want: "outside the data directory"},
		{name: "an absolute path", entries: []tarEntry{file("/etc/escaped", "x")}, want: "outside the data directory"},
		{name: "a symbolic link", entries: []tarEntry{{header: tar.Header{Name: "pki", Typeflag: tar.TypeSymlink, Linkname: "/etc"}}}, want: "neither a file nor a directory"},
		{name: "a hard link", entries: []tarEntry{{header: tar.Header{Name: "x", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}}}, want: "neither a file nor a directory"},
		{name: "no database", entries: []tarEntry{file("admin.token", "x")}, want: "not a kubestellar server backup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			_, err := Restore(archive(t, tc.entries...), dir)
			require.ErrorContains(t, err, tc.want)
			_, err = os.Stat(filepath.Join(parent, "escaped"))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing written outside")
			left, err := filepath.Glob(filepath.Join(dir, "*", "*"))
			require.NoError(t, err)
			files := 0
			for _, p := range left {
				if info, err := os.Stat(p); err == nil && !info.IsDir() {
					files++
				}
			}
			require.Zero(t, files, "what was written before the refusal is removed: %v", left)
		})
	}

	t.Run("not gzip", func(t *testing.T) {
		_, err := Restore(bytes.NewBufferString("apiVersion: v1\nkind: Config\n"), t.TempDir())
		require.ErrorContains(t, err, "not a kubestellar backup")
	})
	t.Run("over a database", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "db"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "db", "state.db"), []byte("mine"), 0o600))
		_, err := Restore(archive(t, file("db/state.db", "theirs")), dir)
		require.ErrorContains(t, err, "already holds a database")
		kept, err := os.ReadFile(filepath.Join(dir, "db", "state.db"))
		require.NoError(t, err)
		require.Equal(t, "mine", string(kept))
	})
	t.Run("a backup", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		sum, err := Restore(archive(t, file("db/state.db", "database"), tarEntry{header: tar.Header{Name: "pki/", Typeflag: tar.TypeDir}},
			tarEntry{header: tar.Header{Name: "pki/ca.key", Typeflag: tar.TypeReg, Mode: 0o644}, content: "key"}), dir)
		require.NoError(t, err)
		require.Equal(t, BackupSummary{Files: 2, DatabaseBytes: int64(len("database"))}, sum)
		info, err := os.Stat(filepath.Join(dir, "pki", "ca.key"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "owner-only, whatever the archive says")
	})
}

// TestBackupWithoutSQLite says what to do for a server on an external
// datastore.
func TestBackupWithoutSQLite(t *testing.T) {
	_, err := Backup(t.Context(), t.TempDir(), &bytes.Buffer{})
	require.ErrorContains(t, err, "--datastore-endpoint")
	require.ErrorContains(t, err, "pg_dump")
}

// TestBackup backs up a data directory holding a SQLite database, logs, a
// lock and the snapshot of another backup running at once: the archive
// holds the database and the identity only, and restores.
func TestBackup(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "db"), 0o700))
	db, err := sql.Open("sqlite3", filepath.Join(dir, "db", "state.db"))
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE kine (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO kine (name) VALUES ('/registry/x')")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	for name, content := range map[string]string{"pki/ca.key": "key", "admin.token": "token", "server-1.log": "log", "server.lock": "",
		".backup-other/state.db": "another backup's half-written snapshot"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}

	var buf bytes.Buffer
	sum, err := Backup(t.Context(), dir, &buf)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Files)
	archived := bytes.NewReader(buf.Bytes())
	gz, err := gzip.NewReader(archived)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	require.ElementsMatch(t, []string{"db/state.db", "pki/", "pki/ca.key", "admin.token"}, names)

	restored := filepath.Join(t.TempDir(), "restored")
	_, err = Restore(bytes.NewReader(buf.Bytes()), restored)
	require.NoError(t, err)
	db, err = sql.Open("sqlite3", filepath.Join(restored, "db", "state.db"))
	require.NoError(t, err)
	defer db.Close()
	var name string
	require.NoError(t, db.QueryRow("SELECT name FROM kine").Scan(&name))
	require.Equal(t, "/registry/x", name)
}
