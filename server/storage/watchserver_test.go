// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/server"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
)

// inProcess is the in-process client of a SQLite backend, built as listen
// builds it, with the parts behind it.
type inProcess struct {
	sqliteBackendParts
	client *clientv3.Client
}

// startInProcess starts a SQLite backend in a fresh directory and the
// in-process client on it: its watches served by our watch server, or with
// kineWatches by kine's own, as on the other datastores.
func startInProcess(tb testing.TB, kineWatches bool) inProcess {
	tb.Helper()
	b := sqliteParts(tb, tb.TempDir())
	require.NoError(tb, b.backend.Start(b.ctx))
	bridge := server.New(uncountedPages{b.backend}, "unix", notifyInterval, emulatedETCDVersion)
	var client *clientv3.Client
	if kineWatches {
		client = localClient(b.ctx, bridge, bridge, nil)
	} else {
		client = localClient(b.ctx, bridge, newWatchServer(b.demux), b.demux.requestProgress)
	}
	tb.Cleanup(func() {
		_ = client.Close()
		b.stop()
	})
	return inProcess{sqliteBackendParts: b, client: client}
}

func (p inProcess) put(t *testing.T, key, value string) int64 {
	t.Helper()
	resp, err := p.client.Put(p.ctx, key, value)
	require.NoError(t, err)
	return resp.Header.Revision
}

// describeEvent renders an event as "PUT key@rev=value<prev", the
// previous value only when the event has one.
func describeEvent(e *clientv3.Event) string {
	s := fmt.Sprintf("%s %s@%d=%s", e.Type, e.Kv.Key, e.Kv.ModRevision, e.Kv.Value)
	if e.PrevKv != nil {
		s += "<" + string(e.PrevKv.Value)
	}
	return s
}

// nextEvents takes n events from a watch, failing on an error, an end or
// a minute without them.
func nextEvents(t *testing.T, w clientv3.WatchChan, n int) []string {
	t.Helper()
	var got []string
	deadline := time.After(time.Minute)
	for len(got) < n {
		select {
		case resp, ok := <-w:
			require.True(t, ok, "the watch ended after %v", got)
			require.NoError(t, resp.Err())
			for _, e := range resp.Events {
				got = append(got, describeEvent(e))
			}
		case <-deadline:
			t.Fatalf("%d events of %d within a minute: %v", len(got), n, got)
		}
	}
	return got
}

// A watch from a revision gets what came from it on in its range (the
// log's first read), then what comes live, each once, in order; a watch
// from now gets only what comes live; the filters and previous values are
// etcd's.
func TestWatchServerStartsAtItsRevision(t *testing.T) {
	p := startInProcess(t, false)
	ctx := p.ctx
	ra := p.put(t, "/t/a", "1")
	rb := p.put(t, "/t/b", "1")
	p.put(t, "/u/x", "1")
	rc := p.put(t, "/t/c", "1")

	fromB := p.client.Watch(ctx, "/t/", clientv3.WithPrefix(), clientv3.WithRev(rb), clientv3.WithPrevKV())
	fromNow := p.client.Watch(ctx, "/t/", clientv3.WithPrefix())
	deletes := p.client.Watch(ctx, "/t/", clientv3.WithPrefix(), clientv3.WithRev(ra), clientv3.WithFilterPut())
	justA := p.client.Watch(ctx, "/t/a", clientv3.WithRev(ra))

	ra2 := p.put(t, "/t/a", "2")
	// kine deletes as the API server does, in a transaction on the
	// revision the object was read at.
	del, err := p.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/t/b"), "=", rb)).
		Then(clientv3.OpDelete("/t/b")).Else(clientv3.OpGet("/t/b")).Commit()
	require.NoError(t, err)
	require.True(t, del.Succeeded)
	rd := del.Header.Revision

	require.Equal(t, []string{
		fmt.Sprintf("PUT /t/b@%d=1", rb),
		fmt.Sprintf("PUT /t/c@%d=1", rc),
		fmt.Sprintf("PUT /t/a@%d=2<1", ra2),
		fmt.Sprintf("DELETE /t/b@%d=<1", rd),
	}, nextEvents(t, fromB, 4))
	require.Equal(t, []string{fmt.Sprintf("PUT /t/a@%d=2", ra2), fmt.Sprintf("DELETE /t/b@%d=", rd)}, nextEvents(t, fromNow, 2))
	require.Equal(t, []string{fmt.Sprintf("DELETE /t/b@%d=", rd)}, nextEvents(t, deletes, 1))
	require.Equal(t, []string{fmt.Sprintf("PUT /t/a@%d=1", ra), fmt.Sprintf("PUT /t/a@%d=2", ra2)}, nextEvents(t, justA, 2))
}

// Watches started while writes flow, each from a revision of the writes
// already made, get every write from their revision on exactly once and
// in order: nothing lost and nothing twice where the first read and the
// live events meet.
func TestWatchServerHandsEveryEventOnce(t *testing.T) {
	p := startInProcess(t, false)
	ctx := p.ctx
	const writes, watches = 300, 15
	made := make(chan int64, writes)
	writeErr := make(chan error, 1)
	go func() {
		defer close(made)
		for i := range writes {
			resp, err := p.client.Put(ctx, fmt.Sprintf("/s/k%03d", i%7), fmt.Sprint(i))
			if err != nil {
				writeErr <- err
				return
			}
			made <- resp.Header.Revision
		}
	}()
	var revs []int64
	type started struct {
		from int64
		w    clientv3.WatchChan
	}
	var ws []started
	for rev := range made {
		revs = append(revs, rev)
		if len(revs)%(writes/watches/2) == 0 && len(ws) < watches {
			// From a few writes back: some come from the first read, the
			// rest live.
			from := revs[max(0, len(revs)-4)]
			ws = append(ws, started{from, p.client.Watch(ctx, "/s/", clientv3.WithPrefix(), clientv3.WithRev(from))})
		}
	}
	select {
	case err := <-writeErr:
		t.Fatal(err)
	default:
	}
	require.Len(t, revs, writes)
	require.Len(t, ws, watches)
	for _, s := range ws {
		var want []string
		for i, rev := range revs {
			if rev >= s.from {
				want = append(want, fmt.Sprintf("PUT /s/k%03d@%d=%d", i%7, rev, i))
			}
		}
		require.Equal(t, want, nextEvents(t, s.w, len(want)), "the watch from %d", s.from)
	}
}

// A watch from a compacted revision is told so, with the revision
// compacted to, as etcd tells it; one from after it is served. The
// compaction kube-apiserver's compactor records reaches a watch of its
// key as the compactor wrote it.
func TestWatchServerAnswersCompaction(t *testing.T) {
	p := startInProcess(t, false)
	ctx := p.ctx
	var revs []int64
	for i := range 6 {
		revs = append(revs, p.put(t, fmt.Sprintf("/c/k%d", i), "v"))
	}
	_, err := p.demux.Compact(ctx, revs[3])
	require.NoError(t, err)
	compacted, err := p.demux.CompactRevision(ctx)
	require.NoError(t, err)
	require.Equal(t, revs[3], compacted)

	resp := <-p.client.Watch(ctx, "/c/", clientv3.WithPrefix(), clientv3.WithRev(revs[1]))
	require.ErrorIs(t, resp.Err(), rpctypes.ErrCompacted)
	require.Equal(t, compacted, resp.CompactRevision)
	require.Equal(t, []string{fmt.Sprintf("PUT /c/k5@%d=v", revs[5])},
		nextEvents(t, p.client.Watch(ctx, "/c/", clientv3.WithPrefix(), clientv3.WithRev(revs[5])), 1))

	compactions := p.client.Watch(ctx, compactRevKey)
	require.NoError(t, (&maintainer{client: p.client}).publishCompaction(ctx, compacted))
	got := nextEvents(t, compactions, 1)
	require.Len(t, got, 1)
	require.Regexp(t, fmt.Sprintf(`^PUT %s@\d+=%d$`, compactRevKey, compacted), got[0])
	get, err := p.client.Get(ctx, compactRevKey)
	require.NoError(t, err)
	require.Len(t, get.Kvs, 1)
	require.EqualValues(t, 1, get.Kvs[0].Version, "the compactor compares versions")
}

// What the watch server tells of its watches' ends and progress, with the
// demultiplexer fed by hand: a progress marker before the demultiplexer's
// first batch reports the watch's own first read, later ones the last
// revision handed on, never going back; when the datastore's subscription
// ends, every watch ends, and the next watch subscribes again.
func TestWatchServerEndsWatchesWithTheirSubscription(t *testing.T) {
	ctx := t.Context()
	inner := &fakeLog{current: 20}
	demux := newDemuxLog(ctx, inner)
	demux.markGap = 0
	watcher := clientv3.NewWatchFromWatchClient(queuedWatchClient{WatchClient: adapter.WatchServerToWatchClient(newWatchServer(demux)), marked: true},
		clientv3.NewCtxClient(ctx))
	defer watcher.Close()
	w := watcher.Watch(ctx, "/a/", clientv3.WithPrefix())
	require.Equal(t, 1, inner.subscriptions())

	demux.requestProgress()
	require.Equal(t, []string{"PUT " + progressMarkerKey + "@20="}, nextEvents(t, w, 1), "before any batch: the watch's own read")
	inner.sendRevs("/a/", 21)
	require.Equal(t, []string{"PUT /a/21@21="}, nextEvents(t, w, 1))
	inner.sendRevs("/b/", 22)
	demux.requestProgress()
	require.Equal(t, []string{"PUT " + progressMarkerKey + "@22="}, nextEvents(t, w, 1), "progress past events of other ranges")

	inner.mu.Lock()
	close(inner.subs[0])
	inner.mu.Unlock()
	// The etcd client ends the watch's channel (it passes on no reason
	// but compaction), and its user watches again from where it was.
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case resp, ok := <-w:
			open = ok
			require.Empty(t, resp.Events)
		case <-deadline:
			t.Fatal("the watch was not ended within 10s")
		}
	}

	require.Eventually(t, func() bool {
		demux.mu.Lock()
		defer demux.mu.Unlock()
		return !demux.subscribed
	}, 10*time.Second, 10*time.Millisecond)
	again := watcher.Watch(ctx, "/a/", clientv3.WithPrefix())
	require.Equal(t, 2, inner.subscriptions())
	inner.sendRevs("/a/", 23)
	require.Equal(t, []string{"PUT /a/23@23="}, nextEvents(t, again, 1))
}

// Many watches of the in-process client make one subscription to kine's
// log (kine's own watch server makes one per watch, each woken by every
// write), and each sees its own keys' events from its revision on.
func TestWatchesShareOneSubscription(t *testing.T) {
	subscribers := func() int {
		var stacks bytes.Buffer
		require.NoError(t, pprof.Lookup("goroutine").WriteTo(&stacks, 2))
		return strings.Count(stacks.String(), "broadcaster.(*Broadcaster).subscribe.func1")
	}
	const resources = 40
	for _, kine := range []bool{false, true} {
		before := subscribers()
		p := startInProcess(t, kine)
		watchEveryResource(t, p, resources, 20)
		// Counted once every watch has had its events, by when kine's
		// leases' expiry has subscribed too.
		if kine {
			require.GreaterOrEqual(t, subscribers()-before, resources, "kine's watch server: a subscription per watch")
		} else {
			require.Equal(t, 2, subscribers()-before, "subscriptions: the demultiplexer's and kine's leases' expiry")
		}
		p.stop()
		require.Eventually(t, func() bool { return subscribers() <= before }, 10*time.Second, 10*time.Millisecond, "kine's subscriptions end with it")
	}
}

// watchEveryResource watches each of resources ranges from a revision,
// writes each events times, and checks that every watch gets exactly its
// range's events, in order.
func watchEveryResource(t *testing.T, p inProcess, resources, each int) {
	rev := p.put(t, "/registry/r00/before", "v")
	watches := make([]clientv3.WatchChan, resources)
	for r := range resources {
		watches[r] = p.client.Watch(p.ctx, fmt.Sprintf("/registry/r%02d/", r), clientv3.WithPrefix(), clientv3.WithRev(rev))
	}
	for i := range each {
		for r := range resources {
			p.put(t, fmt.Sprintf("/registry/r%02d/k%02d", r, i), "v")
		}
	}
	for r, w := range watches {
		var want []string
		if r == 0 {
			want = append(want, "PUT /registry/r00/before")
		}
		got := nextEvents(t, w, each+len(want))
		for i := range each {
			want = append(want, fmt.Sprintf("PUT /registry/r%02d/k%02d", r, i))
		}
		for i := range got {
			got[i] = got[i][:strings.Index(got[i], "@")]
		}
		require.Equal(t, want, got, "watch %d", r)
	}
}

// BenchmarkWatchDelivery times a create and its arrival at a watch of its
// key's range while other watches (of other spaces' ranges, as a fleet's
// syncers watch their mailboxes) wait, on the in-process client with
// kine's own watch server (every watch a subscriber woken by every write)
// and with ours (one subscription, demultiplexed):
//
//	go test -run '^$' -bench BenchmarkWatchDelivery ./server/storage
func BenchmarkWatchDelivery(b *testing.B) {
	logrus.SetLevel(logrus.WarnLevel)
	for _, others := range []int{100, 2000, 10000} {
		for _, kine := range []bool{true, false} {
			name := "one-subscription"
			if kine {
				name = "kine"
			}
			b.Run(fmt.Sprintf("watches=%d/%s", others, name), func(b *testing.B) {
				p := startInProcess(b, kine)
				ctx := p.ctx
				for i := range others {
					p.client.Watch(ctx, fmt.Sprintf("/registry/core/configmaps/mailbox-%05d/", i), clientv3.WithPrefix())
				}
				target := p.client.Watch(ctx, "/registry/core/configmaps/wds/", clientv3.WithPrefix())
				b.ResetTimer()
				for i := range b.N {
					key := fmt.Sprintf("/registry/core/configmaps/wds/default/cm-%d", i)
					if _, err := p.client.Put(ctx, key, "v"); err != nil {
						b.Fatal(err)
					}
					for arrived := false; !arrived; {
						resp := <-target
						for _, e := range resp.Events {
							arrived = arrived || (e.Type == mvccpb.PUT && string(e.Kv.Key) == key)
						}
					}
				}
			})
		}
	}
}
