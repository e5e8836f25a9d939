package storage

import (
	"context"
	"sync"

	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/k3s-io/kine/pkg/server"
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
	watches    map[*rangeWatch]struct{}
}

type rangeWatch struct {
	key, end string
	events   chan server.Events
}

func newDemuxLog(ctx context.Context, log logstructured.Log) *demuxLog {
	return &demuxLog{Log: log, ctx: ctx, watches: map[*rangeWatch]struct{}{}}
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
	l.watches[w] = struct{}{}
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
		for w := range l.watches {
			events, ok := inRange(batch, w.key, w.end)
			if !ok {
				continue
			}
			select {
			case w.events <- events:
			default:
				klog.FromContext(l.ctx).Info("Ending a datastore watch that fell behind; its client watches again from where it was",
					"key", w.key, "end", w.end, "batches", watchBuffer)
				l.end(w)
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
	for w := range l.watches {
		l.end(w)
	}
	l.subscribed = false
}

// end closes a watch's channel once. l.mu is held.
func (l *demuxLog) end(w *rangeWatch) {
	if _, ok := l.watches[w]; ok {
		delete(l.watches, w)
		close(w.events)
	}
}

// inRange is the part of a batch in a watch's range, and whether there is
// any; a batch wholly in range is handed on as it is, shared, as kine
// shares it between its subscribers.
func inRange(batch server.Events, key, end string) (server.Events, bool) {
	n := 0
	for _, e := range batch {
		if e.InRange(key, end) {
			n++
		}
	}
	switch n {
	case 0:
		return nil, false
	case len(batch):
		return batch, true
	}
	out := make(server.Events, 0, n)
	for _, e := range batch {
		if e.InRange(key, end) {
			out = append(out, e)
		}
	}
	return out, true
}
