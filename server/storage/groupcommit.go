// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	kinegeneric "github.com/k3s-io/kine/pkg/drivers/generic"
	"github.com/k3s-io/kine/pkg/metrics"
	"github.com/k3s-io/kine/pkg/server"
	"k8s.io/klog/v2"
)

// Group commit bounds: the most rows, and the most bytes of values, one
// transaction takes. A batch holds SQLite's write lock for its whole
// transaction, and its writers wait for its commit: a few milliseconds
// at these bounds.
const (
	groupMaxRows  = 128
	groupMaxBytes = 8 << 20
)

// sqliteDialect is kine's SQLite dialect with two changes: concurrent
// inserts (every create, update and delete kine makes is a row inserted)
// are committed together, in one transaction, as a database's group
// commit does (below), and a page of a range is read without reading the
// rest of the range (sqlitelist.go).
//
// SQLite has one writer, and a transaction's commit is most of an
// insert's cost: it appends every page the insert changed to the
// write-ahead log (the row, its overflow pages for a value over a page,
// and a leaf of each of the table's four indexes), and every thousand
// pages SQLite checkpoints the log into the database, with an fsync. In a
// fan-out of 100,000 copies the writers queued for the lock (eleven on
// average, in an execution trace) while its holder spent most of its time
// in those page writes. Inserts committed together write the pages they
// share once.
//
// Each insert is kine's own statement, run in the order the writers came
// in; what a writer gets back (its row's revision, or kine's error) is what
// it would have got alone. A row refused by the table's unique index (two
// writers creating one key, or updating one revision) fails alone: SQLite
// aborts the statement, not the transaction. Any other failure rolls the
// transaction back, and its inserts are made again one at a time, as kine
// makes them. An insert whose writer has given up by its turn is not made.
// A lone writer's insert is kine's, with nothing waited for.
type sqliteDialect struct {
	server.Dialect
	g *kinegeneric.Generic
	// inserts takes writers' inserts to run; stopped is closed when run
	// returns, after which an insert is kine's.
	inserts chan *insertReq
	stopped chan struct{}
	// groups counts the transactions of more than one insert (for tests).
	groups atomic.Int64
}

// insertReq is one writer's insert and, once done is closed, its result.
type insertReq struct {
	ctx              context.Context
	key              string
	create, delete   bool
	previousRevision int64
	ttl              int64
	value            []byte

	id   int64
	err  error
	done chan struct{}
}

// args are the arguments of kine's InsertSQL, as
// kinegeneric.Generic.Insert passes them.
func (r *insertReq) args() []any {
	cVal, dVal := 0, 0
	if r.create {
		cVal = 1
	}
	if r.delete {
		dVal = 1
	}
	return []any{r.previousRevision, r.key, cVal, dVal, r.previousRevision, r.ttl, r.value, r.key, r.previousRevision}
}

// alone makes the insert as kine makes it, unless its writer has given up.
func (r *insertReq) alone(g *kinegeneric.Generic) (int64, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return g.Insert(r.ctx, r.key, r.create, r.delete, r.previousRevision, r.ttl, r.value)
}

// newSQLiteDialect wraps g, and runs its committer until ctx ends.
func newSQLiteDialect(ctx context.Context, wg *sync.WaitGroup, g *kinegeneric.Generic) *sqliteDialect {
	d := &sqliteDialect{Dialect: g, g: g, inserts: make(chan *insertReq), stopped: make(chan struct{})}
	wg.Go(func() { d.run(ctx) })
	return d
}

// Insert implements server.Dialect.
func (d *sqliteDialect) Insert(ctx context.Context, key string, create, delete bool, previousRevision int64, ttl int64, value []byte) (int64, error) {
	r := &insertReq{ctx: ctx, key: key, create: create, delete: delete,
		previousRevision: previousRevision, ttl: ttl, value: value, done: make(chan struct{})}
	select {
	case d.inserts <- r:
	case <-d.stopped:
		return r.alone(d.g)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	<-r.done
	return r.id, r.err
}

// run takes an insert, then every other one waiting (within the bounds),
// and commits them, until ctx ends.
func (d *sqliteDialect) run(ctx context.Context) {
	defer close(d.stopped)
	for {
		var batch []*insertReq
		select {
		case r := <-d.inserts:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
		size := len(batch[0].value)
	gather:
		for len(batch) < groupMaxRows && size < groupMaxBytes {
			select {
			case r := <-d.inserts:
				batch = append(batch, r)
				size += len(r.value)
			default:
				break gather
			}
		}
		d.commit(ctx, batch)
		for _, r := range batch {
			close(r.done)
		}
	}
}

// commit makes a batch's inserts, together when there are several, else
// (or when together failed) one at a time, as kine makes them. A panic
// fails the inserts it stopped, never the committer: every writer of the
// server waits on it.
func (d *sqliteDialect) commit(ctx context.Context, batch []*insertReq) {
	if len(batch) > 1 {
		err := safely(ctx, func() error {
			d.g.Lock() // kine's other writes (LockWrites) wait, rather than SQLite's busy handler
			defer d.g.Unlock()
			return d.together(ctx, batch)
		})
		if err == nil {
			d.groups.Add(1)
			return
		}
		klog.FromContext(ctx).V(2).Info("inserts committed together failed; making them one at a time", "inserts", len(batch), "err", err)
	}
	for _, r := range batch {
		r.id = 0
		r.err = safely(ctx, func() (err error) {
			r.id, err = r.alone(d.g)
			return err
		})
	}
}

// safely calls fn, and returns a panic in it as an error.
func safely(ctx context.Context, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(nil, "panic writing to SQLite", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("writing to SQLite: panic: %v", p)
		}
	}()
	return fn()
}

// together makes a batch's inserts in one transaction. An error means none
// was made (the transaction is rolled back); a row the unique index refuses
// is that insert's error alone.
func (d *sqliteDialect) together(ctx context.Context, batch []*insertReq) (err error) {
	start := time.Now()
	sqlText := d.g.InsertSQL
	defer func() { metrics.ObserveSQL(start, d.errCode(err), 0, sqlText.Fill(nil)) }()
	tx, err := d.g.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed { // failed, or panicked
			_ = tx.Rollback()
		}
	}()
	stmt, err := tx.PrepareContext(ctx, sqlText.Query)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, r := range batch {
		if r.err = r.ctx.Err(); r.err != nil {
			continue // its writer has given up: not made
		}
		res, err := stmt.ExecContext(ctx, r.args()...)
		var rows int64
		if err == nil {
			rows, err = res.RowsAffected()
		}
		if err == nil && rows > 0 {
			// None: the key's latest revision was not the one expected (kine's
			// compare-and-insert), answered as kine answers it, with 0.
			r.id, err = res.LastInsertId()
		}
		if err != nil {
			if translated := d.translate(err); errors.Is(translated, server.ErrKeyExists) {
				r.err = translated
				continue
			}
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	committed = true
	return nil
}

func (d *sqliteDialect) translate(err error) error {
	if d.g.TranslateErr != nil {
		return d.g.TranslateErr(err)
	}
	return err
}

func (d *sqliteDialect) errCode(err error) string {
	if d.g.ErrCode != nil {
		return d.g.ErrCode(err)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// groupsCommitted returns how many transactions held more than one insert.
func (d *sqliteDialect) groupsCommitted() int64 {
	return d.groups.Load()
}

// BeginTx implements server.Dialect. kine writes each row through a
// transaction of its own (begin, insert, commit): a transaction whose first
// statement is an insert takes part in the group commit instead, and its
// insert returns once the group's transaction has committed, so that its
// Commit has nothing left to do. A transaction that starts with anything
// else (kine's compaction) is SQLite's, as kine makes it.
func (d *sqliteDialect) BeginTx(ctx context.Context, opts *sql.TxOptions) (server.Transaction, error) {
	return &groupTx{d: d, ctx: ctx, opts: opts}, nil
}

// groupTx is a transaction of sqliteDialect (BeginTx).
type groupTx struct {
	d    *sqliteDialect
	ctx  context.Context
	opts *sql.TxOptions
	// grouped: the first statement was an insert, made in the group.
	grouped bool
	// tx is SQLite's transaction, once a statement other than a first
	// insert came.
	tx server.Transaction
}

// real returns SQLite's transaction, begun on first use. A transaction
// whose insert was grouped has already committed: it takes no more
// statements.
func (t *groupTx) real() (server.Transaction, error) {
	if t.grouped {
		return nil, errors.New("a transaction whose insert was committed with others takes no more statements")
	}
	if t.tx == nil {
		tx, err := t.d.Dialect.BeginTx(t.ctx, t.opts)
		if err != nil {
			return nil, err
		}
		t.tx = tx
	}
	return t.tx, nil
}

func (t *groupTx) Insert(ctx context.Context, key string, created, deleted bool, previousRevision int64, ttl int64, value []byte) (int64, error) {
	if t.tx == nil && !t.grouped {
		t.grouped = true
		return t.d.Insert(ctx, key, created, deleted, previousRevision, ttl, value)
	}
	tx, err := t.real()
	if err != nil {
		return 0, err
	}
	return tx.Insert(ctx, key, created, deleted, previousRevision, ttl, value)
}

func (t *groupTx) Commit() error {
	if t.tx == nil {
		return nil // grouped (committed), or empty
	}
	return t.tx.Commit()
}

func (t *groupTx) MustCommit() {
	if t.tx != nil {
		t.tx.MustCommit()
	}
}

// Rollback ends SQLite's transaction. A grouped insert is not undone: kine
// rolls back only after an insert failed, and a failed insert was not made.
func (t *groupTx) Rollback() error {
	if t.tx == nil {
		return nil
	}
	return t.tx.Rollback()
}

func (t *groupTx) MustRollback() {
	if t.tx != nil {
		t.tx.MustRollback()
	}
}

func (t *groupTx) GetCompactRevision(ctx context.Context) (int64, error) {
	tx, err := t.real()
	if err != nil {
		return 0, err
	}
	return tx.GetCompactRevision(ctx)
}

func (t *groupTx) SetCompactRevision(ctx context.Context, revision int64) error {
	tx, err := t.real()
	if err != nil {
		return err
	}
	return tx.SetCompactRevision(ctx, revision)
}

func (t *groupTx) Compact(ctx context.Context, from, to int64) (int64, error) {
	tx, err := t.real()
	if err != nil {
		return 0, err
	}
	return tx.Compact(ctx, from, to)
}

func (t *groupTx) DeleteRevision(ctx context.Context, revision int64) error {
	tx, err := t.real()
	if err != nil {
		return err
	}
	return tx.DeleteRevision(ctx, revision)
}

func (t *groupTx) CurrentRevision(ctx context.Context) (int64, error) {
	tx, err := t.real()
	if err != nil {
		return 0, err
	}
	return tx.CurrentRevision(ctx)
}
