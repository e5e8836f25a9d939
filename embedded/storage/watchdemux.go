package storage

import (
	"context"
	"strings"
	"sync"

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
// of its steps. In make bench's noisy neighbour, an execution trace of 3 s
// counted 94 s of goroutines runnable and not running, 93 % of it these
// wake-ups; with one goroutine that wakes only the watches a batch
// concerns, 10 s.
type demuxLog struct {
	logstructured.Log
	// ctx is the backend's: the subscription lasts as long as it does.
	ctx context.Context

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
	events   chan server.Events
}

func newDemuxLog(ctx context.Context, log logstructured.Log) *demuxLog {
	return &demuxLog{Log: log, ctx: ctx, watches: newWatchIndex()}
}

// Watch returns the batches of events in [key, end) (or of key alone, or
// of every key for ""; kine's ranges) from now until ctx is done. The
// channel is closed when the watch ends: when ctx is done, when the watch
// falls watchBuffer batches behind, or when the subscription ends.
func (l *demuxLog) Watch(ctx context.Context, key, end string) <-chan server.Events {
	w := &rangeWatch{key: key, end: end, events: make(chan server.Events, watchBuffer)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.subscribed {
		// Subscribed here, before Watch returns, so that the caller sees
		// every event from now on (kine's LogStructured watches first and
		// then reads what came before, dropping what it sees twice).
		in := l.Log.Watch(l.ctx, "", "")
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
func (l *demuxLog) dispatch(in <-chan server.Events) {
	for batch := range in {
		l.mu.Lock()
		if len(batch) == 1 {
			// The usual batch: handed on as it is, shared, as kine
			// shares it between its subscribers.
			l.watches.matching(batch[0], func(w *rangeWatch) { l.send(w, batch) })
		} else {
			parts := map[*rangeWatch]server.Events{}
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
	// The subscription ended: the backend is stopping, or this goroutine
	// itself fell behind kine's poll. Every watch ends, and the next one
	// subscribes again; the watches' clients start again from the
	// revision they had reached, so that nothing is lost.
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
func (l *demuxLog) send(w *rangeWatch, events server.Events) {
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
		f(w)
	}
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			for w := range x.prefix[key[:i+1]] {
				f(w)
			}
		}
	}
	for w := range x.other {
		if e.InRange(w.key, w.end) {
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
