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
// within its spacing is added at once, so that a quiet key's news waits
// for nothing; one that was waits out the rest of the spacing, with
// whatever else comes meanwhile. A key's spacing is the pacer's, or
// longer for a key whose looks take long (Took, with a share): a look
// that grows with the fleet then takes a bounded share of the server
// however large the fleet. Its zero value is not usable: NewPacer.
type Pacer[K comparable] struct {
	spacing time.Duration
	// share is the most of the time looks at one key take when Took says
	// how long they take (0: the spacing is fixed).
	share  float64
	now    func() time.Time
	mu     sync.Mutex
	last   map[K]look
	pruned time.Time
}

// look is the last look at a key: when it began and the spacing that
// follows it.
type look struct {
	at      time.Time
	spacing time.Duration
}

// NewPacer returns a pacer with spacing between looks at a key.
func NewPacer[K comparable](spacing time.Duration) *Pacer[K] {
	return &Pacer[K]{spacing: spacing, now: time.Now, last: map[K]look{}}
}

// NewSharePacer returns a pacer with at least spacing between looks at a
// key, and more for a key whose looks (as Took reports them) would
// otherwise take more than share of the time.
func NewSharePacer[K comparable](spacing time.Duration, share float64) *Pacer[K] {
	p := NewPacer[K](spacing)
	p.share = share
	return p
}

// Add adds key to q, at once or after the rest of the spacing.
func (p *Pacer[K]) Add(q workqueue.TypedDelayingInterface[K], key K) {
	if wait := p.Wait(key); wait > 0 {
		q.AddAfter(key, wait)
		return
	}
	q.Add(key)
}

// Wait returns what is left of the key's spacing since it was last
// looked at (zero: nothing).
func (p *Pacer[K]) Wait(key K) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.last[key]
	if !ok {
		return 0
	}
	wait := l.spacing - p.now().Sub(l.at)
	if wait > 0 && wait <= l.spacing {
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
	spacing := p.spacing
	if l, ok := p.last[key]; ok {
		spacing = l.spacing // as long as the last look took, until Took says
	}
	p.last[key] = look{at: now, spacing: spacing}
	// Keys not looked at within their spacing are as good as new: dropped
	// now and then, so that the map holds the keys of the last moments.
	if now.Sub(p.pruned) > 10*p.spacing {
		p.pruned = now
		for k, l := range p.last {
			if now.Sub(l.at) >= l.spacing {
				delete(p.last, k)
			}
		}
	}
}

// Took records how long the look at key that Looked began took: with a
// share, the key's spacing is stretched so that its looks take at most
// that share of the time.
func (p *Pacer[K]) Took(key K, took time.Duration) {
	if p.share <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.last[key]; ok {
		l.spacing = max(p.spacing, time.Duration(float64(took)/p.share))
		p.last[key] = l
	}
}
