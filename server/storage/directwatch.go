// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/k3s-io/kine/pkg/server"
	"github.com/kubestellar/kubestellar/spaces"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/features"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	storagevalue "k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
)

// directWatches is the API server's storage of a resource on SQLite with
// the watches that ask nothing of the etcd client served straight from the
// demultiplexer (demuxLog), each by one goroutine that reads, decodes,
// filters and hands on its events.
//
// Through the etcd client a watch costs five goroutines: kube-apiserver's
// etcd3 watcher runs three (one to wait, one to receive, one to decode),
// the etcd client one per watch of its stream, and the watch server
// (watchServer) one. Every live edge holds such a watch of its mailbox,
// which the watch caches leave out, so a server with 3,000 edges held
// 15,000 of these goroutines and their stacks. Here a watch holds one.
//
// What a watch sees is what the etcd3 watcher gives: the same initial
// events, initial-events-end bookmark, filtering by predicate (an object
// that stops matching is a deletion, one that starts is an addition),
// decoding and errors. The watches that need more of the etcd client go
// through it as before: those with progress notifications (the watch
// caches' own) and those keeping some spaces only (spaces.WithKeptSpaces).
type directWatches struct {
	apiserverstorage.Interface
	demux *demuxLog
	// kv reads a watch's initial events, as the etcd3 watcher reads them.
	kv          clientv3.KV
	codec       runtime.Codec
	versioner   apiserverstorage.Versioner
	transformer storagevalue.Transformer
	newFunc     func() runtime.Object
	// pathPrefix and resourcePrefix make a key the stored key, as the
	// etcd3 store makes it.
	pathPrefix, resourcePrefix string
}

// directResults is how many decoded events a watch holds for its client.
// The etcd3 watcher holds 100, and 100 undecoded before them; here the
// demultiplexer holds the undecoded (watchBuffer batches), and a fleet's
// every edge holds a watch, so the decoded buffer is small.
const directResults = 16

// initialEventsPage is how many objects a watch's initial events read at a
// time, as the etcd3 watcher reads them.
const initialEventsPage = 10000

// Watch implements apiserverstorage.Interface.
func (d *directWatches) Watch(ctx context.Context, key string, opts apiserverstorage.ListOptions) (watch.Interface, error) {
	if opts.ProgressNotify || opts.RecordTimestamps || spaces.KeptSpaces(ctx) != nil || spaces.KeptSpacesAt(ctx) != nil {
		return d.Interface.Watch(ctx, key, opts)
	}
	prepared, err := apiserverstorage.PrepareKey(d.resourcePrefix, key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	prepared = d.pathPrefix + strings.TrimPrefix(prepared, "/")
	rev, err := d.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	w := &directWatch{store: d, key: prepared, recursive: opts.Recursive, pred: opts.Predicate, result: make(chan watch.Event, directResults)}
	if w.pred.Empty() {
		w.pred = apiserverstorage.Everything
	}
	watchList := utilfeature.DefaultFeatureGate.Enabled(features.WatchList)
	start := int64(rev)
	if start == 0 && watchList && opts.SendInitialEvents != nil && !*opts.SendInitialEvents {
		// Only the events from now on: from the current revision, the
		// database's (the demultiplexer's may lag it).
		current, err := d.GetCurrentResourceVersion(ctx)
		if err != nil {
			return nil, err
		}
		start = int64(current)
	}
	// As the etcd3 watcher: initial events for a watch from 0 without
	// SendInitialEvents (the legacy case) or one that asks for them, and
	// the bookmark that ends them when asked for with bookmarks.
	initial := (opts.SendInitialEvents == nil && rev == 0) || (watchList && opts.SendInitialEvents != nil && *opts.SendInitialEvents)
	endBookmark := watchList && opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.Predicate.AllowWatchBookmarks
	w.ctx, w.cancel = context.WithCancel(ctx)
	go w.run(start, initial, endBookmark)
	// As the etcd3 watcher, the watch is initialized at once.
	utilflowcontrol.WatchInitialized(ctx)
	return w, nil
}

// directWatch is one watch of directWatches.
type directWatch struct {
	store     *directWatches
	key       string
	recursive bool
	pred      apiserverstorage.SelectionPredicate
	ctx       context.Context
	cancel    context.CancelFunc
	result    chan watch.Event
}

func (w *directWatch) Stop()                          { w.cancel() }
func (w *directWatch) ResultChan() <-chan watch.Event { return w.result }

// run hands on the watch's events from start (exclusive) until it ends:
// its context is done, it fell behind, or an error.
func (w *directWatch) run(start int64, initial, endBookmark bool) {
	defer close(w.result)
	defer w.cancel()
	d := w.store
	end := ""
	if w.recursive {
		end = clientv3.GetPrefixRangeEnd(w.key)
	}
	// Subscribed first, so that nothing between the first read and the
	// live events is missed; what both hold is handed on once.
	live := d.demux.Watch(w.ctx, w.key, end)
	last := start // the revision of everything handed on so far
	if initial {
		if start > 0 {
			current, err := d.GetCurrentResourceVersion(w.ctx)
			if err != nil {
				w.fail(err)
				return
			}
			if uint64(start) > current {
				w.fail(apiserverstorage.NewTooLargeResourceVersionError(uint64(start), current, 1))
				return
			}
		}
		rev, ok := w.initialEvents(end)
		if !ok {
			return
		}
		last = rev
		if endBookmark {
			obj := d.newFunc()
			if err := d.versioner.UpdateObject(obj, uint64(rev)); err != nil {
				w.fail(fmt.Errorf("the bookmark's resource version: %w", err))
				return
			}
			if err := apiserverstorage.AnnotateInitialEventsEndBookmark(obj); err != nil {
				w.fail(err)
				return
			}
			if !w.send(watch.Event{Type: watch.Bookmark, Object: obj}) {
				return
			}
		}
	} else {
		batch, err := d.demux.After(w.ctx, w.key, end, start, 0)
		if errors.Is(err, server.ErrCompacted) {
			w.fail(apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old."))
			return
		}
		if err != nil {
			w.fail(err)
			return
		}
		for _, e := range batch.Events {
			if !w.handOn(e, start) {
				return
			}
		}
		last = max(start, batch.CurrentRev)
	}
	for {
		select {
		case <-w.ctx.Done():
			return
		case batch, ok := <-live:
			if !ok {
				// It fell behind, or the subscription ended: the client
				// watches again from the last revision it saw.
				return
			}
			after := last
			for _, e := range batch {
				if !w.handOn(e, after) {
					return
				}
				if e != nil && e.KV != nil && !isProgressMarker([]byte(e.KV.Key)) {
					last = max(last, e.KV.ModRevision)
				}
			}
		}
	}
}

// initialEvents hands on the objects under the watch's key as additions,
// and returns the revision they were read at.
func (w *directWatch) initialEvents(end string) (int64, bool) {
	var opts []clientv3.OpOption
	if w.recursive {
		opts = append(opts, clientv3.WithRange(end), clientv3.WithLimit(initialEventsPage))
	}
	key, rev := w.key, int64(0)
	for {
		resp, err := w.store.kv.Get(w.ctx, key, opts...)
		if err != nil {
			w.fail(err)
			return 0, false
		}
		if rev == 0 {
			rev = resp.Header.Revision
			opts = append(opts, clientv3.WithRev(rev))
		}
		for _, kv := range resp.Kvs {
			obj, err := w.decode(kv.Key, kv.Value, kv.ModRevision)
			if err != nil {
				w.fail(err)
				return 0, false
			}
			if w.matches(obj) && !w.send(watch.Event{Type: watch.Added, Object: obj}) {
				return 0, false
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, true
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// handOn hands on the event e if it comes after revision after, as the
// etcd3 watcher would have it from the etcd client, and reports whether
// the watch goes on.
func (w *directWatch) handOn(e *server.Event, after int64) bool {
	if e == nil || e.KV == nil || isProgressMarker([]byte(e.KV.Key)) || e.KV.ModRevision <= after {
		return true
	}
	ev := etcdEvent(e, true)
	created := ev.Type == mvccpb.PUT && ev.Kv.CreateRevision == ev.Kv.ModRevision
	deleted := ev.Type == mvccpb.DELETE
	if !created && ev.PrevKv == nil {
		w.fail(fmt.Errorf("event received with no previous value (key=%q, modRevision=%d, type=%s)", ev.Kv.Key, ev.Kv.ModRevision, ev.Type))
		return false
	}
	rev := ev.Kv.ModRevision
	var cur, old runtime.Object
	var err error
	if !deleted {
		if cur, err = w.decode(ev.Kv.Key, ev.Kv.Value, rev); err != nil {
			w.fail(err)
			return false
		}
	}
	everything := w.pred.Empty()
	if ev.PrevKv != nil && (deleted || !everything) {
		// The old object at the event's revision, as the etcd3 watcher
		// gives a deletion.
		if old, err = w.decode(ev.Kv.Key, ev.PrevKv.Value, rev); err != nil {
			w.fail(err)
			return false
		}
	}
	var out watch.Event
	switch {
	case deleted:
		if !w.matches(old) {
			return true
		}
		out = watch.Event{Type: watch.Deleted, Object: old}
	case created:
		if !w.matches(cur) {
			return true
		}
		out = watch.Event{Type: watch.Added, Object: cur}
	case everything:
		out = watch.Event{Type: watch.Modified, Object: cur}
	default:
		now, before := w.matches(cur), w.matches(old)
		switch {
		case now && before:
			out = watch.Event{Type: watch.Modified, Object: cur}
		case now:
			out = watch.Event{Type: watch.Added, Object: cur}
		case before:
			out = watch.Event{Type: watch.Deleted, Object: old}
		default:
			return true
		}
	}
	return w.send(out)
}

func (w *directWatch) decode(key, data []byte, rev int64) (runtime.Object, error) {
	d := w.store
	data, _, err := d.transformer.TransformFromStorage(w.ctx, data, storagevalue.DefaultContext(key))
	if err != nil {
		return nil, err
	}
	obj, err := runtime.Decode(d.codec, data)
	if err != nil {
		return nil, err
	}
	if err := d.versioner.UpdateObject(obj, uint64(rev)); err != nil {
		return nil, fmt.Errorf("versioning the object at %d: %w", rev, err)
	}
	return obj, nil
}

func (w *directWatch) matches(obj runtime.Object) bool {
	if obj == nil {
		return false
	}
	ok, err := w.pred.Matches(obj)
	return err == nil && ok
}

// send hands an event to the client, waiting for it, and reports whether
// the watch goes on.
func (w *directWatch) send(e watch.Event) bool {
	select {
	case w.result <- e:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// fail ends the watch with err as its last event, as the etcd3 watcher
// ends one, unless the watch was stopped.
func (w *directWatch) fail(err error) {
	if w.ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	w.send(watch.Event{Type: watch.Error, Object: &st})
}
