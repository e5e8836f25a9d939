// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/klog/v2"
)

// SQLite keeps every revision kine writes as a row, and frees rows only when
// kine compacts; what bounds the files on disk is done here, on a
// connection of our own to kine's database file:
//
//   - the database uses incremental auto-vacuum, so that the pages compaction
//     frees go back to the file system (reclaim) instead of staying in the
//     file at its high-water mark;
//   - the write-ahead log is checkpointed and truncated to zero bytes after
//     every compaction and whenever it grows past WALSizeLimit: SQLite's own
//     checkpoints (every 1000 pages) reuse the log from its start but never
//     shrink it, and cannot restart it while readers keep using it.

// WALSizeLimit is the size of the write-ahead log above which it is
// checkpointed and truncated (checked every walCheckInterval).
const WALSizeLimit = 64 << 20

// reclaimMinFree is the excess of free space (bytes) below which compaction
// does not bother to give pages back.
const reclaimMinFree = 4 << 20

// reclaimMaxPerRound bounds the space (bytes) one round gives back, and so
// the pages it moves and writes to the log.
const reclaimMaxPerRound = 64 << 20

// reclaimBatchPages is how many pages one incremental vacuum moves, each
// batch its own short write transaction so that kine's writes interleave.
const reclaimBatchPages = 2048

// maintenanceBusyTimeoutMillis is how long a checkpoint or a vacuum waits for
// kine's readers and writers before giving up until the next round; short,
// since a pending checkpoint holds new writers back.
const maintenanceBusyTimeoutMillis = 5000

// prepareBusyTimeoutMillis is how long prepare waits for the file, kine's
// busy timeout: nothing else should have it open then.
const prepareBusyTimeoutMillis = 30000

// sqliteFile is the database file of the SQLite datastore, opened beside
// kine with the same SQLite library (two copies of SQLite in one process
// would break each other's file locks).
type sqliteFile struct {
	path string
	db   *sql.DB
}

// sqlitePath returns the database file of a sqlite:// endpoint, or "" when
// the endpoint is not SQLite or names its file in a form we do not read
// (an SQLite URI, an in-memory database).
func sqlitePath(endpointURL string) string {
	rest, ok := strings.CutPrefix(endpointURL, "sqlite://")
	if !ok {
		return ""
	}
	path, _, _ := strings.Cut(rest, "?")
	if path == "" || strings.HasPrefix(path, "file:") || strings.Contains(path, ":memory:") {
		return ""
	}
	return path
}

// openSQLite opens path with the SQLite driver kine was built with: mattn's
// (cgo) registers "sqlite3", modernc's (no cgo) "sqlite".
func openSQLite(path string) (*sqliteFile, error) {
	driver := ""
	for _, name := range []string{"sqlite3", "sqlite"} {
		if slices.Contains(sql.Drivers(), name) {
			driver = name
			break
		}
	}
	if driver == "" {
		return nil, errors.New("no SQLite driver is linked in")
	}
	db, err := sql.Open(driver, path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return &sqliteFile{path: path, db: db}, nil
}

func (f *sqliteFile) Close() error { return f.db.Close() }

// conn returns the connection, with a busy timeout.
func (f *sqliteFile) conn(ctx context.Context, busyTimeoutMillis int) (*sql.Conn, error) {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var set int
	if err := conn.QueryRowContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeoutMillis)).Scan(&set); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func pragmaInt(ctx context.Context, conn *sql.Conn, pragma string) (int64, error) {
	var v int64
	if err := conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&v); err != nil {
		return 0, fmt.Errorf("PRAGMA %s: %w", pragma, err)
	}
	return v, nil
}

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// prepareSQLite turns incremental auto-vacuum on in the database at path,
// before kine opens it. A new database takes it at once (with WAL mode,
// which writes the header); an existing one, made by an earlier version, is
// rewritten once by VACUUM, which needs free disk space about the size of
// the database. The connection is closed afterwards: one that switched a new
// database to WAL mode keeps it from being checkpointed later.
func prepareSQLite(ctx context.Context, path string) error {
	if err := restrictSQLiteFiles(path); err != nil {
		return err
	}
	f, err := openSQLite(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.prepare(ctx)
}

func (f *sqliteFile) prepare(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	conn, err := f.conn(ctx, prepareBusyTimeoutMillis)
	if err != nil {
		return fmt.Errorf("opening %s: %w", f.path, err)
	}
	defer conn.Close()
	mode, err := pragmaInt(ctx, conn, "auto_vacuum")
	if err != nil {
		return err
	}
	if mode == autoVacuumIncremental {
		return nil
	}
	pages, err := pragmaInt(ctx, conn, "page_count")
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		return fmt.Errorf("PRAGMA auto_vacuum: %w", err)
	}
	if pages == 0 {
		var journalMode string
		if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&journalMode); err != nil {
			return fmt.Errorf("PRAGMA journal_mode: %w", err)
		}
		return nil
	}
	logger.Info("converting the datastore to incremental auto-vacuum, once; this rewrites the database file", "path", f.path, "pages", pages)
	if _, err := conn.ExecContext(ctx, "VACUUM"); err != nil {
		return fmt.Errorf("converting %s to incremental auto-vacuum (VACUUM; is there free disk space the size of the database?): %w", f.path, err)
	}
	var busy, logFrames, checkpointed int64
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &checkpointed); err != nil {
		return fmt.Errorf("checkpointing %s after VACUUM: %w", f.path, err)
	}
	return nil
}

// reclaim gives free pages of the database back to the file system: those
// beyond as many as are in use, since under a steady load the next
// interval's writes reuse about as many as compaction freed, and moving
// pages while kine writes only fills the log. So the file shrinks once the
// load drops, by at most reclaimMaxPerRound bytes a round, in batches. It
// returns the pages freed.
func (f *sqliteFile) reclaim(ctx context.Context) (int64, error) {
	conn, err := f.conn(ctx, maintenanceBusyTimeoutMillis)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	pageSize, err := pragmaInt(ctx, conn, "page_size")
	if err != nil {
		return 0, err
	}
	pages, err := pragmaInt(ctx, conn, "page_count")
	if err != nil {
		return 0, err
	}
	free, err := pragmaInt(ctx, conn, "freelist_count")
	if err != nil {
		return 0, err
	}
	excess := min(free-(pages-free), reclaimMaxPerRound/pageSize)
	if excess*pageSize < reclaimMinFree {
		return 0, nil
	}
	var freed int64
	for freed < excess {
		batch := min(excess-freed, reclaimBatchPages)
		// incremental_vacuum returns no row; Exec runs it to the end.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", batch)); err != nil {
			return freed, fmt.Errorf("PRAGMA incremental_vacuum: %w", err)
		}
		after, err := pragmaInt(ctx, conn, "freelist_count")
		if err != nil {
			return freed, err
		}
		if after >= free { // auto-vacuum is off (prepare failed or was skipped)
			return freed, nil
		}
		freed += free - after
		free = after
	}
	return freed, nil
}

// checkpoint copies the write-ahead log into the database and truncates it
// to zero bytes. It reports busy when kine's readers kept it from
// finishing within the busy timeout: the next round tries again.
func (f *sqliteFile) checkpoint(ctx context.Context) (busy bool, err error) {
	conn, err := f.conn(ctx, maintenanceBusyTimeoutMillis)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var isBusy, logFrames, checkpointed int64
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&isBusy, &logFrames, &checkpointed); err != nil {
		return false, fmt.Errorf("PRAGMA wal_checkpoint: %w", err)
	}
	return isBusy != 0, nil
}

// Sizes are the sizes of the SQLite datastore's files, in bytes.
type Sizes struct {
	DB, WAL int64
}

// sizes reads the files' sizes; a missing file counts as empty.
func (f *sqliteFile) sizes() (Sizes, error) {
	var s Sizes
	for _, file := range []struct {
		path string
		size *int64
	}{{f.path, &s.DB}, {f.path + "-wal", &s.WAL}} {
		fi, err := os.Stat(file.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return s, err
		default:
			*file.size = fi.Size()
		}
	}
	return s, nil
}

// restrictSQLiteFiles makes the database and its journal files readable by
// the server's user only (0600): it holds every Secret and token of every
// space, and a copy of the file (a backup, a support bundle) keeps the
// mode it had. SQLite gives the files it makes (-wal, -shm) the mode of
// the database file; a file made before this release is narrowed.
func restrictSQLiteFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	_ = f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("restricting %s to its owner: %w", p, err)
		}
	}
	return nil
}
