// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchCachesStopTogether: stopAll stops the caches concurrently (each
// stop below returns only once every other has begun, which one after the
// other never does) and leaves alone those forgotten.
func TestWatchCachesStopTogether(t *testing.T) {
	var caches watchCaches
	const n = 5
	begun := make(chan struct{}, n)
	var stopped, forgottenStopped atomic.Int32
	all := make(chan struct{})
	for range n {
		caches.add(func() {
			begun <- struct{}{}
			<-all
			stopped.Add(1)
		})
	}
	forget := caches.add(func() { forgottenStopped.Add(1) })
	forget()

	done := make(chan struct{})
	go func() {
		caches.stopAll()
		close(done)
	}()
	deadline := time.After(10 * time.Second)
	for i := range n {
		select {
		case <-begun:
		case <-deadline:
			t.Fatalf("%d of %d stops begun: stopAll stops one cache at a time", i, n)
		}
	}
	close(all)
	select {
	case <-done:
	case <-deadline:
		t.Fatal("stopAll did not return once every stop had")
	}
	if got := stopped.Load(); got != n {
		t.Errorf("%d caches stopped, want %d", got, n)
	}
	if got := forgottenStopped.Load(); got != 0 {
		t.Errorf("a forgotten cache was stopped %d times", got)
	}
}
