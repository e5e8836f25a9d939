// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"sync"
)

// watchCaches are the watch caches running on a datastore, so that a
// shutdown stops them all at once. The API server destroys each resource's
// storage in turn, and a cache takes up to a few tens of milliseconds to
// stop (its reflector's watch ends, its watchers are terminated): with
// every resource one after the other, that was a quarter of a second of
// an idle server's exit.
type watchCaches struct {
	mu   sync.Mutex
	next uint64
	stop map[uint64]func()
}

// add records a cache's stop, which must be idempotent; remove forgets it,
// for a storage destroyed on its own (a CRD's, when the CRD changes).
func (w *watchCaches) add(stop func()) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop == nil {
		w.stop = map[uint64]func(){}
	}
	id := w.next
	w.next++
	w.stop[id] = stop
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.stop, id)
	}
}

// stopAll stops every cache recorded, concurrently, and returns once all
// have stopped. Caches added afterwards are not stopped.
func (w *watchCaches) stopAll() {
	w.mu.Lock()
	stops := make([]func(), 0, len(w.stop))
	for _, stop := range w.stop {
		stops = append(stops, stop)
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Go(stop)
	}
	wg.Wait()
}
