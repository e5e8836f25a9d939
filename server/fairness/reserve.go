// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package fairness

import (
	"context"
	"math"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/labels"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
)

// A flow of the tenants' priority level never holds every seat of it:
// one is kept for the other flows. APF's fair queuing shares seats out
// as they free, so a quiet space's request that comes while a flood
// holds every seat waits for one of the flood's requests to end (on 2
// cores about as long as the quiet request itself takes) however fair
// the queues are. With a seat kept, it starts at once, and a lone flood
// still runs on all seats but one.
//
// reserve counts the seats each user's requests hold or may hold in APF
// (queued or running: one a request, or as many as APF's work estimate
// says, until the estimate's added latency after it ends), and lets a
// flow of the tenants' level have at most its limit there.
// Its further requests wait in line before APF, in their order, under the
// deadline they would have in APF's queues, at most as many as those
// queues would hold for the flow and for the whole level; more are
// refused (429) as APF refuses them.
//
// Which level a user's requests go to is learned from APF's own
// classification of them, her resource requests apart from those naming
// no resource (an OpenAPI document, discovery). Health checks that a flow
// schema before any of the tenants' level puts in another level for every
// authenticated user (Kubernetes' probes schema exempts them) pass
// straight to APF, neither counted nor learned from; any other request
// that APF puts in another level stops counting once classified. A user's
// requests are counted from the first, so that a first burst, before APF
// has classified one of them, counts against the limit once it is known.
type reserve struct {
	mu    sync.Mutex
	flows map[string]*gatedFlow
	// seen is each user's classification, at most maxSeen of them.
	seen map[learnedKey]classification
	// waiting is every flow's requests in line; maxWaiting bounds it
	// (the level's queues' capacity).
	waiting, maxWaiting int
}

// learnedKey is what reserve.seen keeps a classification under: a
// user's resource requests, or her requests naming no resource.
type learnedKey struct {
	user        string
	nonResource bool
}

// maxSeen bounds reserve.seen: past it, one entry is forgotten for each
// new one.
const maxSeen = 10000

type classification struct {
	fs *flowcontrolv1.FlowSchema
	pl *flowcontrolv1.PriorityLevelConfiguration
}

// gatedFlow is one user's requests in APF and those waiting for a turn.
type gatedFlow struct {
	// seats is what its requests in APF hold or may hold.
	seats int
	// limit and maxWaiting bound seats and len(waiting); c is the
	// classification they were set for (what a refusal notes).
	limit, maxWaiting int
	c                 classification
	waiting           []chan struct{}
}

// gate is how a priority level's flows are held: the most seats of a
// flow, its longest line, and the longest line of all the level's flows.
type gate struct {
	limit, maxWaiting, levelWaiting int
}

func newReserve() *reserve {
	return &reserve{flows: map[string]*gatedFlow{}, seen: map[learnedKey]classification{}}
}

// learn remembers what APF classified a user's request as.
func (r *reserve) learn(user learnedKey, fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.seen[user]; ok {
		if c.fs == fs && c.pl == pl {
			return
		}
	} else if len(r.seen) >= maxSeen {
		for other := range r.seen { // a random entry
			delete(r.seen, other)
			break
		}
	}
	r.seen[user] = classification{fs: fs, pl: pl}
}

// classified returns what the reserve last learned of a user's level.
func (r *reserve) classified(user learnedKey) (classification, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.seen[user]
	return c, ok
}

// turn is one request's place in its flow's count.
type turn struct {
	r      *reserve
	flow   string
	seats  int
	linger time.Duration
	// ended is set once its seats are given back.
	ended bool
}

// acquire counts a request of a flow, once the flow holds fewer seats
// than its limit and nothing waits before it. g, when not nil, sets the
// flow's limit (for classification c); a flow nothing has set a limit for
// is not held. acquire returns false if the line is full or ctx ends
// first, with the classification to note for the refusal.
func (r *reserve) acquire(ctx context.Context, flow string, g *gate, c classification) (*turn, classification, bool) {
	r.mu.Lock()
	f := r.flows[flow]
	if f == nil {
		f = &gatedFlow{limit: math.MaxInt}
		r.flows[flow] = f
	}
	if g != nil {
		f.limit, f.maxWaiting, f.c = g.limit, g.maxWaiting, c
		r.maxWaiting = g.levelWaiting
		r.admitLocked(f) // a higher limit lets in those waiting
	}
	t := &turn{r: r, flow: flow, seats: 1}
	if f.seats < f.limit && len(f.waiting) == 0 {
		f.seats++
		r.mu.Unlock()
		return t, f.c, true
	}
	if len(f.waiting) >= f.maxWaiting || r.waiting >= r.maxWaiting {
		refused := f.c
		r.dropIfIdle(flow, f)
		r.mu.Unlock()
		return nil, refused, false
	}
	ready := make(chan struct{})
	f.waiting = append(f.waiting, ready)
	r.waiting++
	r.mu.Unlock()
	select {
	case <-ready:
		return t, f.c, true
	case <-ctx.Done():
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, w := range f.waiting {
			if w == ready {
				f.waiting = append(f.waiting[:i], f.waiting[i+1:]...)
				r.waiting--
				r.dropIfIdle(flow, f)
				return nil, f.c, false
			}
		}
		// Its turn came as ctx ended: pass it on.
		t.endLocked(f)
		return nil, f.c, false
	}
}

// hold sets the seats the request holds in APF (its work estimate's
// most) and how long after it ends APF keeps them.
func (t *turn) hold(seats int, linger time.Duration) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	if t.ended {
		return
	}
	t.r.flows[t.flow].seats += seats - t.seats
	t.seats, t.linger = seats, linger
}

// release gives the request's seats back once APF has (after the
// estimate's added latency, if any); a turn released is released once.
func (t *turn) release() {
	end := func() {
		t.r.mu.Lock()
		defer t.r.mu.Unlock()
		if !t.ended {
			t.endLocked(t.r.flows[t.flow])
		}
	}
	t.r.mu.Lock()
	linger := t.linger
	t.r.mu.Unlock()
	if linger > 0 {
		time.AfterFunc(linger, end)
		return
	}
	end()
}

func (t *turn) endLocked(f *gatedFlow) {
	t.ended = true
	f.seats -= t.seats
	t.r.admitLocked(f)
	t.r.dropIfIdle(t.flow, f)
}

// admitLocked lets in the first in line, as many as the limit allows.
func (r *reserve) admitLocked(f *gatedFlow) {
	for f.seats < f.limit && len(f.waiting) > 0 {
		close(f.waiting[0])
		f.waiting = f.waiting[1:]
		r.waiting--
		f.seats++
	}
}

func (r *reserve) dropIfIdle(flow string, f *gatedFlow) {
	if f.seats == 0 && len(f.waiting) == 0 {
		delete(r.flows, flow)
	}
}

// gated returns how a priority level's flows are held: the tenants' level
// only, when it has more than one seat. Its seats are its nominal
// concurrency limit as APF computes it, from the server's seats and the
// shares of every level in the configuration (the tenants' level neither
// lends nor, unless an admin changes it, borrows; APF's own sum may
// differ while a deleted level drains). A flow may hold all seats but
// one, and have in line what APF would queue for it (its hand of queues,
// each of the level's queue length); the level, what all its queues hold.
func gated(levels flowcontrollisters.PriorityLevelConfigurationLister, serverSeats int, pl *flowcontrolv1.PriorityLevelConfiguration) (*gate, bool) {
	if pl.Name != Tenants || pl.Spec.Limited == nil || pl.Spec.Limited.NominalConcurrencyShares == nil {
		return nil, false
	}
	q := pl.Spec.Limited.LimitResponse.Queuing
	if pl.Spec.Limited.LimitResponse.Type != flowcontrolv1.LimitResponseTypeQueue || q == nil {
		return nil, false
	}
	all, err := levels.List(labels.Everything())
	if err != nil {
		return nil, false
	}
	var sum float64
	for _, l := range all {
		switch {
		case l.Spec.Limited != nil && l.Spec.Limited.NominalConcurrencyShares != nil:
			sum += float64(*l.Spec.Limited.NominalConcurrencyShares)
		case l.Spec.Exempt != nil && l.Spec.Exempt.NominalConcurrencyShares != nil:
			sum += float64(*l.Spec.Exempt.NominalConcurrencyShares)
		}
	}
	if sum == 0 {
		return nil, false
	}
	seats := int(math.Ceil(float64(serverSeats) * float64(*pl.Spec.Limited.NominalConcurrencyShares) / sum))
	if seats < 2 {
		return nil, false
	}
	return &gate{
		limit:        seats - 1,
		maxWaiting:   max(1, int(q.HandSize)*int(q.QueueLengthLimit)),
		levelWaiting: max(1, int(q.Queues)*int(q.QueueLengthLimit)),
	}, true
}
