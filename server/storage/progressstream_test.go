// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// On kine's own watch server (PostgreSQL, MySQL and the rest), a progress
// request is answered while a watch that did not ask for progress
// notifications sits on a quiet range beside the watch caches' (kine
// answers only once every watch of the stream has been sent the current
// revision), and that watch gets no periodic notification of its own.
func TestProgressAnsweredBesideQuietWatches(t *testing.T) {
	p := startInProcess(t, true)
	ctx := p.ctx
	quiet := p.client.Watch(ctx, "/quiet/", clientv3.WithPrefix())
	cache := p.client.Watch(ctx, "/busy/", clientv3.WithPrefix(), clientv3.WithProgressNotify())
	rev := p.put(t, "/busy/a", "1")
	require.Len(t, nextEvents(t, cache, 1), 1)

	// The watch cache asks every 100 ms while a consistent list waits.
	answered := func() bool {
		require.NoError(t, p.client.RequestProgress(ctx))
		deadline := time.After(100 * time.Millisecond)
		for {
			select {
			case resp := <-cache:
				if resp.IsProgressNotify() && resp.Header.Revision >= rev {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	start := time.Now()
	for !answered() {
		require.Less(t, time.Since(start), 3*time.Second, "no answer to a progress request (kine's periodic notification comes every %s)", notifyInterval)
	}

	// kine's periodic notifications go to the watch that asked, not to the
	// quiet one (broadcast answers, asked for above, went to both). kine
	// sends one every notifyInterval to a watch not sent anything for as
	// long: the broadcast answer counted, so the first may take two.
	// The answers to the requests above, sent by kine's goroutines, may
	// still be on their way: the window starts after 300 ms without any.
	for settled := false; !settled; {
		select {
		case <-quiet:
		case <-cache:
		case <-time.After(300 * time.Millisecond):
			settled = true
		}
	}
	deadline := time.After(2*notifyInterval + time.Second)
	periodic := 0
	for waiting := true; waiting; {
		select {
		case resp := <-quiet:
			t.Fatalf("the quiet watch got %+v", resp)
		case resp := <-cache:
			if resp.IsProgressNotify() {
				periodic++
			}
		case <-deadline:
			waiting = false
		}
	}
	require.Positive(t, periodic, "kine's periodic notification to the watch that asked")
}

// The etcd client's option is read where it keeps it: an etcd upgrade
// that moves it fails here, not in the consistent lists' waits.
func TestAsksProgress(t *testing.T) {
	require.True(t, asksProgress([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithProgressNotify()}))
	require.False(t, asksProgress([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(3)}))
	require.False(t, asksProgress(nil))
}
