// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/kubestellar/kubestellar/server/storage"
)

// churnOptions size the churn section.
type churnOptions struct {
	// duration is how long the datastore is churned (0 skips the section).
	duration time.Duration
	// compact is the compaction interval, short so that the churn sees
	// several.
	compact time.Duration
}

// The churn's shape: objects kept and updated every wave, objects created
// then deleted every wave, and their size (a ConfigMap with a little data,
// as stored).
const (
	churnLive    = 400
	churnPerWave = 200
	churnValue   = 4 << 10
)

// churnBench measures what the SQLite datastore's files come to under
// churn and after it: it writes to kine as the API server does (creates,
// updates and deletes in transactions conditioned on the revision, with
// watchers and lists reading meanwhile) for o.duration, printing the files'
// sizes every 30 s, then leaves it idle for two compaction intervals and
// more, and reports the database and write-ahead log at the end of the
// churn, at their largest, and after the idle time.
func churnBench(ctx context.Context, o churnOptions, progress func(string, ...any)) ([]row, error) {
	dir, err := os.MkdirTemp("", "kubestellar-churn-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ds, err := storage.Start(ctx, storage.Config{DataDir: dir, CompactInterval: o.compact})
	if err != nil {
		return nil, err
	}
	defer ds.Stop()
	if err := ds.WaitReady(ctx, ""); err != nil {
		return nil, err
	}
	cli, err := ds.Client(ctx, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	value := func(wave int) string { return strconv.Itoa(wave) + strings.Repeat("x", churnValue) }

	// Readers, as the API server's watches and the controllers' reads.
	readCtx, stopReaders := context.WithCancel(ctx)
	var readers sync.WaitGroup
	defer readers.Wait()
	defer stopReaders()
	for i := range 20 {
		w := cli.Watch(readCtx, fmt.Sprintf("/registry/r%d/", i%4), clientv3.WithPrefix())
		readers.Go(func() {
			for range w {
			}
		})
	}
	readers.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = cli.Get(readCtx, "/registry/r0/", clientv3.WithPrefix(), clientv3.WithLimit(500))
			select {
			case <-readCtx.Done():
				return
			case <-tick.C:
			}
		}
	})

	var mu sync.Mutex
	revs := map[string]int64{}
	for i := range churnLive {
		key := fmt.Sprintf("/registry/r%d/live-%04d", i%4, i)
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value(0))).Commit()
		if err != nil {
			return nil, err
		}
		revs[key] = resp.Header.Revision
	}

	progress("churn: %s of creates, updates and deletes on SQLite, compaction every %s", o.duration, o.compact)
	started := time.Now()
	var largestWAL, largestDB int64
	sizes := func(waves int) (db, wal int64) {
		if s, err := ds.FileSizes(); err == nil {
			db, wal = s.DB, s.WAL
		}
		largestWAL, largestDB = max(largestWAL, wal), max(largestDB, db)
		progress("churn: %s, %d waves: state.db %s, WAL %s", time.Since(started).Round(time.Second), waves, mib(db), mib(wal))
		return db, wal
	}
	nextReport := started
	waves := 0
	for time.Since(started) < o.duration {
		if time.Now().After(nextReport) {
			sizes(waves)
			nextReport = nextReport.Add(30 * time.Second)
		}
		waves++
		wave := waves
		g, gctx := errgroup.WithContext(ctx)
		for w := range 8 {
			g.Go(func() error {
				for i := w; i < churnPerWave; i += 8 {
					key := fmt.Sprintf("/registry/r%d/wave-%06d-%04d", i%4, wave, i)
					resp, err := cli.Txn(gctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value(wave))).Commit()
					if err == nil {
						resp, err = cli.Txn(gctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Header.Revision)).
							Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
					}
					if err == nil && !resp.Succeeded {
						err = fmt.Errorf("%s changed before its deletion", key)
					}
					if err != nil {
						return err
					}
				}
				for i := w; i < churnLive; i += 8 {
					key := fmt.Sprintf("/registry/r%d/live-%04d", i%4, i)
					mu.Lock()
					rev := revs[key]
					mu.Unlock()
					resp, err := cli.Txn(gctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
						Then(clientv3.OpPut(key, value(wave))).Else(clientv3.OpGet(key)).Commit()
					if err == nil && !resp.Succeeded {
						err = fmt.Errorf("%s changed behind the churn's back", key)
					}
					if err != nil {
						return err
					}
					mu.Lock()
					revs[key] = resp.Header.Revision
					mu.Unlock()
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		// A pause between waves, as a steady load has: the WAL's
		// truncation waits for a moment without readers.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	churned := time.Since(started)
	dbEnd, walEnd := sizes(waves)
	stopReaders()
	idle := 2*o.compact + 20*time.Second
	progress("churn: idle for %s (two compaction intervals and the WAL check)", idle)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(idle):
	}
	dbIdle, walIdle := sizes(waves)
	if dbEnd == 0 {
		return nil, errors.New("churn: no state.db in the data dir")
	}
	return []row{
		{"churn: writes", fmt.Sprintf("%d waves in %s", waves, churned.Round(time.Second)),
			fmt.Sprintf("each: %d objects of %d KiB created and deleted, %d updated; 8 writers, 20 watches and a list every 100 ms", churnPerWave, churnValue>>10, churnLive)},
		{"churn: state.db / WAL at the end of the churn", fmt.Sprintf("%s / %s", mib(dbEnd), mib(walEnd)), fmt.Sprintf("compaction every %s", o.compact)},
		{"churn: largest state.db / WAL seen", fmt.Sprintf("%s / %s", mib(largestDB), mib(largestWAL)), "sampled every 30 s; the WAL is truncated past 64 MiB"},
		{"churn: state.db / WAL after idling", fmt.Sprintf("%s / %s", mib(dbIdle), mib(walIdle)),
			fmt.Sprintf("%s later: history compacted, free pages returned, the WAL truncated", idle)},
	}, nil
}
