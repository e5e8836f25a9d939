// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/k3s-io/kine/pkg/server"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeLog is a kine log whose watch subscriptions the test feeds.
type fakeLog struct {
	logstructured.Log
	mu   sync.Mutex
	subs []chan server.EventBatch
	// refuse makes Watch fail as kine's does, with a nil channel.
	refuse bool
	// current is the revision CurrentRevision reports.
	current int64
}

func (f *fakeLog) Watch(ctx context.Context) <-chan server.EventBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		return nil
	}
	c := make(chan server.EventBatch)
	f.subs = append(f.subs, c)
	return c
}

func (f *fakeLog) CurrentRevision(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current, nil
}

// After finds nothing: every event the test makes comes live.
func (f *fakeLog) After(context.Context, string, string, int64, int64) (server.EventBatch, error) {
	return server.EventBatch{CurrentRev: f.current}, nil
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
	var events []*server.Event
	for _, key := range batch {
		events = append(events, &server.Event{KV: &server.KeyValue{Key: key}})
	}
	c <- server.EventBatch{Events: events}
}

func keys(events []*server.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.KV.Key)
	}
	return strings.Join(out, " ")
}

func receive(t *testing.T, c <-chan []*server.Event) string {
	t.Helper()
	return receiveAs(t, c, keys)
}

// receiveAs returns the next batch of a watch as describe renders it.
func receiveAs(t *testing.T, c <-chan []*server.Event, describe func([]*server.Event) string) string {
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

func ended(t *testing.T, c <-chan []*server.Event) {
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

// sendRevs hands the subscription one batch of events at the revisions
// given, all under key.
func (f *fakeLog) sendRevs(key string, revs ...int64) {
	f.mu.Lock()
	c := f.subs[len(f.subs)-1]
	f.mu.Unlock()
	var events []*server.Event
	for _, rev := range revs {
		events = append(events, &server.Event{KV: &server.KeyValue{Key: fmt.Sprintf("%s%d", key, rev), ModRevision: rev}})
	}
	c <- server.EventBatch{Events: events, CurrentRev: revs[len(revs)-1]}
}

// describeBatch renders a batch as "key@rev" words, a marker as
// "marker@revision it stands for".
func describeBatch(events []*server.Event) string {
	var out []string
	for _, e := range events {
		if e.KV.Key == progressMarkerKey {
			out = append(out, fmt.Sprintf("marker@%d", e.KV.ModRevision))
			continue
		}
		out = append(out, fmt.Sprintf("%s@%d", e.KV.Key, e.KV.ModRevision))
	}
	return strings.Join(out, " ")
}

func receiveBatch(t *testing.T, c <-chan []*server.Event) string {
	t.Helper()
	return receiveAs(t, c, describeBatch)
}

func nothing(t *testing.T, c <-chan []*server.Event) {
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
	// No event handed on yet: the marker stands for nothing, and the watch
	// server reports its own watch's first read instead.
	require.Equal(t, "marker@0", receiveBatch(t, marked))

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
