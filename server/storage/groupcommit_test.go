// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/drivers"
	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/k3s-io/kine/pkg/logstructured/sqllog"
	"github.com/k3s-io/kine/pkg/server"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// TestGroupCommit: concurrent writers' inserts are committed together, and
// each writer gets what it would have alone: its own revision for a
// create, update or delete, ErrKeyExists for a key another writer created
// first (exactly one of them wins), and nothing written when it has given
// up. Everything is there after a restart on the same SQLite file.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	ctx, backend, inserts, stop := sqliteBackendIn(t, dir)
	defer func() { stop() }()
	require.NoError(t, backend.Start(ctx))

	const writers, each = 32, 10
	value := func(key, version string) []byte {
		return append([]byte(key+" "+version+" "), bytes.Repeat([]byte("x"), 5000)...)
	}
	var (
		mu        sync.Mutex
		revisions = map[int64]string{}
		winners   int
		errs      []error
	)
	record := func(rev int64, what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			return
		}
		if other, ok := revisions[rev]; ok {
			errs = append(errs, fmt.Errorf("%s and %s both got revision %d", other, what, rev))
		}
		revisions[rev] = what
	}
	var writing sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		writing.Go(func() {
			<-start
			// Every writer races to insert one key first: kine's
			// compare-and-insert (the key's newest revision must be the
			// one expected, none) refuses all but one with revision 0, in
			// whatever transaction they land.
			rev, err := inserts.Insert(ctx, "/registry/test/shared", true, false, 0, 0, value("shared", fmt.Sprint(w)))
			switch {
			case err == nil && rev == 0:
				// refused
			case err == nil:
				record(rev, "shared create", nil)
				mu.Lock()
				winners++
				mu.Unlock()
			case !errors.Is(err, server.ErrKeyExists):
				record(0, "shared create", err)
			}
			for i := range each {
				key := fmt.Sprintf("/registry/test/w%02d-%02d", w, i)
				rev, err := backend.Create(ctx, key, value(key, "v1"), 0)
				record(rev, key+" create", err)
				if err != nil {
					return
				}
				rev, _, ok, err := backend.Update(ctx, key, value(key, "v2"), rev, 0)
				if err == nil && !ok {
					err = errors.New("update not applied")
				}
				record(rev, key+" update", err)
				if i%2 == 1 {
					rev, _, ok, err := backend.Delete(ctx, key, rev)
					if err == nil && !ok {
						err = errors.New("delete not applied")
					}
					record(rev, key+" delete", err)
				}
			}
		})
	}
	close(start)
	writing.Wait()
	require.Empty(t, errs)
	require.Equal(t, 1, winners, "exactly one writer creates the shared key")
	require.Len(t, revisions, 1+writers*each*2+writers*each/2)
	require.Positive(t, inserts.groupsCommitted(), "concurrent inserts were committed together")

	// A writer that has given up gets its context's error, and its insert
	// is not made, whether or not its turn had come.
	for i := range 20 {
		gone, cancel := context.WithCancel(ctx)
		cancel()
		key := fmt.Sprintf("/registry/test/gone-%02d", i)
		_, err := backend.Create(gone, key, []byte("never"), 0)
		require.ErrorIs(t, err, context.Canceled)
	}

	check := func(backend server.Backend) {
		t.Helper()
		_, kvs, err := backend.List(ctx, "/registry/test/", "/registry/test0", 0, 0, false)
		require.NoError(t, err)
		require.Len(t, kvs, 1+writers*each/2)
		for _, kv := range kvs {
			if kv.Key == "/registry/test/shared" {
				continue
			}
			require.Equal(t, string(value(kv.Key, "v2")), string(kv.Value), kv.Key)
		}
	}
	check(backend)

	stop()
	ctx, backend, _, stop = sqliteBackendIn(t, dir)
	require.NoError(t, backend.Start(ctx))
	check(backend)
}

// TestGroupCommitFallsBack: when a transaction of several inserts cannot
// be made, each insert is made alone, as kine makes it.
func TestGroupCommitFallsBack(t *testing.T) {
	ctx, backend, inserts := sqliteBackend(t)
	require.NoError(t, backend.Start(ctx))
	batch := newBatch(ctx, "/registry/test/k", 3)
	failed, cancel := context.WithCancel(ctx)
	cancel() // the transaction cannot begin
	inserts.commit(failed, batch)
	require.Zero(t, inserts.groupsCommitted())
	seen := map[int64]bool{}
	for _, r := range batch {
		require.NoError(t, r.err, r.key)
		require.Positive(t, r.id, r.key)
		require.False(t, seen[r.id], "revision %d given twice", r.id)
		seen[r.id] = true
	}
	_, kvs, err := backend.List(ctx, "/registry/test/", "/registry/test0", 0, 0, false)
	require.NoError(t, err)
	require.Len(t, kvs, 3)
}

// TestGroupCommitSurvivesPanics: a panic while inserts are made fails the
// insert that panicked, not its group's others nor the committer, and
// leaves kine's write lock free.
func TestGroupCommitSurvivesPanics(t *testing.T) {
	ctx, backend, dialect := sqliteBackend(t)
	require.NoError(t, backend.Start(ctx))
	batch := newBatch(ctx, "/registry/test/p", 3)
	batch[1].ctx = nil // r.ctx.Err() panics, together and alone
	dialect.commit(ctx, batch)
	require.NoError(t, batch[0].err)
	require.NoError(t, batch[2].err)
	require.ErrorContains(t, batch[1].err, "panic")
	require.True(t, dialect.g.TryLock(), "kine's write lock is free")
	dialect.g.Unlock()

	_, err := backend.Create(ctx, "/registry/test/after", []byte("v"), 0)
	require.NoError(t, err, "the committer goes on")
	_, kvs, err := backend.List(ctx, "/registry/test/", "/registry/test0", 0, 0, false)
	require.NoError(t, err)
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	require.Equal(t, []string{"/registry/test/after", "/registry/test/p0", "/registry/test/p2"}, keys)
}

// BenchmarkConcurrentCreates: creates of 5 KB values from 32 writers, kine's
// inserts one at a time (LockWrites) against committed together.
func BenchmarkConcurrentCreates(b *testing.B) {
	logrus.SetLevel(logrus.WarnLevel)
	for _, together := range []bool{false, true} {
		name := "alone"
		if together {
			name = "together"
		}
		b.Run(name, func(b *testing.B) {
			ctx, backend, inserts := sqliteBackend(b)
			if !together {
				backend = newBackendAlone(inserts)
			}
			require.NoError(b, backend.Start(ctx))
			value := bytes.Repeat([]byte("x"), 5000)
			b.SetParallelism(16) // 32 writers on 2 cores
			var n sync.Mutex
			next := 0
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n.Lock()
					next++
					key := fmt.Sprintf("/registry/test/k%08d", next)
					n.Unlock()
					if _, err := backend.Create(ctx, key, value, 0); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// newBackendAlone is a kine backend on the same database whose inserts are
// kine's own, one at a time.
func newBackendAlone(inserts *sqliteDialect) server.Backend {
	return logstructured.New(sqllog.New(inserts.g, &sync.WaitGroup{}, &drivers.Config{CompactBatchSize: 1000, PollBatchSize: 500, PollInterval: time.Second}))
}

// newBatch is n creates of keys prefix0, prefix1 and on.
func newBatch(ctx context.Context, prefix string, n int) []*insertReq {
	var batch []*insertReq
	for i := range n {
		batch = append(batch, &insertReq{ctx: ctx, key: fmt.Sprint(prefix, i), create: true, value: []byte("v")})
	}
	return batch
}
