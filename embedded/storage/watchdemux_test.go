package storage

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/k3s-io/kine/pkg/logstructured/sqllog"
	"github.com/k3s-io/kine/pkg/server"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeLog is a kine log whose watch subscriptions the test feeds.
type fakeLog struct {
	logstructured.Log
	mu   sync.Mutex
	subs []chan server.Events
	// refuse makes Watch fail as kine's does, with a nil channel.
	refuse bool
}

func (f *fakeLog) Watch(ctx context.Context, key, end string) <-chan server.Events {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		return nil
	}
	if key != "" || end != "" {
		panic(fmt.Sprintf("the shared subscription asked for [%q, %q), not every key", key, end))
	}
	c := make(chan server.Events)
	f.subs = append(f.subs, c)
	return c
}

func (f *fakeLog) subscriptions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func (f *fakeLog) send(batch ...string) {
	f.mu.Lock()
	c := f.subs[len(f.subs)-1]
	f.mu.Unlock()
	events := server.Events{}
	for _, key := range batch {
		events = append(events, &server.Event{KV: &server.KeyValue{Key: key}})
	}
	c <- events
}

func keys(events server.Events) string {
	var out []string
	for _, e := range events {
		out = append(out, e.KV.Key)
	}
	return strings.Join(out, " ")
}

func receive(t *testing.T, c <-chan server.Events) string {
	t.Helper()
	return receiveAs(t, c, keys)
}

// receiveAs returns the next batch of a watch as describe renders it.
func receiveAs(t *testing.T, c <-chan server.Events, describe func(server.Events) string) string {
	t.Helper()
	select {
	case events, ok := <-c:
		require.True(t, ok, "the watch ended")
		return describe(events)
	case <-time.After(10 * time.Second):
		t.Fatal("no events within 10s")
		return ""
	}
}

func ended(t *testing.T, c <-chan server.Events) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-c:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the watch did not end within 10s")
		}
	}
}

// Every watch is served from one subscription, and gets exactly the
// events of its range, in order, whoever else watches.
func TestDemuxHandsEachWatchItsRange(t *testing.T) {
	ctx := t.Context()
	inner := &fakeLog{}
	l := newDemuxLog(ctx, inner)
	configMaps := l.Watch(ctx, "/registry/configmaps/", "/registry/configmaps0")
	secrets := l.Watch(ctx, "/registry/secrets/", "/registry/secrets0")
	one := l.Watch(ctx, "/registry/configmaps/a/x", "")
	all := l.Watch(ctx, "", "")
	require.Equal(t, 1, inner.subscriptions(), "one subscription for every watch")

	inner.send("/registry/configmaps/a/x", "/registry/secrets/a/s", "/registry/configmaps/b/y")
	require.Equal(t, "/registry/configmaps/a/x /registry/configmaps/b/y", receive(t, configMaps))
	require.Equal(t, "/registry/secrets/a/s", receive(t, secrets))
	require.Equal(t, "/registry/configmaps/a/x", receive(t, one))
	require.Equal(t, "/registry/configmaps/a/x /registry/secrets/a/s /registry/configmaps/b/y", receive(t, all))

	// A batch outside a range does not reach it: the next thing the
	// ConfigMaps' watch sees is the batch after.
	inner.send("/registry/secrets/a/t")
	inner.send("/registry/configmaps/a/z")
	require.Equal(t, "/registry/configmaps/a/z", receive(t, configMaps))
	require.Equal(t, "/registry/secrets/a/t", receive(t, secrets))
	require.Equal(t, "/registry/secrets/a/t", receive(t, all))
	require.Equal(t, "/registry/configmaps/a/z", receive(t, all))
}

// The index finds, for any key, exactly the watches whose range holds it
// as kine's InRange has it, whatever the shape of the range.
func TestWatchIndexAgreesWithKine(t *testing.T) {
	keys := []string{"", "/", "/registry", "/registry/", "/registry/core/configmaps", "/registry/core/configmaps/",
		"/registry/core/configmaps/wds1", "/registry/core/configmaps/wds1/", "/registry/core/configmaps/wds1/default/a",
		"/registry/core/configmaps/wds10/default/a", "/registry/core/configmaps0", "/registry/core/secrets/wds1/default/a", "/x//y"}
	var watches []*rangeWatch
	for _, k := range keys {
		watches = append(watches, &rangeWatch{key: k}, &rangeWatch{key: k, end: clientv3.GetPrefixRangeEnd(k)})
		for _, e := range keys {
			watches = append(watches, &rangeWatch{key: k, end: e})
		}
	}
	x := newWatchIndex()
	for _, w := range watches {
		x.add(w)
	}
	for _, k := range keys {
		e := &server.Event{KV: &server.KeyValue{Key: k}}
		got := map[*rangeWatch]int{}
		x.matching(e, func(w *rangeWatch) { got[w]++ })
		for _, w := range watches {
			want := 0
			if e.InRange(w.key, w.end) {
				want = 1
			}
			require.Equal(t, want, got[w], "key %q, range [%q, %q)", k, w.key, w.end)
		}
	}
	for _, w := range watches {
		require.True(t, x.remove(w), "[%q, %q) was in", w.key, w.end)
		require.False(t, x.remove(w), "[%q, %q) is out", w.key, w.end)
	}
	require.Empty(t, x.all())
	require.Empty(t, x.exact)
	require.Empty(t, x.prefix)
}

// A watch that stops reading is ended once it is watchBuffer batches
// behind; the others go on meanwhile. A watch whose context is done ends.
func TestDemuxEndsSlowAndCanceledWatches(t *testing.T) {
	ctx := t.Context()
	inner := &fakeLog{}
	l := newDemuxLog(ctx, inner)
	slow := l.Watch(ctx, "", "")
	reader := l.Watch(ctx, "/a/", "/a0")
	canceledCtx, cancel := context.WithCancel(ctx)
	canceled := l.Watch(canceledCtx, "/b/", "/b0")
	cancel()
	ended(t, canceled)

	for i := range watchBuffer + 1 {
		key := fmt.Sprintf("/a/%d", i)
		inner.send(key)
		require.Equal(t, key, receive(t, reader))
	}
	got := 0
	for range slow {
		got++
	}
	require.Equal(t, watchBuffer, got, "the slow watch had its buffer's worth, then ended")
	inner.send("/a/after")
	require.Equal(t, "/a/after", receive(t, reader), "the reader still watches")
}

// When kine ends the subscription (its backend stopping, or the
// dispatcher falling behind its poll), every watch ends, and the next one
// subscribes again. When kine cannot subscribe, the watch ends at once.
func TestDemuxSubscribesAgain(t *testing.T) {
	ctx := t.Context()
	inner := &fakeLog{}
	l := newDemuxLog(ctx, inner)
	first := l.Watch(ctx, "", "")
	second := l.Watch(ctx, "/a/", "/a0")
	inner.mu.Lock()
	close(inner.subs[0])
	inner.mu.Unlock()
	ended(t, first)
	ended(t, second)

	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.subscribed
	}, 10*time.Second, 10*time.Millisecond)
	again := l.Watch(ctx, "/a/", "/a0")
	require.Equal(t, 2, inner.subscriptions())
	inner.send("/a/1")
	require.Equal(t, "/a/1", receive(t, again))

	refused := newDemuxLog(ctx, &fakeLog{refuse: true})
	ended(t, refused.Watch(ctx, "", ""))
}

// With kine's SQLite backend as the server builds it, many watches make
// one subscription to kine's log (one goroutine of kine's per subscriber,
// not per watch), and each sees its own keys' events from its revision on.
func TestWatchesShareOneSubscription(t *testing.T) {
	ctx, backend, _ := sqliteBackend(t)
	require.NoError(t, backend.Start(ctx))

	const resources, each = 40, 20
	rev, err := backend.Create(ctx, "/registry/r00/before", []byte("v"), 0)
	require.NoError(t, err)
	watches := make([]server.WatchResult, resources)
	for r := range resources {
		prefix := fmt.Sprintf("/registry/r%02d/", r)
		watches[r] = backend.Watch(ctx, prefix, fmt.Sprintf("/registry/r%02d0", r), rev)
	}
	var stacks bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&stacks, 2))
	require.Equal(t, 1, strings.Count(stacks.String(), "sqllog.(*SQLLog).Watch.func1"), "kine's goroutines per subscriber")

	for i := range each {
		for r := range resources {
			_, err := backend.Create(ctx, fmt.Sprintf("/registry/r%02d/k%02d", r, i), []byte("v"), 0)
			require.NoError(t, err)
		}
	}
	for r, w := range watches {
		var got []string
		for len(got) < each+btoi(r == 0) {
			select {
			case events := <-w.Events:
				for _, e := range events {
					got = append(got, strings.TrimPrefix(e.KV.Key, fmt.Sprintf("/registry/r%02d/", r)))
				}
			case <-ctx.Done():
				t.Fatalf("watch %d: %d events of %d", r, len(got), each)
			}
		}
		want := []string{}
		if r == 0 {
			want = append(want, "before")
		}
		for i := range each {
			want = append(want, fmt.Sprintf("k%02d", i))
		}
		require.Equal(t, want, got, "watch %d", r)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkWatchDelivery times a create and its arrival at a watch of its
// key's range while other watches (of other spaces' ranges, as a fleet's
// syncers watch their mailboxes) wait, with kine's SQLite backend as kine
// builds it (every watch a subscriber woken by every write) and as the
// server builds it (demuxLog):
//
//	go test -run '^$' -bench BenchmarkWatchDelivery ./embedded/storage
func BenchmarkWatchDelivery(b *testing.B) {
	logrus.SetLevel(logrus.WarnLevel)
	for _, others := range []int{100, 2000, 10000} {
		for _, shared := range []bool{false, true} {
			name := "kine"
			if shared {
				name = "one-subscription"
			}
			b.Run(fmt.Sprintf("watches=%d/%s", others, name), func(b *testing.B) {
				ctx, backend, dialect := sqliteBackend(b)
				if !shared {
					backend = logstructured.New(sqllog.New(dialect, 0, 0, 0, 0, 1000, 500))
				}
				require.NoError(b, backend.Start(ctx))
				for i := range others {
					prefix := fmt.Sprintf("/registry/core/configmaps/mailbox-%05d/", i)
					backend.Watch(ctx, prefix, prefix[:len(prefix)-1]+"0", 0)
				}
				target := backend.Watch(ctx, "/registry/core/configmaps/wds/", "/registry/core/configmaps/wds0", 0)
				b.ResetTimer()
				for i := range b.N {
					key := fmt.Sprintf("/registry/core/configmaps/wds/default/cm-%d", i)
					if _, err := backend.Create(ctx, key, []byte("v"), 0); err != nil {
						b.Fatal(err)
					}
					for arrived := false; !arrived; {
						for _, e := range <-target.Events {
							arrived = arrived || e.KV.Key == key
						}
					}
				}
			})
		}
	}
}

// sendRevs hands the subscription one batch of events at the revisions
// given, all under key.
func (f *fakeLog) sendRevs(key string, revs ...int64) {
	f.mu.Lock()
	c := f.subs[len(f.subs)-1]
	f.mu.Unlock()
	events := server.Events{}
	for _, rev := range revs {
		events = append(events, &server.Event{KV: &server.KeyValue{Key: fmt.Sprintf("%s%d", key, rev), ModRevision: rev}})
	}
	c <- events
}

// describeBatch renders a batch as "key@rev" words, a marker as
// "marker@revision it stands for".
func describeBatch(events server.Events) string {
	var out []string
	for _, e := range events {
		if e.KV.Key == progressMarkerKey {
			rev := e.KV.CreateRevision
			if e.KV.ModRevision != math.MaxInt64 {
				rev = e.KV.ModRevision
			}
			out = append(out, fmt.Sprintf("marker@%d", rev))
			continue
		}
		out = append(out, fmt.Sprintf("%s@%d", e.KV.Key, e.KV.ModRevision))
	}
	return strings.Join(out, " ")
}

func receiveBatch(t *testing.T, c <-chan server.Events) string {
	t.Helper()
	return receiveAs(t, c, describeBatch)
}

func nothing(t *testing.T, c <-chan server.Events) {
	t.Helper()
	select {
	case events := <-c:
		t.Fatalf("unexpected %s", describeBatch(events))
	case <-time.After(100 * time.Millisecond):
	}
}

// The in-process client's watches get a progress marker when asked, after
// every event handed on before the request, at the revision of the last
// of them, whatever range it was in; other watches get none.
func TestDemuxMarksProgressInOrder(t *testing.T) {
	ctx := t.Context()
	inner := &fakeLog{}
	l := newDemuxLog(ctx, inner)
	l.markEvery = time.Hour
	marked := l.Watch(withProgressMarkers(ctx), "/a/", clientv3.GetPrefixRangeEnd("/a/"))
	plain := l.Watch(ctx, "/a/", clientv3.GetPrefixRangeEnd("/a/"))

	l.requestProgress()
	nothing(t, marked) // no event handed on yet: no revision to tell

	inner.sendRevs("/a/", 5)
	inner.sendRevs("/b/", 6)
	l.requestProgress()
	require.Equal(t, "/a/5@5", receiveBatch(t, marked))
	require.Equal(t, "marker@6", receiveBatch(t, marked), "the marker is at the last revision handed on, in any range")
	require.Equal(t, "/a/5@5", receiveBatch(t, plain))
	nothing(t, plain)

	// Requests within markGap of the last round wait for the gap to pass
	// (above, the second request waited 100 ms; here the gap is an hour).
	inner3 := &fakeLog{}
	l3 := newDemuxLog(ctx, inner3)
	l3.markGap = time.Hour
	gapped := l3.Watch(withProgressMarkers(ctx), "/a/", clientv3.GetPrefixRangeEnd("/a/"))
	inner3.sendRevs("/a/", 8)
	require.Equal(t, "/a/8@8", receiveBatch(t, gapped))
	l3.requestProgress()
	require.Equal(t, "marker@8", receiveBatch(t, gapped), "the first round goes at once")
	l3.requestProgress()
	l3.requestProgress()
	nothing(t, gapped)

	// Unasked, every markEvery.
	inner2 := &fakeLog{}
	l2 := newDemuxLog(ctx, inner2)
	l2.markEvery = 10 * time.Millisecond
	periodic := l2.Watch(withProgressMarkers(ctx), "/a/", clientv3.GetPrefixRangeEnd("/a/"))
	inner2.sendRevs("/a/", 7)
	require.Equal(t, "/a/7@7", receiveBatch(t, periodic))
	require.Equal(t, "marker@7", receiveBatch(t, periodic))
}

// markedWatches gives a marker the revision it stands for, or the watch's
// last event's when that is later, and passes other watches as they are.
func TestMarkedWatchesGiveMarkersTheirRevision(t *testing.T) {
	ctx := t.Context()
	in := make(chan []*server.Event, 10)
	b := markedWatches{fakeWatchBackend{events: in}}
	wr := b.Watch(withProgressMarkers(ctx), "/a/", "", 1)
	marker := func(rev int64) *server.Event {
		return &server.Event{KV: &server.KeyValue{Key: progressMarkerKey, ModRevision: math.MaxInt64, CreateRevision: rev}}
	}
	shared := server.Events{marker(4)}
	in <- server.Events{{KV: &server.KeyValue{Key: "/a/x", ModRevision: 7}}}
	in <- shared
	in <- server.Events{{KV: &server.KeyValue{Key: "/a/y", ModRevision: 8}}, marker(9)}
	close(in)
	var got []string
	for batch := range wr.Events {
		got = append(got, describeBatch(batch))
	}
	require.Equal(t, []string{"/a/x@7", "marker@7", "/a/y@8 marker@9"}, got, "a marker never goes back behind the watch's events")
	require.Equal(t, int64(math.MaxInt64), shared[0].KV.ModRevision, "the shared marker is not changed")

	plainIn := make(chan []*server.Event)
	plain := markedWatches{fakeWatchBackend{events: plainIn}}.Watch(ctx, "/a/", "", 1)
	require.Equal(t, (<-chan []*server.Event)(plainIn), plain.Events, "an unmarked watch is the backend's")
}

type fakeWatchBackend struct {
	server.Backend
	events chan []*server.Event
}

func (f fakeWatchBackend) Watch(context.Context, string, string, int64) server.WatchResult {
	return server.WatchResult{Events: f.events}
}
