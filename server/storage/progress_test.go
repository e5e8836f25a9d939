// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestProgressNeverOvertakesEvents: a progress notification at revision R
// says that the watch has been sent every event up to R, and the API
// server's watch cache takes it so (it moves its revision to R, and a
// consistent list is then served at R). An event at or below R arriving
// after it would be missed by every client that listed in between and
// watched from there. Writers under the watched prefix and elsewhere,
// watches of both, and the progress requests a watch cache sends while a
// consistent list waits, at once.
func TestProgressNeverOvertakesEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds := startSQLiteIn(ctx, t, t.TempDir())

	const writers, watches = 8, 4
	runFor := 4 * time.Second
	if testing.Short() {
		runFor = time.Second
	}
	writeCtx, stopWriting := context.WithTimeout(ctx, runFor)
	defer stopWriting()

	type result struct {
		events, progress int
		err              error
	}
	results := make(chan result, watches)
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	start, err := ds.local.Get(ctx, "/progress/")
	require.NoError(t, err)
	for i := range watches {
		prefix := fmt.Sprintf("/progress/%d/", i%2)
		ch := ds.local.Watch(watchCtx, prefix, clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1), clientv3.WithProgressNotify())
		go func() {
			var r result
			var last int64 // the highest revision the watch has been told of
			for resp := range ch {
				if resp.IsProgressNotify() {
					r.progress++
					last = max(last, resp.Header.Revision)
					continue
				}
				for _, ev := range resp.Events {
					r.events++
					if ev.Kv.ModRevision <= last && r.err == nil {
						r.err = fmt.Errorf("watch of %s: event %s at revision %d after the watch was told of revision %d",
							prefix, ev.Kv.Key, ev.Kv.ModRevision, last)
					}
					last = max(last, ev.Kv.ModRevision)
				}
			}
			results <- r
		}()
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; writeCtx.Err() == nil; i++ {
				_, _ = ds.local.Put(writeCtx, fmt.Sprintf("/progress/%d/key-%d-%d", w%3, w, i), strconv.Itoa(i))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for writeCtx.Err() == nil {
			_ = ds.local.RequestProgress(writeCtx)
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	stopWatching()
	var total result
	for range watches {
		r := <-results
		require.NoError(t, r.err)
		total.events += r.events
		total.progress += r.progress
	}
	t.Logf("%d events, %d progress notifications", total.events, total.progress)
	require.NotZero(t, total.events)
	require.NotZero(t, total.progress)
}
