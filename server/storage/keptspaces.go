// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"context"
	"strings"

	"github.com/kubestellar/kubestellar/spaces"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// keptSpacesWatcher is the Watcher of the API server's storage's clients
// (the in-process client, and those of an etcd cluster: etcdClients, with
// no progress). A watch whose context says which spaces it keeps
// (spaces.WithKeptSpaces: a watch cache keeps every space but the
// mailboxes) gets the events of those spaces alone, chosen by key before
// the API server's storage decodes anything.
// Without it, the cache of ConfigMaps decoded every copy a fan-out wrote,
// only to drop it.
//
// A left-out event that ends a response becomes a progress notification at
// its revision, which the storage hands on as a bookmark: the cache's
// revision moves past a mailbox's write at once, as when the cache dropped
// the event itself, and a consistent list after it does not wait for the
// datastore's next progress report.
//
// With progress set (kine on SQLite), a progress request asks the
// datastore's watch demultiplexer for progress markers, which arrive in
// order with each watch's events and become its progress notifications
// the same way, and kine's own notifications, which may overtake events
// (demuxLog.requestProgress), are dropped.
type keptSpacesWatcher struct {
	clientv3.Watcher
	progress func()
}

// RequestProgress asks for a progress notification on every watch.
func (w keptSpacesWatcher) RequestProgress(ctx context.Context) error {
	if w.progress == nil {
		return w.Watcher.RequestProgress(ctx)
	}
	w.progress()
	return nil
}

func (w keptSpacesWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	// A stream of its own for the watches that ask for no progress (see
	// withoutProgressStream).
	ctx = withoutProgressStream(ctx, opts)
	in := w.Watcher.Watch(ctx, key, opts...)
	keep := spaces.KeptSpaces(ctx)
	// Only a watch that asked for progress is on a marked stream.
	marked := w.progress != nil && asksProgress(opts)
	if keep == nil && !marked {
		return in
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		prefix := []byte(key)
		for resp := range in {
			if marked && resp.IsProgressNotify() {
				continue // kine's, which may overtake events
			}
			for _, r := range keptOnly(resp, prefix, keep) {
				select {
				case out <- r:
				case <-ctx.Done():
					// The etcd client stops sending once the context
					// is done, and closes in.
					return
				}
			}
		}
	}()
	return out
}

// keptOnly returns what a watch that keeps the spaces keep (every space,
// when nil) accepts of resp: resp itself when every event is kept (or it
// has none: a progress notification, the watch's creation, its end); else
// the events kept, if any, then, if the last event was left out, a
// progress notification at its revision. Progress markers are left out.
func keptOnly(resp clientv3.WatchResponse, prefix []byte, keep func(space string) bool) []clientv3.WatchResponse {
	var kept []*clientv3.Event
	for i, ev := range resp.Events {
		if keptEvent(ev, prefix, keep) {
			if kept != nil {
				kept = append(kept, ev)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]*clientv3.Event, 0, len(resp.Events)), resp.Events[:i]...)
		}
	}
	if kept == nil {
		return []clientv3.WatchResponse{resp}
	}
	var out []clientv3.WatchResponse
	if len(kept) > 0 {
		r := resp
		r.Events = kept
		out = append(out, r)
	}
	if last := resp.Events[len(resp.Events)-1]; len(kept) == 0 || kept[len(kept)-1] != last {
		// A header of its own: the response's is a pointer, shared with
		// the events kept.
		header := &etcdserverpb.ResponseHeader{}
		if resp.Header != nil {
			header = proto.Clone(resp.Header).(*etcdserverpb.ResponseHeader)
		}
		header.Revision = last.Kv.ModRevision
		progress := clientv3.WatchResponse{Header: header}
		out = append(out, progress)
	}
	return out
}

// keptEvent reports whether keep keeps the space of ev's key (keptKey);
// a progress marker is never kept.
func keptEvent(ev *clientv3.Event, prefix []byte, keep func(space string) bool) bool {
	if ev.Kv == nil {
		return true
	}
	if isProgressMarker(ev.Kv.Key) {
		return false
	}
	return keep == nil || keptKey(ev.Kv.Key, prefix, keep)
}

// keptKey reports whether keep keeps the space of key: its first segment
// after prefix. A key that does not have that shape is kept.
func keptKey(key, prefix []byte, keep func(space string) bool) bool {
	rest, ok := bytes.CutPrefix(key, prefix)
	if !ok {
		return true
	}
	rest = bytes.TrimPrefix(rest, []byte("/"))
	space, _, ok := bytes.Cut(rest, []byte("/"))
	if !ok || len(space) == 0 {
		return true
	}
	return keep(string(space))
}

// keptSpacesKV is the KV of the API server's storage's clients (the
// in-process client, and those of an etcd cluster: etcdClients), which the
// storage reads ranges with: a list (through kubernetes.Client.List) and a
// watch's initial list (the watch cache's reflector streams its list: a
// watch that sends the objects first, read in the watch with KV.Get), or,
// from etcd 3.7, either of them as a range stream (GetStream). A
// range read whose context says which spaces it keeps
// (spaces.WithKeptSpaces) returns the keys of those spaces alone, chosen
// before the storage decodes anything: after a restart, the watch cache of
// ConfigMaps no longer decodes a fan-out's every copy, only to drop it.
//
// Such a read is a range of a prefix (its end is the prefix's), whose keys'
// first segment after the prefix is their space; any other read is the
// datastore's. It reads the datastore a page at a time (keptPage keys,
// however few the caller asks for), all pages at the revision of the first,
// and returns up to the caller's limit of kept keys. Its More and Count say
// whether to go on, not how much is left (as with WithoutRemainingCount):
// Count is the keys returned, plus one when the range may hold more past
// the last of them (a following page may then turn out empty).
type keptSpacesKV struct{ clientv3.KV }

// keptPage bounds the keys one read of a kept-spaces range takes from the
// datastore: a mailbox's copies are read, if not decoded, and a read with
// no limit would otherwise hold every value of the range at once.
const keptPage = 1000

func (k keptSpacesKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	keep := spaces.KeptSpaces(ctx)
	if keep == nil {
		return k.KV.Get(ctx, key, opts...)
	}
	op := clientv3.OpGet(key, opts...)
	prefix, ok := prefixOfRange(op.RangeBytes())
	if !ok || !strings.HasPrefix(key, prefix) || op.IsCountOnly() || op.IsKeysOnly() {
		return k.KV.Get(ctx, key, opts...)
	}
	limit, rev, end := op.Limit(), op.Rev(), string(op.RangeBytes())
	p := []byte(prefix)
	// Only whether more follows is needed of each read, not how much.
	read := WithoutRemainingCount(ctx)
	var out *clientv3.GetResponse
	for start := key; ; {
		resp, err := k.KV.Get(read, start, clientv3.WithRange(end), clientv3.WithLimit(keptPage), clientv3.WithRev(rev))
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = &clientv3.GetResponse{Header: resp.Header}
			if rev == 0 && resp.Header != nil {
				rev = resp.Header.Revision
			}
			if at := spaces.KeptSpacesAt(ctx); at != nil {
				// Which spaces the read keeps as of its revision.
				if keep, err = at(ctx, rev); err != nil {
					return nil, err
				}
			}
		}
		for i, kv := range resp.Kvs {
			if !keptKey(kv.Key, p, keep) {
				continue
			}
			out.Kvs = append(out.Kvs, kv)
			if limit > 0 && int64(len(out.Kvs)) == limit {
				out.More = resp.More || i < len(resp.Kvs)-1
				out.Count = limit
				if out.More {
					out.Count++
				}
				return out, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			out.Count = int64(len(out.Kvs))
			return out, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// GetStream is Get as a stream of chunks, which the API server's storage
// reads a list and a watch's initial list with when the datastore has
// range streams (etcd 3.7 has; kine, in-process, answers Unimplemented and
// the storage falls back to Get). A kept-spaces read (as Get sees one)
// keeps the keys of the spaces kept alone: with a limit, it is Get's
// answer in one chunk, a page as the caller asked for; without one, it is
// the datastore's stream with the other spaces' keys taken out (keptStream),
// so that a whole range is still never held at once.
func (k keptSpacesKV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	keep := spaces.KeptSpaces(ctx)
	if keep == nil {
		return k.KV.GetStream(ctx, key, opts...)
	}
	op := clientv3.OpGet(key, opts...)
	prefix, ok := prefixOfRange(op.RangeBytes())
	if !ok || !strings.HasPrefix(key, prefix) || op.IsCountOnly() || op.IsKeysOnly() {
		return k.KV.GetStream(ctx, key, opts...)
	}
	if op.Limit() > 0 || spaces.KeptSpacesAt(ctx) != nil {
		// The datastore's own limit would count the keys left out: a page
		// of them would end the stream with none kept, and the storage
		// takes a chunk without keys that says more follows for an error.
		// Get reads on until it has the caller's limit of kept keys. (A
		// stream says its revision only at its end, too late to choose
		// the spaces kept as of it: WithKeptSpacesAt reads by Get too.)
		resp, err := k.Get(ctx, key, opts...)
		if err != nil {
			return nil, err
		}
		out := make(chan clientv3.RangeStreamResponse, 1)
		out <- clientv3.RangeStreamResponse{RangeResponse: (*etcdserverpb.RangeResponse)(resp)}
		close(out)
		return out, nil
	}
	in, err := k.KV.GetStream(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	out := make(chan clientv3.RangeStreamResponse)
	go keptStream(ctx, in, out, []byte(prefix), keep)
	return out, nil
}

// keptStream hands on the chunks of in with the keys of the spaces keep
// keeps alone, and closes out when in ends. The storage takes a chunk
// without keys that another follows for an error, so such a chunk is not
// handed on; the last chunk always is, keys or not: etcd puts the range's
// header (the revision it is read at), its count and whether the limit cut
// it short on the last chunk alone. A header of a chunk left out goes with
// the next chunk handed on, as the storage takes the first header it sees.
// An error (a chunk only the etcd client makes) is handed on as it is.
func keptStream(ctx context.Context, in clientv3.GetStreamChan, out chan<- clientv3.RangeStreamResponse, prefix []byte, keep func(space string) bool) {
	defer close(out)
	// Once out is left, in is read to its end: the etcd client's goroutine
	// that fills it ends only then (its stream ends with ctx).
	defer func() {
		for range in {
		}
	}()
	send := func(r clientv3.RangeStreamResponse) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// pending is the last chunk read, with its kept keys: it is handed on
	// when another follows, if it has keys, or when the stream ends.
	var pending *etcdserverpb.RangeResponse
	var carried *etcdserverpb.ResponseHeader
	headerSent := false
	handOn := func(c *etcdserverpb.RangeResponse) bool {
		if !headerSent && carried != nil {
			c.Header = carried
		}
		headerSent = headerSent || c.Header != nil
		return send(clientv3.RangeStreamResponse{RangeResponse: c})
	}
	for r := range in {
		if r.Err() != nil {
			// The storage's list or watch ends at the error: what is
			// pending would not be used.
			send(r)
			return
		}
		if r.RangeResponse == nil {
			continue
		}
		c := &etcdserverpb.RangeResponse{Header: r.Header, More: r.More, Count: r.Count}
		for _, kv := range r.Kvs {
			if keptKey(kv.Key, prefix, keep) {
				c.Kvs = append(c.Kvs, kv)
			}
		}
		if pending != nil {
			if len(pending.Kvs) > 0 {
				if !handOn(pending) {
					return
				}
			} else if !headerSent && carried == nil {
				carried = pending.Header
			}
		}
		pending = c
	}
	if pending != nil {
		handOn(pending)
	}
}

// prefixOfRange returns the prefix whose range ends at end, as
// clientv3.GetPrefixRangeEnd makes it, when end is such an end.
func prefixOfRange(end []byte) (string, bool) {
	if len(end) == 0 || end[len(end)-1] == 0 {
		return "", false
	}
	prefix := append([]byte(nil), end...)
	prefix[len(prefix)-1]--
	if clientv3.GetPrefixRangeEnd(string(prefix)) != string(end) {
		return "", false
	}
	return string(prefix), true
}
