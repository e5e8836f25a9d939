// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The rollouts section: what a Progressive rollout costs the server
// beside today's All, over the same live fleet (liveedges.go): the real
// syncer of each simulated edge applies the copies and reports their
// health (one report per mailbox and revision, in its SyncerConfig's
// status), which is what moves a Progressive rollout from wave to wave.
//
// Each strategy gets a namespace of its own in the WDS with -live-objects
// ConfigMaps and a placement of them on every edge: first the placement
// (every copy new), then one ConfigMap updated (a new revision). The
// server's CPU is counted from the change until every edge cluster holds
// it, the rollout is Complete and the server has settled, less what the
// fleet costs at rest over as long (measured just before), so that the
// slower Progressive rollout is not charged for the heartbeats of its
// longer run.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// rolloutResult is what one strategy's changes cost.
type rolloutResult struct {
	// place and update are how long the placement and the update took to
	// reach every edge (and, Progressive, to be Complete).
	place, update time.Duration
	// placeCPU and updateCPU are the server's CPU for each, less the
	// fleet's at rest over as long.
	placeCPU, updateCPU time.Duration
	// arrivals is when each edge stored the update, from the update.
	arrivals []time.Duration
}

func rolloutsSection(o liveOptions) string { return o.section("rollouts") }

func rolloutsBench(ctx context.Context, bin string, o liveOptions, progress func(string, ...any)) ([]row, error) {
	progress = prefixed(progress, "rollouts: ")
	return onLiveFleet(ctx, bin, o.edges, progress, func(f *liveFleet) ([]row, error) { return rolloutsMeasure(ctx, f, o, progress) })
}

// rolloutsMeasure is the rollouts section on its fleet.
func rolloutsMeasure(ctx context.Context, f *liveFleet, o liveOptions, progress func(string, ...any)) ([]row, error) {
	n, m := o.edges, o.objects
	pid := f.s.cmd.Process.Pid
	if _, err := settle(ctx, pid, 2*time.Minute); err != nil {
		return nil, err
	}
	// What the fleet costs at rest, per second: heartbeats and the
	// controllers' resyncs go on during a rollout too.
	const restSample = 20 * time.Second
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, restSample); err != nil {
		return nil, err
	}
	cpu1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	restRate := float64(cpu1-cpu0) / float64(restSample)
	progress("the server at rest: %.1f %% of a core", 100*restRate)

	all, err := rolloutRun(ctx, f, o, edgev2alpha1.RolloutAll, restRate, progress)
	if err != nil {
		return nil, err
	}
	prog, err := rolloutRun(ctx, f, o, edgev2alpha1.RolloutProgressive, restRate, progress)
	if err != nil {
		return nil, err
	}

	var canary []time.Duration
	reached := map[string]time.Duration{}
	for i, d := range prog.arrivals {
		ring := ringOf(i, n)
		reached[ring] = max(reached[ring], d)
		if ring == liveRings[0].name {
			canary = append(canary, d)
		}
	}
	sort.Slice(canary, func(i, j int) bool { return canary[i] < canary[j] })
	var waves []string
	for _, r := range append(liveRings, struct {
		name string
		upTo int
	}{"rest", 100}) {
		waves = append(waves, fmt.Sprintf("%s %s", r.name, long(reached[r.name])))
	}
	perCopy := func(cpu time.Duration) float64 { return float64(cpu.Microseconds()) / float64(n*m) }
	perEdge := func(cpu time.Duration) float64 { return float64(cpu.Microseconds()) / float64(n) }
	ratio := func(a, b float64) string {
		if b <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	fleet := fmt.Sprintf("%d live edges in 5 waves (canary 1 %%, early 4 %%, middle 15 %%, late 30 %%, rest 50 %%), minSuccessTime 0", n)
	if len(canary) == 0 {
		return nil, fmt.Errorf("no edge of %d is in the canary wave", n)
	}
	return []row{
		{fmt.Sprintf("place %d ConfigMaps × %d live edges, All", m, n), long(all.place),
			fmt.Sprintf("until every edge cluster holds every copy; %.0f µs server CPU per copy, less the fleet at rest", perCopy(all.placeCPU))},
		{fmt.Sprintf("place %d ConfigMaps × %d live edges, Progressive", m, n), long(prog.place),
			fmt.Sprintf("until the rollout is Complete; %.0f µs server CPU per copy; %s", perCopy(prog.placeCPU), fleet)},
		{"server CPU per copy placed, Progressive ÷ All", ratio(perCopy(prog.placeCPU), perCopy(all.placeCPU)), "target ≤ 1.10×"},
		{fmt.Sprintf("one ConfigMap updated → all %d live edges, All", n), long(all.update),
			fmt.Sprintf("%.0f µs server CPU per edge", perEdge(all.updateCPU))},
		{fmt.Sprintf("one ConfigMap updated → canary wave (%d edges), Progressive, p50", len(canary)), long(percentile(canary, 50)),
			fmt.Sprintf("from the WDS update to each edge cluster's write; max %s; target ≤ 1 s", long(canary[len(canary)-1]))},
		{fmt.Sprintf("one ConfigMap updated → all %d live edges, Progressive", n), long(prog.update),
			fmt.Sprintf("until the rollout is Complete; each wave's last edge: %s; %.0f µs server CPU per edge", strings.Join(waves, ", "), perEdge(prog.updateCPU))},
		{"server CPU per edge for one update, Progressive ÷ All", ratio(perEdge(prog.updateCPU), perEdge(all.updateCPU)),
			fmt.Sprintf("a new revision writes, in each mailbox, the copy that changed (of the placement's %d) and the record of the revision, and the syncer reports on the record once", m)},
	}, nil
}

// rolloutRun places m ConfigMaps of a namespace of their own on every
// edge with strategy, then updates one, and measures both.
func rolloutRun(ctx context.Context, f *liveFleet, o liveOptions, strategy edgev2alpha1.RolloutStrategy, restRate float64, progress func(string, ...any)) (*rolloutResult, error) {
	n, m := o.edges, o.objects
	ns := liveNamespace + "-" + strings.ToLower(string(strategy))
	name := ns
	wds := kubernetes.NewForConfigOrDie(f.s.config(liveWDS))
	placements := dynamic.NewForConfigOrDie(f.s.config(liveWDS)).Resource(epGVR)
	if err := createLiveObjects(ctx, wds, ns, m); err != nil {
		return nil, err
	}
	pid := f.s.cmd.Process.Pid
	// measure runs change, then waits for every edge to have it (count),
	// for the rollout to be Complete and for the server to settle, and
	// returns how long until the first two and the CPU until the third.
	measure := func(what string, change func() error, count func(simReport) int, want int) (time.Duration, time.Duration, error) {
		progress("%s, %s", what, strategy)
		if o.profiles != "" {
			stop, err := cpuProfile(ctx, f.s, filepath.Join(o.profiles, fmt.Sprintf("%s-%s.pb.gz", strings.ToLower(string(strategy)), strings.Fields(what)[1])))
			if err != nil {
				return 0, 0, err
			}
			defer stop()
		}
		cpu0, err := procCPU(pid)
		if err != nil {
			return 0, 0, err
		}
		began := time.Now()
		if err := change(); err != nil {
			return 0, 0, err
		}
		if err := f.sim.wait(ctx, 30*time.Minute, what, progress, count, want); err != nil {
			return 0, 0, err
		}
		if strategy == edgev2alpha1.RolloutProgressive {
			if err := rolloutComplete(ctx, placements, name, n, progress); err != nil {
				return 0, 0, err
			}
		}
		took := time.Since(began)
		if _, err := settle(ctx, pid, 2*time.Minute); err != nil {
			return 0, 0, err
		}
		cpu1, err := procCPU(pid)
		if err != nil {
			return 0, 0, err
		}
		cpu := cpu1 - cpu0 - time.Duration(restRate*float64(time.Since(began)))
		return took, max(cpu, 0), nil
	}

	r := &rolloutResult{}
	ep := placementObject(name, map[string]string{"env": "live"},
		edgev2alpha1.DownsyncClause{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{ns}})
	ep.Spec.WantSingletonReportedState = false
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: strategy}
	if strategy == edgev2alpha1.RolloutProgressive {
		for _, ring := range liveRings {
			ep.Spec.Rollout.Waves = append(ep.Spec.Rollout.Waves, edgev2alpha1.RolloutWave{Name: ring.name,
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": ring.name}}})
		}
	}
	u, err := toUnstructured(ep)
	if err != nil {
		return nil, err
	}
	if r.place, r.placeCPU, err = measure(fmt.Sprintf("%d copies in the edge clusters", m*n), func() error {
		_, err := placements.Create(ctx, u, metav1.CreateOptions{})
		return err
	}, func(r simReport) int { return int(r.Objects[ns]) }, m*n); err != nil {
		return nil, err
	}

	key := probeKey(ns, "2")
	var updated time.Time
	if r.update, r.updateCPU, err = measure(fmt.Sprintf("%d edges with the update", n), func() error {
		probe, err := wds.CoreV1().ConfigMaps(ns).Get(ctx, liveProbe, metav1.GetOptions{})
		if err != nil {
			return err
		}
		probe.Data["v"] = "2"
		updated = time.Now()
		_, err = wds.CoreV1().ConfigMaps(ns).Update(ctx, probe, metav1.UpdateOptions{})
		return err
	}, func(r simReport) int {
		if len(f.sim.arrivals(key)) == n {
			return n
		}
		return min(r.Probe[key], n-1)
	}, n); err != nil {
		return nil, err
	}
	for _, t := range f.sim.arrivals(key) {
		r.arrivals = append(r.arrivals, time.Unix(0, t).Sub(updated))
	}
	return r, nil
}

// rolloutComplete waits for a placement's rollout to be Complete at its
// current revision with every one of n destinations healthy.
func rolloutComplete(ctx context.Context, placements dynamic.ResourceInterface, name string, n int, progress func(string, ...any)) error {
	return pollProgress(ctx, 10*time.Minute, "destinations healthy in a Complete rollout", progress, func(ctx context.Context) (int, error) {
		u, err := placements.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		var ep edgev2alpha1.EdgePlacement
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep); err != nil {
			return 0, err
		}
		ro := ep.Status.Rollout
		if ro == nil {
			return 0, nil
		}
		healthy := 0
		for _, w := range ro.Waves {
			healthy += int(w.Healthy)
		}
		if ro.Phase != edgev2alpha1.RolloutPhaseComplete || ro.CompletedRevision != ro.Revision {
			healthy = min(healthy, n-1)
		}
		return healthy, nil
	}, n)
}

// cpuProfile starts a 30-second CPU profile of the server and returns
// what waits for it to end and be written to path.
func cpuProfile(ctx context.Context, s *server, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := adminGet(ctx, s, "/debug/pprof/profile?seconds=30")
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: the CPU profile for %s: %v\n", path, err)
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		}
	}()
	return func() { <-done }, nil
}
