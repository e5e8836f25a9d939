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

// On SQLite (our watch server), the watches that ask for no progress
// notifications (a fleet's syncers' watches of their mailboxes: thousands)
// get no progress markers and go on a stream of their own: a round of
// markers, which the watch caches ask for every 100 ms while a consistent
// list waits, goes to the caches' few watches only, and the caches' stream
// is not queued behind the syncers' events. A make bench run with 1,000
// live edges froze the caches of configmaps, namespaces and SyncTargets for
// ten minutes when every watch shared one stream and every round of
// markers went to all of them.
func TestProgressMarkersOnlyWhereAsked(t *testing.T) {
	p := startInProcess(t, false)
	ctx := p.ctx
	var quiet []clientv3.WatchChan
	for range 20 {
		quiet = append(quiet, p.client.Watch(ctx, "/quiet/", clientv3.WithPrefix()))
	}
	cache := p.client.Watch(ctx, "/busy/", clientv3.WithPrefix(), clientv3.WithProgressNotify())
	rev := p.put(t, "/busy/a", "1")
	require.Len(t, nextEvents(t, cache, 1), 1)

	marked, all := 0, 0
	require.Eventually(t, func() bool {
		p.demux.mu.Lock()
		defer p.demux.mu.Unlock()
		marked, all = 0, 0
		for _, w := range p.demux.watches.all() {
			all++
			if w.marked {
				marked++
			}
		}
		return all == len(quiet)+1
	}, time.Minute, 10*time.Millisecond, "watches subscribed: %d", all)
	require.Equal(t, 1, marked, "only the watch that asked for progress is marked")

	require.NoError(t, p.client.RequestProgress(ctx))
	deadline := time.After(time.Minute)
	for answered := false; !answered; {
		select {
		case resp := <-cache:
			answered = resp.IsProgressNotify() && resp.Header.Revision >= rev
		case <-deadline:
			t.Fatal("no answer to a progress request")
		}
	}
	for i, w := range quiet {
		select {
		case resp := <-w:
			t.Fatalf("quiet watch %d got %+v", i, resp)
		default:
		}
	}
}
