// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/k3s-io/kine/pkg/server"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"
)

// watchBuffer is how many batches of events a watch may fall behind
// before it is ended (and its client starts it again from where it was),
// as kine's own broadcaster allows.
const watchBuffer = 100

// demuxLog is kine's SQL log with every watch served from one
// subscription to it, each batch of events handed only to the watches
// whose key range it touches.
//
// kine hands every batch it polls from the database to every watch, each
// in a goroutine of its own that then keeps what is in its range. The API
// server has a watch per resource (86 of them in an idle server), so that
// each write woke 86 goroutines, nearly all to find nothing of theirs.
// Under a tenant's flood of writes the Go scheduler's run queues filled
// with them, and every other request waited its turn behind them at each
// of its steps: an execution trace of make bench's noisy neighbour showed
// these wake-ups as nearly all the time goroutines waited to run, and
// one goroutine that wakes only the watches a batch concerns cut that
// waiting by an order of magnitude.
//
// It also tells the in-process client's watches of their progress, in
// order with their events (progressMarker): kine's own progress
// notifications can overtake events.
type demuxLog struct {
	logstructured.Log
	// ctx is the backend's: the subscription lasts as long as it does.
	ctx context.Context
	// progress asks dispatch for progress markers (requestProgress); one
	// request stands for any number made meanwhile.
	progress chan struct{}
	// markEvery is how often dispatch sends the markers unasked (kine
	// sends its periodic notifications every notifyInterval, but only to
	// the watches that ask for them, which the demultiplexer cannot tell
	// apart: the watch caches' consistent reads ask when they need one).
	markEvery time.Duration
	// markGap is the least time between two rounds of markers: a round
	// goes to every watch (a fleet's syncers each hold a few), and the
	// watch caches ask every 100 ms while a consistent read waits, one
	// cache after another. A request within markGap of the last round is
	// answered markGap after it, as kine answers every 100 ms.
	markGap time.Duration

	mu sync.Mutex
	// subscribed is set while dispatch is receiving the subscription.
	subscribed bool
	// watches are indexed by the shape of their range, so that the
	// watches of an event's key are a few map lookups away however many
	// there are (a fleet's syncers each watch their mailbox's range).
	watches watchIndex
}

type rangeWatch struct {
	key, end string
	events   chan []*server.Event
	// marked: the watch is the in-process client's (withProgressMarkers),
	// which turns progress markers into progress notifications.
	marked bool
	// skip, when set, leaves out the events of the keys it reports
	// (mailboxesLeftOut).
	skip func(key string) bool
}

func newDemuxLog(ctx context.Context, log logstructured.Log) *demuxLog {
	return &demuxLog{Log: log, ctx: ctx, watches: newWatchIndex(), progress: make(chan struct{}, 1),
		markEvery: time.Minute, markGap: 100 * time.Millisecond}
}

// requestProgress asks for a progress marker to every marked watch, at
// the revision of the last batch handed to the watches. It never waits.
//
// kine answers an etcd progress request with one progress notification
// to every watch of the stream, sent by a goroutine of its own once each
// watch's goroutine is idle. An idle goroutine may still have events on
// their way to it (kine polls, broadcasts, and filters in goroutines of
// its own, and so does this demultiplexer), so the notification could
// arrive before events at or below its revision. The API server's watch
// cache takes a notification at face value: it moves to that revision,
// serves a consistent list at it, and a client that lists then and watches
// from there never sees the late event (make bench once saw one Space of
// a thousand stay not Ready in a client's view for minutes;
// TestProgressNeverOvertakesEvents catches it in seconds). A marker goes
// down the same channel as the watch's events, after every event up to
// its revision, so it cannot overtake them.
func (l *demuxLog) requestProgress() {
	select {
	case l.progress <- struct{}{}:
	default:
	}
}

// Watch returns the batches of events in [key, end) (or of key alone, or
// of every key for ""; kine's ranges) from now until ctx is done. The
// channel is closed when the watch ends: when ctx is done, when the watch
// falls watchBuffer batches behind, or when the subscription ends.
func (l *demuxLog) Watch(ctx context.Context, key, end string) <-chan []*server.Event {
	w := &rangeWatch{key: key, end: end, events: make(chan []*server.Event, watchBuffer), marked: progressMarkers(ctx), skip: mailboxesLeftOut(ctx)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.subscribed {
		// Subscribed here, before Watch returns, so that the caller sees
		// every event from now on (kine's LogStructured watches first and
		// then reads what came before, dropping what it sees twice).
		in := l.Log.Watch(l.ctx)
		if in == nil {
			// kine could not subscribe (the database did not answer):
			// the watch ends at once, and its client tries again.
			close(w.events)
			return w.events
		}
		l.subscribed = true
		go l.dispatch(in)
	}
	l.watches.add(w)
	// An AfterFunc rather than a goroutine waiting on ctx per watch.
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.end(w)
	})
	return w.events
}

// dispatch hands each batch of the subscription to the watches whose range
// it touches, without ever waiting for one: a watch whose buffer is full
// is ended, as kine's broadcaster ends a slow subscriber, so that it
// cannot hold up the others.
//
// Between batches it sends progress markers when asked (requestProgress)
// and every markEvery, at the revision of the last event handed on: every
// event up to it is in the watches' channels before the marker.
func (l *demuxLog) dispatch(in <-chan server.EventBatch) {
	var handed int64 // the revision of the last event handed on
	tick := time.NewTicker(l.markEvery)
	defer tick.Stop()
	var marked time.Time       // the last round of markers
	var later <-chan time.Time // a request waiting for markGap to pass
	mark := func(now time.Time) {
		l.mark(handed)
		marked, later = now, nil
	}
	for {
		var batch []*server.Event
		select {
		case b, ok := <-in:
			if !ok {
				l.ended()
				return
			}
			batch = b.Events
			// Every event up to the poll's revision is in this batch or
			// was in one before (fill records are not sent).
			handed = max(handed, b.CurrentRev)
		case <-l.progress:
			if wait := l.markGap - time.Since(marked); wait > 0 {
				if later == nil {
					later = time.After(wait)
				}
				continue
			}
			mark(time.Now())
			continue
		case now := <-later:
			mark(now)
			continue
		case now := <-tick.C:
			mark(now)
			continue
		}
		for _, e := range batch {
			if e != nil && e.KV != nil {
				handed = max(handed, e.KV.ModRevision)
			}
		}
		l.mu.Lock()
		if len(batch) == 1 {
			// The usual batch: handed on as it is, shared, as kine
			// shares it between its subscribers.
			l.watches.matching(batch[0], func(w *rangeWatch) { l.send(w, batch) })
		} else {
			parts := map[*rangeWatch][]*server.Event{}
			for _, e := range batch {
				l.watches.matching(e, func(w *rangeWatch) { parts[w] = append(parts[w], e) })
			}
			for w, part := range parts {
				if len(part) == len(batch) {
					part = batch
				}
				l.send(w, part)
			}
		}
		l.mu.Unlock()
	}
}

// mark sends every marked watch a progress marker at revision rev (0
// before the first batch: the watch server then reports the revision its
// watch has reached by itself, its first read's). A watch
// whose buffer is full gets none: it has events on their way, and the
// next request marks it.
func (l *demuxLog) mark(rev int64) {
	marker := []*server.Event{{KV: &server.KeyValue{Key: progressMarkerKey, ModRevision: rev, CreateRevision: rev}}}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.watches.all() {
		if !w.marked {
			continue
		}
		select {
		case w.events <- marker:
		default:
		}
	}
}

// ended ends every watch once the subscription ended: the backend is
// stopping, or dispatch itself fell behind kine's poll. The next watch
// subscribes again; the watches' clients start again from the revision
// they had reached, so that nothing is lost.
func (l *demuxLog) ended() {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := l.watches.all()
	if l.ctx.Err() == nil {
		klog.FromContext(l.ctx).Info("The datastore's watch subscription ended; every watch starts again from where it was", "watches", len(all))
	}
	for _, w := range all {
		l.end(w)
	}
	l.subscribed = false
}

// send hands a watch its events, or ends it if it is watchBuffer batches
// behind. l.mu is held.
func (l *demuxLog) send(w *rangeWatch, events []*server.Event) {
	select {
	case w.events <- events:
	default:
		klog.FromContext(l.ctx).Info("Ending a datastore watch that fell behind; its client watches again from where it was",
			"key", w.key, "end", w.end, "batches", watchBuffer)
		l.end(w)
	}
}

// end closes a watch's channel once. l.mu is held.
func (l *demuxLog) end(w *rangeWatch) {
	if l.watches.remove(w) {
		close(w.events)
	}
}

// watchIndex holds watches by the shape of their range, as kine's ranges
// go (server.Event.InRange): a single key; a prefix (the API server's
// ranges: a key ending in "/" and the end that bounds every key with that
// prefix); anything else, every key ("") included.
type watchIndex struct {
	exact, prefix map[string]map[*rangeWatch]struct{}
	other         map[*rangeWatch]struct{}
}

func newWatchIndex() watchIndex {
	return watchIndex{exact: map[string]map[*rangeWatch]struct{}{}, prefix: map[string]map[*rangeWatch]struct{}{}, other: map[*rangeWatch]struct{}{}}
}

// bucket is where a watch belongs: one of the maps of exact or prefix
// and its key, or other.
func (x watchIndex) bucket(w *rangeWatch) (map[string]map[*rangeWatch]struct{}, string) {
	switch {
	case w.key == "":
		return nil, ""
	case w.end == "":
		return x.exact, w.key
	case strings.HasSuffix(w.key, "/") && w.end == clientv3.GetPrefixRangeEnd(w.key):
		return x.prefix, w.key
	}
	return nil, ""
}

func (x watchIndex) add(w *rangeWatch) {
	m, k := x.bucket(w)
	if m == nil {
		x.other[w] = struct{}{}
		return
	}
	if m[k] == nil {
		m[k] = map[*rangeWatch]struct{}{}
	}
	m[k][w] = struct{}{}
}

// remove takes a watch out, and reports whether it was in.
func (x watchIndex) remove(w *rangeWatch) bool {
	m, k := x.bucket(w)
	if m == nil {
		_, ok := x.other[w]
		delete(x.other, w)
		return ok
	}
	_, ok := m[k][w]
	delete(m[k], w)
	if len(m[k]) == 0 {
		delete(m, k)
	}
	return ok
}

// matching calls f with every watch whose range holds e's key: the
// watches of the key itself, of each of its prefixes that ends in "/",
// and those of other ranges that hold it.
func (x watchIndex) matching(e *server.Event, f func(*rangeWatch)) {
	if e == nil || e.KV == nil {
		return
	}
	key := e.KV.Key
	for w := range x.exact[key] {
		if w.skip == nil || !w.skip(key) {
			f(w)
		}
	}
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			for w := range x.prefix[key[:i+1]] {
				if w.skip == nil || !w.skip(key) {
					f(w)
				}
			}
		}
	}
	for w := range x.other {
		if e.InRange(w.key, w.end) && (w.skip == nil || !w.skip(key)) {
			f(w)
		}
	}
}

func (x watchIndex) all() []*rangeWatch {
	var out []*rangeWatch
	for _, m := range []map[string]map[*rangeWatch]struct{}{x.exact, x.prefix} {
		for _, ws := range m {
			for w := range ws {
				out = append(out, w)
			}
		}
	}
	for w := range x.other {
		out = append(out, w)
	}
	return out
}
