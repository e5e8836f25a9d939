// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package worker

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Pacer spaces the looks at each key of a queue whose events come in
// storms: a key whose look reads thousands of objects (a placement's
// rollout over every destination, a WDS object's summary over every copy)
// and whose every event would otherwise make a look of its own, back to
// back while the storm lasts. An event for a key that was not looked at
// within Spacing is added at once, so that a quiet key's news waits for
// nothing; one that was waits out the rest of Spacing, with whatever else
// comes meanwhile. Its zero value is not usable: NewPacer.
type Pacer[K comparable] struct {
	spacing time.Duration
	now     func() time.Time
	mu      sync.Mutex
	last    map[K]time.Time
	pruned  time.Time
}

// NewPacer returns a pacer with spacing between looks at a key.
func NewPacer[K comparable](spacing time.Duration) *Pacer[K] {
	return &Pacer[K]{spacing: spacing, now: time.Now, last: map[K]time.Time{}}
}

// Add adds key to q, at once or after the rest of the spacing.
func (p *Pacer[K]) Add(q workqueue.TypedDelayingInterface[K], key K) {
	if wait := p.Wait(key); wait > 0 {
		q.AddAfter(key, wait)
		return
	}
	q.Add(key)
}

// Wait returns what is left of the spacing since key was last looked at
// (zero: nothing).
func (p *Pacer[K]) Wait(key K) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := p.spacing - p.now().Sub(p.last[key])
	if wait > 0 && wait <= p.spacing {
		return wait
	}
	return 0
}

// Looked records a look at key (call it as the look begins: what changes
// during it is news for the next).
func (p *Pacer[K]) Looked(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.last[key] = now
	// Keys not looked at within the spacing are as good as new: dropped
	// now and then, so that the map holds the keys of the last moments.
	if now.Sub(p.pruned) > 10*p.spacing {
		p.pruned = now
		for k, t := range p.last {
			if now.Sub(t) >= p.spacing {
				delete(p.last, k)
			}
		}
	}
}
