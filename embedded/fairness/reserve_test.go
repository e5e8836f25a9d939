package fairness

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestAFloodLeavesASeat runs Kubernetes' APF controller with the
// server's configuration on 6 seats (2 cores): a tenant's flood of
// requests that do not end holds all but one of the tenants' 2 seats,
// and another space's request runs at once beside it, where without the
// reserve it would wait for one of the flood's to end. Then the flood
// drains, never more than 1 at once.
func TestAFloodLeavesASeat(t *testing.T) {
	var objects []runtime.Object
	for _, pl := range PriorityLevels() {
		objects = append(objects, pl)
	}
	for _, fs := range FlowSchemas() {
		objects = append(objects, fs)
	}
	client := fake.NewSimpleClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	flows := New(factory, client.FlowcontrolV1(), 6, func(ctx context.Context) string { s, _ := ctx.Value(spaceKey{}).(string); return s })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = flows.Run(ctx.Done()) }()

	// handle sends one create by name in space through APF; it returns
	// the priority level it was classified in, and whether it ran.
	handle := func(ctx context.Context, space, name string, exec func()) (level string, ran bool) {
		ctx = context.WithValue(ctx, spaceKey{}, space)
		u := &user.DefaultInfo{Name: name, Groups: []string{user.AllAuthenticated}}
		flows.Handle(ctx, utilflowcontrol.RequestDigest{RequestInfo: &request.RequestInfo{Verb: "create", Resource: "configmaps", Namespace: "default"}, User: u},
			func(_ *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration, _ string) {
				level = pl.Name
			},
			func() fcrequest.WorkEstimate { return fcrequest.WorkEstimate{InitialSeats: 1} }, nil,
			func() { ran = true; exec() })
		return level, ran
	}
	// APF has the configuration once it classifies a tenant as one; that
	// request also tells the reserve alice's level.
	require.Eventually(t, func() bool {
		level, ran := handle(ctx, "team-a", "alice", func() {})
		return ran && level == Tenants
	}, 30*time.Second, 20*time.Millisecond, "APF classifies tenants")

	r := flows.(*spaceFlows).reserve
	waiting := func(flow string) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		if f := r.flows[flow]; f != nil {
			return len(f.waiting)
		}
		return 0
	}
	// The flood: what runs, and a full line (its hand of 2 queues of 50).
	const held, line = 1, 100
	const flood = held + line
	var running, most, ran atomic.Int32
	hold := make(chan struct{})
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ran := handle(ctx, "team-a", "alice", func() {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				ran.Add(1)
				<-hold
				running.Add(-1)
			})
			if !ran {
				t.Errorf("alice's request %d was refused", i)
			}
		}()
		// One after another: one runs, the rest wait in line.
		require.Eventually(t, func() bool { return running.Load() == int32(min(i+1, held)) }, 10*time.Second, time.Millisecond,
			"the flood runs on all the tenants' seats but one")
		require.Eventually(t, func() bool { return waiting(Tenants+"/team-a/alice") == max(0, i+1-held) }, 10*time.Second, time.Millisecond)
	}
	require.Equal(t, int32(held), running.Load(), "the flood holds all the tenants' seats but one")

	quiet := make(chan bool, 1)
	go func() {
		_, ran := handle(ctx, "team-b", "bob", func() {})
		quiet <- ran
	}()
	select {
	case ran := <-quiet:
		require.True(t, ran, "bob's request runs")
	case <-time.After(10 * time.Second):
		t.Fatal("bob's request in another space waited for alice's flood to end")
	}
	require.Equal(t, int32(held), running.Load(), "beside the flood, still holding its seat")

	// One more is refused, as APF refuses a request whose queues are
	// full, with its classification noted for the 429's headers.
	level, ranToo := handle(ctx, "team-a", "alice", func() {})
	require.False(t, ranToo, "the flood's line is full")
	require.Equal(t, Tenants, level)

	close(hold)
	wg.Wait()
	require.Equal(t, int32(held), most.Load(), "the flood never ran more at once")
	require.Equal(t, int32(flood), ran.Load(), "every one of the flood's requests ran")
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.flows, "an idle flow is forgotten")
}

func TestReserveLine(t *testing.T) {
	r := newReserve()
	ctx := context.Background()
	first, ok := r.acquire(ctx, "f", 1, 2)
	require.True(t, ok)

	// Two wait in line; a third is refused, as APF refuses a full queue.
	got := make(chan int, 2)
	var releases [2]func()
	for i := range 2 {
		go func() {
			release, ok := r.acquire(ctx, "f", 1, 2)
			if ok {
				releases[i] = release
				got <- i
			}
		}()
		require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.flows["f"].waiting) == i+1 }, 5*time.Second, time.Millisecond)
	}
	_, ok = r.acquire(ctx, "f", 1, 2)
	require.False(t, ok, "the line is full")

	// One whose context ends leaves the line; another flow is not held up.
	gone, goneCancel := context.WithCancel(ctx)
	other, ok := r.acquire(gone, "g", 1, 2)
	require.True(t, ok, "another flow has its own limit")
	other()
	goneCancel()
	_, ok = r.acquire(gone, "f", 1, 3)
	require.False(t, ok, "a request whose context ended gets no turn")

	first()
	require.Equal(t, 0, <-got, "the first in line goes first")
	releases[0]()
	require.Equal(t, 1, <-got)
	releases[1]()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.flows)
}

func TestGatedOnlyTheTenantsLevel(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	levels := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range PriorityLevels() {
		require.NoError(t, indexer.Add(pl))
		levels[pl.Name] = pl
	}
	lister := flowcontrollisters.NewPriorityLevelConfigurationLister(indexer)
	for _, c := range []struct {
		seats, limit int
	}{{6, 1}, {12, 3}, {24, 7}, {2, 0}} {
		limit, waiting, ok := gated(lister, c.seats, levels[Tenants])
		require.Equal(t, c.limit > 0, ok, "%d seats", c.seats)
		require.Equal(t, c.limit, limit, "%d seats: all the tenants' but one", c.seats)
		if ok {
			require.Equal(t, 2*50, waiting, "what the flow's hand of queues holds")
		}
	}
	_, _, ok := gated(lister, 6, levels[Syncers])
	require.False(t, ok, "syncers are not gated")
	_, _, ok = gated(lister, 6, levels["exempt"])
	require.False(t, ok)

	// An admin's change of shares changes the seats.
	more := levels[Tenants].DeepCopy()
	more.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](100)
	require.NoError(t, indexer.Update(more))
	limit, _, ok := gated(lister, 6, more)
	require.True(t, ok)
	require.Equal(t, 3, limit, "ceil(6 × 100 / 165) - 1")
}
