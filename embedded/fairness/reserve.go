package fairness

import (
	"context"
	"math"
	"sync"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/labels"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
)

// A flow of the tenants' priority level never holds every seat of it:
// one is kept for the other flows. APF's fair queuing shares seats out
// as they free, so a quiet space's request that comes while a flood
// holds every seat waits for one of the flood's requests to end (about a
// millisecond on 2 cores, the most of a quiet create's wait) however fair
// the queues are. With a seat kept, it starts at once, and a lone flood
// still runs on all seats but one. The flood's requests beyond that wait
// in line before APF, in their order, under the same deadline as in APF's
// queues, and at most as many as APF's queues would hold for the flow;
// more are refused with 429 as APF refuses them.
//
// reserve counts each gated flow's requests in APF (queued or running)
// and lets each flow have at most its limit there.
type reserve struct {
	mu    sync.Mutex
	flows map[string]*gatedFlow
	// seen remembers each user's classification (its flow schema and
	// priority level), learned from APF, at most maxSeen of them: a
	// flow's first request goes straight to APF.
	seen map[string]classification
}

// maxSeen bounds reserve.seen: past it, what was learned is forgotten
// and learned again.
const maxSeen = 10000

type classification struct {
	fs *flowcontrolv1.FlowSchema
	pl *flowcontrolv1.PriorityLevelConfiguration
}

// gatedFlow is one flow's requests in APF and those waiting for a turn,
// in order.
type gatedFlow struct {
	inAPF   int
	limit   int
	waiting []chan struct{}
}

func newReserve() *reserve {
	return &reserve{flows: map[string]*gatedFlow{}, seen: map[string]classification{}}
}

// learn remembers what APF classified a user's request as.
func (r *reserve) learn(user string, fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.seen[user]; ok && c.fs == fs && c.pl == pl {
		return
	}
	if len(r.seen) >= maxSeen {
		clear(r.seen)
	}
	r.seen[user] = classification{fs: fs, pl: pl}
}

// classified returns what APF last classified a user's request as.
func (r *reserve) classified(user string) (classification, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.seen[user]
	return c, ok
}

// acquire waits until the flow has fewer than limit requests in APF, at
// most maxWaiting requests in line before it, and returns the function
// that gives its turn back; false if the line is full or ctx ends first.
func (r *reserve) acquire(ctx context.Context, flow string, limit, maxWaiting int) (func(), bool) {
	r.mu.Lock()
	f := r.flows[flow]
	if f == nil {
		f = &gatedFlow{}
		r.flows[flow] = f
	}
	f.limit = limit
	if f.inAPF < limit && len(f.waiting) == 0 {
		f.inAPF++
		r.mu.Unlock()
		return func() { r.release(flow) }, true
	}
	if len(f.waiting) >= maxWaiting {
		r.dropIfIdle(flow, f)
		r.mu.Unlock()
		return nil, false
	}
	turn := make(chan struct{})
	f.waiting = append(f.waiting, turn)
	r.mu.Unlock()
	select {
	case <-turn:
		return func() { r.release(flow) }, true
	case <-ctx.Done():
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, w := range f.waiting {
			if w == turn {
				f.waiting = append(f.waiting[:i], f.waiting[i+1:]...)
				r.dropIfIdle(flow, f)
				return nil, false
			}
		}
		// The turn came as ctx ended: pass it on.
		r.releaseLocked(flow, f)
		return nil, false
	}
}

func (r *reserve) release(flow string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseLocked(flow, r.flows[flow])
}

// releaseLocked ends one of the flow's requests in APF and lets in the
// first in line, as many as the limit allows.
func (r *reserve) releaseLocked(flow string, f *gatedFlow) {
	f.inAPF--
	for f.inAPF < f.limit && len(f.waiting) > 0 {
		close(f.waiting[0])
		f.waiting = f.waiting[1:]
		f.inAPF++
	}
	r.dropIfIdle(flow, f)
}

func (r *reserve) dropIfIdle(flow string, f *gatedFlow) {
	if f.inAPF == 0 && len(f.waiting) == 0 {
		delete(r.flows, flow)
	}
}

// gated returns the limit and line length of a priority level's flows:
// the tenants' level only, when it has more than one seat (a level's
// nominal concurrency limit, as APF computes it from the server's seats
// and every level's shares; the tenants' level neither lends nor, unless
// an admin changes it, borrows). A flow may hold all seats but one, and
// have in line what APF would queue for it (its hand of queues, each of
// the level's queue length).
func gated(levels flowcontrollisters.PriorityLevelConfigurationLister, serverSeats int, pl *flowcontrolv1.PriorityLevelConfiguration) (limit, maxWaiting int, ok bool) {
	if pl.Name != Tenants || pl.Spec.Limited == nil || pl.Spec.Limited.NominalConcurrencyShares == nil {
		return 0, 0, false
	}
	all, err := levels.List(labels.Everything())
	if err != nil {
		return 0, 0, false
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
		return 0, 0, false
	}
	seats := int(math.Ceil(float64(serverSeats) * float64(*pl.Spec.Limited.NominalConcurrencyShares) / sum))
	if seats < 2 {
		return 0, 0, false
	}
	maxWaiting = 1
	if q := pl.Spec.Limited.LimitResponse.Queuing; q != nil {
		maxWaiting = max(1, int(q.HandSize)*int(q.QueueLengthLimit))
	}
	return seats - 1, maxWaiting, true
}
