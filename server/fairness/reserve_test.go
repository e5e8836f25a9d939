// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package fairness

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"
)

// TestAFloodLeavesASeat runs Kubernetes' APF controller with the
// server's configuration on 6 seats (2 cores): a tenant's flood of
// requests that do not end (creates and watches) holds all but one of
// the tenants' 2 seats, and another space's request runs at once beside
// it, where without the reserve it would wait for one of the flood's to
// end. Then the flood drains, never more than 1 at once. A health check
// classified elsewhere does not open the gate, and a flow's first burst,
// before APF has classified one of its requests, is counted.
func TestAFloodLeavesASeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fcmetrics.Register()
	flows, handle := serverAPF(ctx, t)
	// A request of hers tells the reserve alice's level.
	level, ran := handle(ctx, "team-a", "alice", "create", func() {})
	require.True(t, ran)
	require.Equal(t, Tenants, level)
	// Her health check is exempt (Kubernetes' probes schema): it tells
	// nothing of her other requests.
	level, ran = handle(ctx, "team-a", "alice", "probe", func() {})
	require.True(t, ran)
	require.Equal(t, "exempt", level)

	r := flows.(*spaceFlows).reserve
	waiting := func(flow string) int { return inLine(r, flow) }
	// The flood: what runs, and a full line (its hand of 2 queues of 50).
	const held, line = 1, 100
	const flood = held + line
	var running, most, done atomic.Int32
	hold := make(chan struct{})
	var wg sync.WaitGroup
	for i := range flood {
		verb := "create"
		if i%2 == 1 {
			verb = "watch" // a watch holds its seat while it starts
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ran := handle(ctx, "team-a", "alice", verb, func() {
				enter(&running, &most)
				done.Add(1)
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
		require.Eventually(t, func() bool { return waiting("team-a/alice") == max(0, i+1-held) }, 10*time.Second, time.Millisecond)
	}
	require.Equal(t, int32(held), running.Load(), "the flood holds all the tenants' seats but one")

	runsSoon(t, func() bool { _, ran := handle(ctx, "team-b", "bob", "create", func() {}); return ran },
		"bob's request in another space runs, without waiting for alice's flood to end")
	require.Equal(t, int32(held), running.Load(), "beside the flood, still holding its seat")

	// One more is refused, as APF refuses a request whose queues are
	// full, with its classification noted for the 429's headers.
	rejected := func() float64 {
		families, err := legacyregistry.DefaultGatherer.Gather()
		require.NoError(t, err)
		var n float64
		for _, f := range families {
			if f.GetName() != "apiserver_flowcontrol_rejected_requests_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["priority_level"] == Tenants && labels["reason"] == "queue-full" {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	before := rejected()
	level, ranToo := handle(ctx, "team-a", "alice", "create", func() {})
	require.False(t, ranToo, "the flood's line is full")
	require.Equal(t, Tenants, level)
	require.Equal(t, before+1, rejected(), "APF's metric counts the refusal")

	close(hold)
	wg.Wait()
	require.Equal(t, int32(held), most.Load(), "the flood never ran more at once")
	require.Equal(t, int32(flood), done.Load(), "every one of the flood's requests ran")

	// carol's first request comes before APF has classified any of
	// hers: it goes to APF, and it counts. Her next one, once she is
	// known, waits until she holds less than her limit.
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		handle(ctx, "team-c", "carol", "create", func() { started <- struct{}{}; <-release })
	}()
	<-started
	second := make(chan bool, 1)
	go func() {
		_, ran := handle(ctx, "team-c", "carol", "create", func() {})
		second <- ran
	}()
	require.Eventually(t, func() bool { return waiting("team-c/carol") == 1 }, 10*time.Second, time.Millisecond,
		"her first request counts against her limit once it is known")
	close(release)
	require.True(t, <-second)
	wg.Wait()

	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.flows, "an idle flow is forgotten")
	require.Zero(t, r.waiting)
}

// TestANonResourceFloodLeavesASeat: a tenant's requests that name no
// resource (OpenAPI documents, discovery) count as her others do. dave,
// who never asked for a resource, floods /openapi/v3: he holds all the
// tenants' seats but one, and another space's create runs at once
// beside him. So does frank, whose resource requests the reserve knew in
// another level. A
// health check, which APF exempts, neither waits behind its user's
// requests nor holds a seat of hers.
func TestANonResourceFloodLeavesASeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	flows, handle := serverAPF(ctx, t)
	r := flows.(*spaceFlows).reserve

	flood := func(space, name string) {
		const held, line = 1, 5
		var running, most atomic.Int32
		hold := make(chan struct{})
		var wg sync.WaitGroup
		for i := range held + line {
			wg.Add(1)
			go func() {
				defer wg.Done()
				level, ran := handle(ctx, space, name, "openapi", func() {
					enter(&running, &most)
					<-hold
					running.Add(-1)
				})
				if !ran || level != Tenants {
					t.Errorf("%s's request %d: ran %v, in %q", name, i, ran, level)
				}
			}()
			require.Eventually(t, func() bool {
				return running.Load() == int32(min(i+1, held)) && inLine(r, space+"/"+name) == max(0, i+1-held)
			}, 10*time.Second, time.Millisecond, "%s's flood of /openapi/v3 runs on all the tenants' seats but one", name)
		}
		runsSoon(t, func() bool { _, ran := handle(ctx, "team-b", "bob", "create", func() {}); return ran },
			"bob's request in another space runs, without waiting for the flood of /openapi/v3")
		close(hold)
		wg.Wait()
		require.Equal(t, int32(held), most.Load(), "the flood never ran more at once")
	}
	flood("team-d", "dave")

	// frank's resource requests are known in another level (as for a
	// user whose request came before APF had its configuration, in
	// catch-all): his requests naming no resource, learned apart, still
	// count.
	levels := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range PriorityLevels() {
		levels[pl.Name] = pl
	}
	r.learn(learnedKey{user: "team-f/frank"}, nil, levels["catch-all"])
	flood("team-f", "frank")

	// A request that APF puts in a level not held (here, of a user APF
	// exempts) stops counting once classified, while it runs.
	admin := &user.DefaultInfo{Name: "root", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
	running, done, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		flows.Handle(context.WithValue(ctx, spaceKey{}, "team-g"), utilflowcontrol.RequestDigest{
			RequestInfo: &request.RequestInfo{Verb: "get", Path: "/openapi/v3"}, User: admin},
			func(*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration, string) {},
			func() fcrequest.WorkEstimate { return fcrequest.WorkEstimate{InitialSeats: 1} }, nil,
			func() { close(running); <-stop })
	}()
	waitFor(t, running, "the exempt request runs")
	r.mu.Lock()
	_, counted := r.flows["team-g/root"]
	r.mu.Unlock()
	require.False(t, counted, "an exempt request holds no seat")
	close(stop)
	<-done

	// erin, a known tenant, holds her one seat with a create: her health
	// check runs at once beside it, exempt, and holds no seat of hers
	// while it is open: her next create runs beside it.
	level, ran := handle(ctx, "team-e", "erin", "create", func() {})
	require.True(t, ran)
	require.Equal(t, Tenants, level)
	creating, created, busy := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(created)
		handle(ctx, "team-e", "erin", "create", func() { close(creating); <-busy })
	}()
	waitFor(t, creating, "erin's create runs")
	probing, probed, open := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var probeLevel string
	go func() {
		defer close(probed)
		probeLevel, _ = handle(ctx, "team-e", "erin", "probe", func() { close(probing); <-open })
	}()
	waitFor(t, probing, "erin's health check runs, without waiting behind her create")
	runsSoon(t, func() bool { _, ran := handle(ctx, "team-e", "erin", "probe /livez/etcd", func() {}); return ran },
		"erin's check of /livez/etcd runs, without waiting behind her create")
	close(busy)
	<-created
	runsSoon(t, func() bool { _, ran := handle(ctx, "team-e", "erin", "create", func() {}); return ran },
		"erin's create runs beside her open health check")
	close(open)
	<-probed
	require.Equal(t, "exempt", probeLevel)

	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.flows, "an idle flow is forgotten")
	require.Zero(t, r.waiting)
}

// TestPassedRules: the health checks that a flow schema before any of
// the tenants' level exempts for every authenticated user pass straight
// to APF, with what APF's rules cover below them; nothing else does.
func TestPassedRules(t *testing.T) {
	c := reserveConfig{passed: passedRules(FlowSchemas(), PriorityLevels())}
	for _, path := range []string{"/livez", "/readyz", "/healthz", "/livez/etcd", "/readyz/ping", "/healthz/"} {
		require.True(t, c.passes("get", path), path)
		require.False(t, c.passes("post", path), "POST %s", path)
	}
	for _, path := range []string{"/openapi/v3", "/openapi/v2", "/version", "/api", "/apis", "/livezz", "/metrics"} {
		require.False(t, c.passes("get", path), path)
	}

	// An admin's schemas for everyone before the tenants', with a
	// prefix; one after it; one for a group of its own; one in the
	// tenants' level; one whose level does not exist (APF skips it).
	schema := func(name string, precedence int32, level string, subject flowcontrolv1.Subject) *flowcontrolv1.FlowSchema {
		fs := everything(name, precedence, level, "nobody")
		fs.Spec.Rules = []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects: []flowcontrolv1.Subject{subject},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
				Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{"/" + name + "/*", "/" + name + "-exact"},
			}},
		}}
		return fs
	}
	everyone := flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: user.AllAuthenticated}}
	some := flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "ops"}}
	c = reserveConfig{passed: passedRules(append(FlowSchemas(),
		schema("early", 500, "global-default", everyone),
		schema("late", 9000, "global-default", everyone),
		schema("ops", 500, "global-default", some),
		schema("tenants-too", 500, Tenants, everyone),
		schema("dangling", 500, "workload-low", everyone)), PriorityLevels())}
	require.True(t, c.passes("get", "/early/pprof"))
	require.True(t, c.passes("post", "/early-exact"))
	require.False(t, c.passes("get", "/earlyish"), "/early/* is /early/ and below")
	require.False(t, c.passes("get", "/late/x"), "after the tenants' schema")
	require.False(t, c.passes("get", "/ops/x"), "not every user")
	require.False(t, c.passes("get", "/tenants-too/x"), "the tenants' level")
	require.False(t, c.passes("get", "/dangling/x"), "a level that does not exist")

	// A schema of the tenants' level before the probes schema: nothing
	// passes, for APF would send the probes there first.
	first := schema("first", 1, Tenants, everyone)
	c = reserveConfig{passed: passedRules(append(FlowSchemas(), first), PriorityLevels())}
	require.False(t, c.passes("get", "/livez"))
}

// runsSoon sends one request and fails unless it runs within 10 s.
func runsSoon(t *testing.T, send func() (ran bool), what string) {
	t.Helper()
	done := make(chan bool, 1)
	go func() { done <- send() }()
	select {
	case ran := <-done:
		require.True(t, ran, what)
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
}

// waitFor fails unless ch closes within 10 s.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
}

// enter counts one more request running, and keeps the most at once.
func enter(running, most *atomic.Int32) {
	n := running.Add(1)
	for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
	}
}

// inLine is how many of a flow's requests wait in line.
func inLine(r *reserve, flow string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.flows[flow]; f != nil {
		return len(f.waiting)
	}
	return 0
}

// serverAPF runs Kubernetes' APF controller with the server's
// configuration on 6 seats (2 cores), on a fake clientset's informers,
// until ctx ends. handle sends one request through it, by name in space:
// a create of a ConfigMap, a watch of them, a health check ("probe", or
// "probe PATH") or a
// GET of /openapi/v3 ("openapi"); it returns the priority level the
// request was classified in, and whether it ran.
func serverAPF(ctx context.Context, t *testing.T) (utilflowcontrol.Interface, func(ctx context.Context, space, name, verb string, exec func()) (string, bool)) {
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
	factory.Start(ctx.Done())
	go func() { _ = flows.Run(ctx.Done()) }()
	handle := func(ctx context.Context, space, name, verb string, exec func()) (level string, ran bool) {
		ctx = context.WithValue(ctx, spaceKey{}, space)
		u := &user.DefaultInfo{Name: name, Groups: []string{user.AllAuthenticated}}
		info := &request.RequestInfo{IsResourceRequest: true, Verb: verb, Resource: "configmaps", Namespace: "default"}
		switch {
		case verb == "probe":
			info = &request.RequestInfo{Verb: "get", Path: "/livez"}
		case strings.HasPrefix(verb, "probe "):
			info = &request.RequestInfo{Verb: "get", Path: strings.TrimPrefix(verb, "probe ")}
		case verb == "openapi":
			info = &request.RequestInfo{Verb: "get", Path: "/openapi/v3"}
		}
		flows.Handle(ctx, utilflowcontrol.RequestDigest{RequestInfo: info, User: u},
			func(_ *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration, _ string) {
				level = pl.Name
			},
			func() fcrequest.WorkEstimate { return fcrequest.WorkEstimate{InitialSeats: 1} }, nil,
			func() { ran = true; exec() })
		return level, ran
	}
	// APF has the configuration once it classifies a tenant as one.
	require.Eventually(t, func() bool {
		level, ran := handle(ctx, "ready", "nobody", "create", func() {})
		return ran && level == Tenants
	}, 30*time.Second, 20*time.Millisecond, "APF classifies tenants")
	return flows, handle
}

func TestReserveLine(t *testing.T) {
	r := newReserve()
	ctx := context.Background()
	g := &gate{limit: 1, maxWaiting: 2, levelWaiting: 3}
	first, _, ok := r.acquire(ctx, "f", g, classification{})
	require.True(t, ok)

	// Two wait in line; a third is refused, as APF refuses a full queue.
	got := make(chan int, 2)
	var turns [2]*turn
	for i := range 2 {
		go func() {
			t, _, ok := r.acquire(ctx, "f", g, classification{})
			if ok {
				turns[i] = t
				got <- i
			}
		}()
		require.Eventually(t, func() bool { return inLine(r, "f") == i+1 }, 5*time.Second, time.Millisecond)
	}
	_, _, ok = r.acquire(ctx, "f", g, classification{})
	require.False(t, ok, "the line is full")

	// Another flow has its own limit, and a line of its own, but the
	// level's lines together hold 3.
	other, _, ok := r.acquire(ctx, "g", g, classification{})
	require.True(t, ok, "another flow has its own limit")
	gone, goneCancel := context.WithCancel(ctx)
	go func() { _, _, _ = r.acquire(gone, "g", g, classification{}) }()
	require.Eventually(t, func() bool { return inLine(r, "g") == 1 }, 5*time.Second, time.Millisecond)
	_, _, ok = r.acquire(ctx, "g", g, classification{})
	require.False(t, ok, "the level's lines are full")
	// One whose context ends leaves the line.
	goneCancel()
	require.Eventually(t, func() bool { return inLine(r, "g") == 0 }, 5*time.Second, time.Millisecond)
	other.release()

	first.release()
	require.Equal(t, 0, <-got, "the first in line goes first")
	turns[0].release()
	require.Equal(t, 1, <-got)
	turns[1].release()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.flows)
	require.Zero(t, r.waiting)
}

// TestReserveTurnAsContextEnds: a turn that comes as the waiter's
// context ends is taken or passed on, never lost.
func TestReserveTurnAsContextEnds(t *testing.T) {
	g := &gate{limit: 1, maxWaiting: 5, levelWaiting: 5}
	for range 200 {
		r := newReserve()
		first, _, ok := r.acquire(context.Background(), "f", g, classification{})
		require.True(t, ok)
		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan *turn)
		go func() {
			t, _, _ := r.acquire(ctx, "f", g, classification{})
			result <- t
		}()
		require.Eventually(t, func() bool { return inLine(r, "f") == 1 }, 5*time.Second, time.Millisecond)
		r.mu.Lock()
		first.endLocked(r.flows["f"]) // the turn comes...
		cancel()                      // ...as the context ends
		r.mu.Unlock()
		if t := <-result; t != nil {
			t.release()
		}
		r.mu.Lock()
		require.Empty(t, r.flows, "no seat is left counted")
		require.Zero(t, r.waiting)
		r.mu.Unlock()
	}
}

// TestReserveSeats: a request counts the seats APF's estimate gives it,
// until the estimate's added latency after it ends; a higher limit lets
// those waiting in at once.
func TestReserveSeats(t *testing.T) {
	r := newReserve()
	ctx := context.Background()
	g := &gate{limit: 2, maxWaiting: 5, levelWaiting: 5}
	wide, _, ok := r.acquire(ctx, "f", g, classification{})
	require.True(t, ok)
	wide.hold(2, time.Minute)
	next := make(chan *turn, 1)
	go func() {
		t, _, _ := r.acquire(ctx, "f", g, classification{})
		next <- t
	}()
	require.Eventually(t, func() bool { return inLine(r, "f") == 1 }, 5*time.Second, time.Millisecond,
		"a request of 2 seats fills a limit of 2")
	wide.release()
	r.mu.Lock()
	require.Equal(t, 2, r.flows["f"].seats, "its seats stay counted for the added latency")
	r.mu.Unlock()

	// The limit goes up (an admin's new shares): the one in line goes in.
	more, _, ok := r.acquire(ctx, "f", &gate{limit: 4, maxWaiting: 5, levelWaiting: 5}, classification{})
	require.True(t, ok)
	n := <-next
	require.NotNil(t, n)
	more.release()
	n.release()
	r.mu.Lock()
	require.Equal(t, 2, r.flows["f"].seats, "the wide request's seats, still lingering")
	r.mu.Unlock()
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
		g, ok := gated(lister, c.seats, levels[Tenants])
		require.Equal(t, c.limit > 0, ok, "%d seats", c.seats)
		if ok {
			require.Equal(t, gate{limit: c.limit, maxWaiting: 2 * 50, levelWaiting: 128 * 50}, *g,
				"%d seats: all the tenants' but one; a line of what the flow's hand of queues holds, and the level's", c.seats)
		}
	}
	_, ok := gated(lister, 6, levels[Syncers])
	require.False(t, ok, "syncers are not gated")
	_, ok = gated(lister, 6, levels["exempt"])
	require.False(t, ok)

	// An admin's change of shares changes the seats; exempt levels'
	// shares count, as APF counts them.
	more := levels[Tenants].DeepCopy()
	more.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](100)
	require.NoError(t, indexer.Update(more))
	g, ok := gated(lister, 6, more)
	require.True(t, ok)
	require.Equal(t, 3, g.limit, "ceil(6 × 100 / 165) - 1")
	exempt := levels["exempt"].DeepCopy()
	exempt.Spec.Exempt.NominalConcurrencyShares = ptr.To[int32](35)
	require.NoError(t, indexer.Update(exempt))
	g, ok = gated(lister, 6, more)
	require.True(t, ok)
	require.Equal(t, 2, g.limit, "ceil(6 × 100 / 200) - 1")
}

// TestGateFollowsTheConfiguration: the tenants' gate, computed once, is
// computed again when an admin changes the priority levels.
func TestGateFollowsTheConfiguration(t *testing.T) {
	var objects []runtime.Object
	for _, pl := range PriorityLevels() {
		objects = append(objects, pl)
	}
	client := fake.NewSimpleClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	s := New(factory, client.FlowcontrolV1(), 6, func(context.Context) string { return "" }).(*spaceFlows)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	tenants, err := s.levels.Get(Tenants)
	require.NoError(t, err)
	g, ok := s.gate(tenants)
	require.True(t, ok)
	require.Equal(t, 1, g.limit)

	more := tenants.DeepCopy()
	more.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](100)
	_, err = client.FlowcontrolV1().PriorityLevelConfigurations().Update(ctx, more, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		g, ok := s.gate(tenants)
		return ok && g.limit == 3
	}, 10*time.Second, 10*time.Millisecond, "ceil(6 × 100 / 165) - 1 after the change")
	for _, pl := range PriorityLevels() {
		_, ok = s.gate(pl)
		require.Equal(t, pl.Name == Tenants, ok, "only the tenants' level is held: %s", pl.Name)
	}

	// A flow schema's change too: the tenants' schema, then one before
	// it that exempts a path for everyone.
	require.False(t, s.config().passes("get", "/livez"), "no flow schema yet")
	for _, fs := range FlowSchemas() {
		_, err = client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.config().passes("get", "/livez") }, 10*time.Second, 10*time.Millisecond,
		"Kubernetes' probes schema exempts /livez")
}

func TestNamedUsersFollowTheConfiguration(t *testing.T) {
	client := fake.NewSimpleClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	s := New(factory, client.FlowcontrolV1(), 6, func(ctx context.Context) string { sp, _ := ctx.Value(spaceKey{}).(string); return sp }).(*spaceFlows)
	inner := &recorder{}
	s.Interface = inner
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	seenAs := func(name string) string {
		inner.got = utilflowcontrol.RequestDigest{}
		s.Handle(context.WithValue(ctx, spaceKey{}, "team-a"), utilflowcontrol.RequestDigest{
			RequestInfo: &request.RequestInfo{Verb: "get", IsResourceRequest: true}, User: &user.DefaultInfo{Name: name},
		}, func(*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration, string) {}, func() fcrequest.WorkEstimate {
			return fcrequest.WorkEstimate{InitialSeats: 1}
		}, nil, func() {})
		return inner.got.User.GetName()
	}
	require.Equal(t, "team-a/bob", seenAs("bob"))
	require.Equal(t, "team-a/system:serviceaccount:ci:builder", seenAs("system:serviceaccount:ci:builder"))

	// An admin's schema naming bob, and every service account of ci: the
	// names are kept from then on, so that the schema matches them.
	named := everything("named", 100, "slow", "nobody")
	named.Spec.Rules[0].Subjects = []flowcontrolv1.Subject{
		{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "bob"}},
		{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "ci", Name: flowcontrolv1.NameAll}},
	}
	_, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, named, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return seenAs("bob") == "bob" }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "system:serviceaccount:ci:builder", seenAs("system:serviceaccount:ci:builder"))
	require.Equal(t, "team-a/alice", seenAs("alice"))

	// And qualified again once the schema is gone.
	require.NoError(t, client.FlowcontrolV1().FlowSchemas().Delete(ctx, "named", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return seenAs("bob") == "team-a/bob" }, 10*time.Second, 10*time.Millisecond)
}
