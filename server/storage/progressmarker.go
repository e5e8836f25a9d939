// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"sync/atomic"

	"github.com/kubestellar/kubestellar/spaces"
)

// progressMarkerKey is the key of a progress marker: an event that no
// write makes (every key kine stores starts with "/"; this one with a
// NUL), at the revision up to which its watch has been handed every
// event of its range.
const progressMarkerKey = "\x00kubestellar/progress"

// isProgressMarker reports whether an event is a progress marker.
func isProgressMarker(key []byte) bool { return string(key) == progressMarkerKey }

// progressMarkersKey marks a context whose watches get progress markers.
type progressMarkersKey struct{}

// withProgressMarkers marks the context of the in-process client's watch
// stream: the demultiplexer sends its watches progress markers
// (demuxLog), which keptSpacesWatcher turns into progress notifications.
// kine's server hands a stream's context to the watches made on it, and
// etcd's adapter hands the client's to the server.
func withProgressMarkers(ctx context.Context) context.Context {
	return context.WithValue(ctx, progressMarkersKey{}, true)
}

func progressMarkers(ctx context.Context) bool {
	marked, _ := ctx.Value(progressMarkersKey{}).(bool)
	return marked
}

// mailboxEventsKey marks a context whose watches get no event of a
// mailbox space until the switch it holds is on (the watch server reads it
// from its stream's context).
type mailboxEventsKey struct{}

func withMailboxEvents(ctx context.Context, on *atomic.Bool) context.Context {
	return context.WithValue(ctx, mailboxEventsKey{}, on)
}

// mailboxesLeftOut tells whether a context's watches leave the mailboxes'
// events out, and if so returns the test of a key.
func mailboxesLeftOut(ctx context.Context) func(key string) bool {
	on, _ := ctx.Value(mailboxEventsKey{}).(*atomic.Bool)
	if on == nil {
		return nil
	}
	return func(key string) bool {
		if on.Load() {
			return false
		}
		space, ok := SpaceOfKey(key)
		return ok && spaces.IsMailboxName(space)
	}
}
