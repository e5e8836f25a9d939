// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kubestellar/kubestellar/server/storage"
)

// backupDB is the database's name in a backup, as in a data directory.
const backupDB = "db/state.db"

// backupTempPrefix names the directory a backup takes its snapshot in,
// inside the data directory.
const backupTempPrefix = ".backup-"

// skipInBackup are what a data directory holds that a backup leaves out:
// the live database (a snapshot of it goes in instead), the snapshots of
// backups (this one's, or another's running at once), the process's
// socket and lock, and logs.
func skipInBackup(rel string, d fs.DirEntry) bool {
	switch {
	case rel == "db", strings.HasPrefix(rel, backupTempPrefix):
		return true
	case rel == "kine.sock", rel == "server.lock":
		return true
	case strings.HasSuffix(rel, ".log"):
		return true
	}
	return !d.IsDir() && !d.Type().IsRegular()
}

// BackupSummary says what a backup holds.
type BackupSummary struct {
	Files         int
	DatabaseBytes int64
}

// Backup writes to w a gzipped tar of the data directory dataDir from
// which Restore makes a working data directory: a consistent snapshot of
// the SQLite datastore, taken while the server runs (or not), and the
// server's identity (CA, serving certificate, admin token and
// kubeconfig), so that syncers and users find the same server. A server on
// an external datastore (--datastore-endpoint) keeps its data there: that
// is backed up with the database's own tools.
func Backup(ctx context.Context, dataDir string, w io.Writer) (BackupSummary, error) {
	var sum BackupSummary
	db := storage.SQLitePath(dataDir)
	if _, err := os.Stat(db); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return sum, fmt.Errorf("no SQLite datastore in %s (is --data-dir right?); a server on --datastore-endpoint keeps its data in that "+
				"datastore: back it up with its own tools (pg_dump, mysqldump, etcdctl snapshot save), and this data directory with them", db)
		}
		return sum, err
	}
	tmp, err := os.MkdirTemp(dataDir, backupTempPrefix)
	if err != nil {
		return sum, fmt.Errorf("a temporary directory in %s for the database's snapshot: %w", dataDir, err)
	}
	defer os.RemoveAll(tmp)
	snapshot := filepath.Join(tmp, "state.db")
	if err := storage.SnapshotSQLite(ctx, db, snapshot); err != nil {
		return sum, err
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name, file string, mode fs.FileMode) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(mode.Perm()), Size: info.Size(), ModTime: info.ModTime(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	}
	if err := add(backupDB, snapshot, 0o600); err != nil {
		return sum, err
	}
	info, err := os.Stat(snapshot)
	if err != nil {
		return sum, err
	}
	sum.DatabaseBytes, sum.Files = info.Size(), 1
	err = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dataDir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skipInBackup(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Mode: 0o700, Typeflag: tar.TypeDir})
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum.Files++
		return add(rel, p, info.Mode())
	})
	if err != nil {
		return sum, fmt.Errorf("archiving %s: %w", dataDir, err)
	}
	if err := tw.Close(); err != nil {
		return sum, err
	}
	return sum, gz.Close()
}

// Restore makes dataDir a data directory from a backup Backup wrote. It
// never overwrites: dataDir must hold no database (an empty or new
// directory). What the archive names must stay inside dataDir, as
// regular files and directories only; files are written owner-only, as
// the server writes them.
func Restore(r io.Reader, dataDir string) (BackupSummary, error) {
	var sum BackupSummary
	if _, err := os.Stat(storage.SQLitePath(dataDir)); err == nil {
		return sum, fmt.Errorf("%s already holds a database: restore into a new or empty --data-dir, or move that one away first", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return sum, fmt.Errorf("creating --data-dir: %w", err)
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return sum, fmt.Errorf("not a kubestellar backup (gzip): %w", err)
	}
	tr := tar.NewReader(gz)
	var written []string
	undo := func(err error) (BackupSummary, error) {
		for i := len(written) - 1; i >= 0; i-- {
			_ = os.Remove(written[i])
		}
		return BackupSummary{}, err
	}
	haveDB := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return undo(fmt.Errorf("reading the backup: %w", err))
		}
		name := path.Clean(h.Name)
		if !fs.ValidPath(name) || name == "." {
			return undo(fmt.Errorf("the backup names %q, outside the data directory: refusing it", h.Name))
		}
		target := filepath.Join(dataDir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return undo(err)
			}
			continue
		case tar.TypeReg:
		default:
			return undo(fmt.Errorf("the backup holds %q, neither a file nor a directory: refusing it", h.Name))
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return undo(err)
		}
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return undo(fmt.Errorf("restoring %s: %w", name, err))
		}
		written = append(written, target)
		n, err := io.Copy(f, tr)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return undo(fmt.Errorf("restoring %s: %w", name, err))
		}
		sum.Files++
		if name == backupDB {
			haveDB, sum.DatabaseBytes = true, n
		}
	}
	if !haveDB {
		return undo(fmt.Errorf("the backup holds no %s: not a kubestellar server backup", backupDB))
	}
	return sum, nil
}
