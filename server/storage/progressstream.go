// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"reflect"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// kine's etcd watch server (on every datastore but SQLite, where
// watchServer serves the in-process client) answers a progress request
// only once every watch of the stream it came on has been sent the current
// revision, and it learns what a watch has been sent from what it sends
// it: a watch that did not ask for progress notifications is sent nothing
// until an event of its own range comes. The server's own storages (the
// controllers', the watch caches' sources, the mailboxes') watch without
// them, and on one stream with the watch caches, whose consistent lists
// wait for the answer: with one such watch on a quiet range no answer
// came, and each list waited for kine's periodic notification, up to its 5
// s interval (on PostgreSQL, one list in several waited seconds).
//
// Such watches therefore go on a stream of their own (the etcd client
// opens one per distinct outgoing metadata), where no progress request
// comes. On SQLite too: there the stream gets no progress markers
// (queuedWatchClient), so that a round of them goes to the watch caches'
// few watches, not to a fleet's thousands of watches of their mailboxes,
// and the caches' stream does not wait behind those watches' events. Having kine track them instead, by asking for notifications on
// their behalf, made kine's bookkeeping of each event quadratic in the
// watches of the stream: with thousands of watches, a write reached its
// watch several times later.
const streamMetadataKey = "kubestellar-watch-stream"

// withoutProgressStream is ctx for a watch of the in-process client on
// kine's watch server: on a stream of its own unless the watch asks for
// progress notifications.
func withoutProgressStream(ctx context.Context, opts []clientv3.OpOption) context.Context {
	if asksProgress(opts) {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, streamMetadataKey, "without-progress-notifications")
}

// withoutProgress reports whether ctx is that of a stream of watches
// that ask for no progress (withoutProgressStream).
func withoutProgress(ctx context.Context) bool {
	md, _ := metadata.FromOutgoingContext(ctx)
	return len(md.Get(streamMetadataKey)) > 0
}

// asksProgress reports whether a watch's options ask for progress
// notifications (clientv3.WithProgressNotify). The etcd client keeps that
// in a field of its own; TestAsksProgress fails if it is renamed, and until
// then every watch counts as asking, as before this stream was split.
func asksProgress(opts []clientv3.OpOption) bool {
	var op clientv3.Op
	for _, o := range opts {
		o(&op)
	}
	f := reflect.ValueOf(op).FieldByName("progressNotify")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return true
	}
	return f.Bool()
}
