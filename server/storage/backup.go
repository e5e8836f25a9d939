// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SQLitePath is where the embedded datastore keeps its database in a data
// directory.
func SQLitePath(dataDir string) string { return filepath.Join(dataDir, "db", "state.db") }

// SnapshotSQLite writes a consistent copy of the SQLite database at db to
// dst, which must not exist, while kine may be writing it: VACUUM INTO
// reads one snapshot of the database, in a read transaction that writers
// in WAL mode do not wait for, and writes it compacted.
func SnapshotSQLite(ctx context.Context, db, dst string) error {
	if _, err := os.Stat(db); err != nil {
		return err
	}
	f, err := openSQLite(db)
	if err != nil {
		return err
	}
	defer f.Close()
	conn, err := f.conn(ctx, 30_000)
	if err != nil {
		return fmt.Errorf("opening %s: %w", db, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return errors.Join(fmt.Errorf("copying %s: %w", db, err), os.Remove(dst))
	}
	return nil
}
