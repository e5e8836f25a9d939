// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestChurnDiskUsage is a measurement, not a check: it churns the SQLite
// datastore the way the API server writes to it (creates, updates and
// deletes in transactions, ConfigMap-sized values, watchers and lists
// reading meanwhile) and prints the database and log sizes as it goes.
// Run it with
//
//	KUBESTELLAR_STORAGE_CHURN=5m go test -count=1 -v -run TestChurnDiskUsage ./server/storage/
//
// (the value is how long to churn; KUBESTELLAR_STORAGE_CHURN_COMPACT sets
// the compaction interval, 30s by default, so that a few minutes see
// several compactions).
func TestChurnDiskUsage(t *testing.T) {
	duration, err := time.ParseDuration(os.Getenv("KUBESTELLAR_STORAGE_CHURN"))
	if err != nil {
		t.Skip("a measurement: set KUBESTELLAR_STORAGE_CHURN to a duration to run it")
	}
	interval := 30 * time.Second
	if v := os.Getenv("KUBESTELLAR_STORAGE_CHURN_COMPACT"); v != "" {
		interval, err = time.ParseDuration(v)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ds, err := Start(ctx, Config{DataDir: dir, CompactInterval: interval})
	require.NoError(t, err)
	defer ds.Stop()
	require.NoError(t, ds.WaitReady(ctx, ""))
	cli, err := ds.Client(ctx, 5*time.Second)
	require.NoError(t, err)
	defer cli.Close()
	dbPath := filepath.Join(dir, "db", "state.db")

	const (
		live     = 400     // objects kept, updated every wave
		perWave  = 200     // objects created, then deleted, every wave
		valueLen = 4 << 10 // a ConfigMap with a little data, as stored
	)
	value := func(wave int) string { return strconv.Itoa(wave) + strings.Repeat("x", valueLen) }

	// Readers, as the API server's watches and the controllers' reads.
	readCtx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	var readers sync.WaitGroup
	for i := range 20 {
		w := cli.Watch(readCtx, fmt.Sprintf("/registry/r%d/", i%4), clientv3.WithPrefix())
		readers.Add(1)
		go func() {
			defer readers.Done()
			for range w {
			}
		}()
	}
	readers.Add(1)
	go func() {
		defer readers.Done()
		for readCtx.Err() == nil {
			_, _ = cli.Get(readCtx, "/registry/r0/", clientv3.WithPrefix(), clientv3.WithLimit(500))
			time.Sleep(100 * time.Millisecond)
		}
	}()

	revs := map[string]int64{}
	for i := range live {
		key := fmt.Sprintf("/registry/r%d/live-%04d", i%4, i)
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value(0))).Commit()
		require.NoError(t, err)
		revs[key] = resp.Header.Revision
	}

	started := time.Now()
	fmt.Printf("%8s %6s %9s %8s %8s %10s\n", "elapsed", "waves", "revision", "db MB", "wal MB", "db+wal MB")
	report := func(waves int) {
		sizes := fileSizes(dbPath)
		resp, err := cli.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		fmt.Printf("%8s %6d %9d %8.1f %8.1f %10.1f\n", time.Since(started).Round(time.Second), waves, resp.Header.Revision,
			mb(sizes.DB), mb(sizes.WAL), mb(sizes.DB+sizes.WAL))
	}
	nextReport := started
	waves := 0
	for time.Since(started) < duration {
		if time.Now().After(nextReport) {
			report(waves)
			nextReport = nextReport.Add(30 * time.Second)
		}
		waves++
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := make(chan error, 16)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < perWave; i += 8 {
					key := fmt.Sprintf("/registry/r%d/wave-%06d-%04d", i%4, waves, i)
					resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value(waves))).Commit()
					if err == nil {
						resp, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Header.Revision)).
							Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
					}
					if err == nil && !resp.Succeeded {
						err = fmt.Errorf("%s changed before its deletion", key)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				for i := w; i < live; i += 8 {
					key := fmt.Sprintf("/registry/r%d/live-%04d", i%4, i)
					mu.Lock()
					rev := revs[key]
					mu.Unlock()
					resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
						Then(clientv3.OpPut(key, value(waves))).Else(clientv3.OpGet(key)).Commit()
					if err == nil && !resp.Succeeded {
						err = fmt.Errorf("%s changed behind the churn's back", key)
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					revs[key] = resp.Header.Revision
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		time.Sleep(time.Second)
	}
	report(waves)
	stopReaders()
	readers.Wait()
	// Idle for two compaction intervals: what the files come down to.
	t.Log("idle")
	time.Sleep(2*interval + 20*time.Second)
	report(waves)
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

type churnSizes struct{ DB, WAL int64 }

func fileSizes(dbPath string) churnSizes {
	var s churnSizes
	for _, f := range []struct {
		path string
		size *int64
	}{{dbPath, &s.DB}, {dbPath + "-wal", &s.WAL}} {
		if fi, err := os.Stat(f.path); err == nil {
			*f.size = fi.Size()
		}
	}
	return s
}
