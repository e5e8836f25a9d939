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
	"slices"
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
	// stalls is how many requests the server's log says ran past their
	// timeout during the run's measurements (stallMarks).
	stalls int
}

// stalled says whether the server stalled during r on n edges: requests
// of at least 1 % of the edges ran past their timeout. Its CPU is then
// the stall's as much as the strategy's (a stall that resets the syncers'
// tunnels has every one of them open its watches again); a few requests
// past their timeout, a queue's tail, are not.
func (r *rolloutResult) stalled(n int) bool { return r.stalls*100 >= n }

func rolloutsSection(o liveOptions) string { return o.section("rollouts") }

func rolloutsBench(ctx context.Context, bin string, o liveOptions, repeat int, progress func(string, ...any)) ([]row, error) {
	progress = prefixed(progress, "rollouts: ")
	return onLiveFleet(ctx, bin, o, progress, func(f *liveFleet) ([]row, error) { return rolloutsMeasure(ctx, f, o, repeat, progress) })
}

// rolloutsMeasure is the rollouts section on its fleet: repeat runs of
// All and Progressive, in turns, each run's in namespaces of their own. The fleet
// is started once (its start is most of the section's time at 1,000
// edges), so a later run's edges also hold the earlier runs' copies; the
// fleet's cost at rest is measured again before each run for that.
func rolloutsMeasure(ctx context.Context, f *liveFleet, o liveOptions, repeat int, progress func(string, ...any)) ([]row, error) {
	n, m := o.edges, o.objects
	pid := f.s.cmd.Process.Pid
	// restRate is what the fleet costs at rest, per second: heartbeats
	// and the controllers' resyncs go on during a rollout too.
	restRate := func() (float64, error) {
		if _, err := settle(ctx, pid, 2*time.Minute); err != nil {
			return 0, err
		}
		const restSample = 20 * time.Second
		cpu0, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		if err := sleep(ctx, restSample); err != nil {
			return 0, err
		}
		cpu1, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		rate := float64(cpu1-cpu0) / float64(restSample)
		progress("the server at rest: %.1f %% of a core", 100*rate)
		return rate, nil
	}

	if err := rolloutWarmUp(ctx, f, n, progress); err != nil {
		return nil, err
	}
	var alls, progs []*rolloutResult
	for run := 1; run <= repeat; run++ {
		if repeat > 1 {
			progress("run %d of %d", run, repeat)
		}
		rest, err := restRate()
		if err != nil {
			return nil, err
		}
		// Each measurement's edges hold the copies of those before it,
		// which every reconcile of their mailboxes reads: the strategies
		// take turns at going first (All, Progressive; Progressive, All;
		// ...), so that neither is always measured on the fuller fleet.
		order := []edgev2alpha1.RolloutStrategy{edgev2alpha1.RolloutAll, edgev2alpha1.RolloutProgressive}
		if run%2 == 0 {
			order[0], order[1] = order[1], order[0]
		}
		for _, strategy := range order {
			r, err := rolloutRun(ctx, f, o, strategy, run, rest, progress)
			if err != nil {
				return nil, err
			}
			if strategy == edgev2alpha1.RolloutAll {
				alls = append(alls, r)
			} else {
				progs = append(progs, r)
			}
		}
	}
	rows, err := rolloutRows(n, m, alls, progs)
	if err == nil && slices.ContainsFunc(append(alls, progs...), func(r *rolloutResult) bool { return r.stalled(n) }) {
		progress("the server stalled during a measurement%s", f.keepLogs())
	}
	return rows, err
}

// rolloutWarmUp places one ConfigMap on every edge, unmeasured, and
// leaves it there: the first placement of a resource has each syncer
// start its reads of it (a LIST of the mailbox's ConfigMaps and of its
// namespaces), which the first run's All would pay and its Progressive
// not.
func rolloutWarmUp(ctx context.Context, f *liveFleet, n int, progress func(string, ...any)) error {
	const ns = liveNamespace + "-warm"
	progress("warming up: one ConfigMap on every edge, so that each syncer reads ConfigMaps before the runs")
	if err := createLiveObjects(ctx, kubernetes.NewForConfigOrDie(f.s.config(liveWDS)), ns, 1); err != nil {
		return err
	}
	ep := placementObject(ns, map[string]string{"env": "live"},
		edgev2alpha1.DownsyncClause{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{ns}})
	u, err := toUnstructured(ep)
	if err != nil {
		return err
	}
	if _, err := dynamic.NewForConfigOrDie(f.s.config(liveWDS)).Resource(epGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return err
	}
	return f.sim.wait(ctx, 10*time.Minute, "the warm-up's copy on every edge", progress,
		func(r simReport) int { return int(r.Objects[ns]) }, n)
}

// rolloutRows are the section's rows from each run's All and Progressive
// results on n edges with m objects each: one run's figures, or over
// several each figure's median with the min and max.
func rolloutRows(n, m int, alls, progs []*rolloutResult) ([]row, error) {
	// Per run: the canary wave's p50 and max, and when each wave's last
	// edge had the update.
	var canary50, canaryMax []time.Duration
	canaryEdges := 0
	reached := map[string][]time.Duration{}
	for _, prog := range progs {
		var canary []time.Duration
		last := map[string]time.Duration{}
		for i, d := range prog.arrivals {
			ring := ringOf(i, n)
			last[ring] = max(last[ring], d)
			if ring == liveRings[0].name {
				canary = append(canary, d)
			}
		}
		if len(canary) == 0 {
			return nil, fmt.Errorf("no edge of %d is in the canary wave", n)
		}
		sort.Slice(canary, func(i, j int) bool { return canary[i] < canary[j] })
		canaryEdges = len(canary)
		canary50, canaryMax = append(canary50, percentile(canary, 50)), append(canaryMax, canary[len(canary)-1])
		for ring, d := range last {
			reached[ring] = append(reached[ring], d)
		}
	}
	wavesOf := "each wave's last edge"
	if len(progs) > 1 {
		wavesOf += " (medians)"
	}
	var waves []string
	for _, r := range append(liveRings, struct {
		name string
		upTo int
	}{"rest", 100}) {
		waves = append(waves, fmt.Sprintf("%s %s", r.name, long(time.Duration(durationSpread(reached[r.name]).median))))
	}

	// over is a figure of each run's result, shown over the runs.
	over := func(results []*rolloutResult, fig func(*rolloutResult) time.Duration, format func(time.Duration) string) string {
		ds := make([]time.Duration, len(results))
		for i, r := range results {
			ds[i] = fig(r)
		}
		return durationSpread(ds).show(asDuration(format))
	}
	// cpuOver is the server's CPU of each run's result per copy (or per
	// edge: per n), shown over the runs.
	cpuOver := func(results []*rolloutResult, cpu func(*rolloutResult) time.Duration, per int) string {
		values := make([]float64, len(results))
		for i, r := range results {
			values[i] = float64(cpu(r).Microseconds()) / float64(per)
		}
		return spreadOf(values).show(func(v float64) string { return fmt.Sprintf("%.0f µs", v) })
	}
	// ratio is Progressive's CPU ÷ All's. Over several runs it is taken
	// per pair of runs (1 and 2, 3 and 4, ...), summing each strategy's
	// CPU over the pair: the strategies take turns at going first, and a
	// measurement made second is dearer (the fleet holds the first's
	// copies), so a pair measures each once first and once second and
	// the order cancels within it. A last run without its pair is left
	// out of the ratio; so is a pair whose All's CPU was not above the
	// fleet's at rest, and a pair during which the server stalled (said
	// beside the ratio: a stall's CPU is not the strategy's).
	ratio := func(cpu func(*rolloutResult) time.Duration) (string, spread, string) {
		var ratios []float64
		var stalled []string
		step := 2
		if len(alls) == 1 {
			step = 1
		}
		for i := 0; i+step <= len(alls); i += step {
			var a, p time.Duration
			stalls := 0
			for j := i; j < i+step; j++ {
				a, p = a+cpu(alls[j]), p+cpu(progs[j])
				if alls[j].stalled(n) || progs[j].stalled(n) {
					stalls++
				}
			}
			if stalls > 0 {
				stalled = append(stalled, fmt.Sprintf("%.2f×", float64(p.Microseconds())/float64(max(a.Microseconds(), 1))))
				continue
			}
			if a > 0 {
				ratios = append(ratios, float64(p.Microseconds())/float64(a.Microseconds()))
			}
		}
		left := ""
		if len(stalled) > 0 {
			left = fmt.Sprintf("; left out, the server stalled: %s", strings.Join(stalled, ", "))
		}
		if len(ratios) == 0 {
			return "n/a", spread{}, left
		}
		s := spreadOf(ratios)
		if step == 2 {
			s.of = "pairs of runs"
		}
		return s.show(times), s, left
	}
	placeCPU := func(r *rolloutResult) time.Duration { return r.placeCPU }
	updateCPU := func(r *rolloutResult) time.Duration { return r.updateCPU }
	placeRatio, placeSpread, placeLeft := ratio(placeCPU)
	updateRatio, _, updateLeft := ratio(updateCPU)
	fleet := fmt.Sprintf("%d live edges in 5 waves (canary 1 %%, early 4 %%, middle 15 %%, late 30 %%, rest 50 %%), minSuccessTime 0", n)
	return []row{
		{fmt.Sprintf("place %d ConfigMaps × %d live edges, All", m, n), over(alls, func(r *rolloutResult) time.Duration { return r.place }, long),
			fmt.Sprintf("until every edge cluster holds every copy; %s server CPU per copy, less the fleet at rest", cpuOver(alls, placeCPU, n*m))},
		{fmt.Sprintf("place %d ConfigMaps × %d live edges, Progressive", m, n), over(progs, func(r *rolloutResult) time.Duration { return r.place }, long),
			fmt.Sprintf("until the rollout is Complete; %s server CPU per copy; %s", cpuOver(progs, placeCPU, n*m), fleet)},
		{"server CPU per copy placed, Progressive ÷ All", placeRatio, "target ≤ 1.10×" + placeSpread.judged() + placeLeft},
		{fmt.Sprintf("one ConfigMap updated → all %d live edges, All", n), over(alls, func(r *rolloutResult) time.Duration { return r.update }, long),
			fmt.Sprintf("%s server CPU per edge", cpuOver(alls, updateCPU, n))},
		{fmt.Sprintf("one ConfigMap updated → canary wave (%d edges), Progressive, p50", canaryEdges), durationSpread(canary50).show(asDuration(long)),
			fmt.Sprintf("from the WDS update to each edge cluster's write; max %s; target ≤ 1 s", durationSpread(canaryMax).show(asDuration(long)))},
		{fmt.Sprintf("one ConfigMap updated → all %d live edges, Progressive", n), over(progs, func(r *rolloutResult) time.Duration { return r.update }, long),
			fmt.Sprintf("until the rollout is Complete; %s: %s; %s server CPU per edge", wavesOf, strings.Join(waves, ", "), cpuOver(progs, updateCPU, n))},
		{"server CPU per edge for one update, Progressive ÷ All", updateRatio,
			fmt.Sprintf("a new revision writes, in each mailbox, the copy that changed (of the placement's %d) and the record of the revision, and the syncer reports on the record once%s", m, updateLeft)},
	}, nil
}

// rolloutRun places m ConfigMaps of a namespace of their own on every
// edge with strategy, then updates one, and measures both; run (from 1)
// tells -repeat's runs' namespaces and profiles apart.
func rolloutRun(ctx context.Context, f *liveFleet, o liveOptions, strategy edgev2alpha1.RolloutStrategy, run int, restRate float64, progress func(string, ...any)) (*rolloutResult, error) {
	n, m := o.edges, o.objects
	r := &rolloutResult{}
	ns := liveNamespace + "-" + strings.ToLower(string(strategy))
	if run > 1 {
		ns += fmt.Sprintf("-%d", run)
	}
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
			stop, err := cpuProfile(ctx, f.s, filepath.Join(o.profiles, fmt.Sprintf("%s-%s.pb.gz", strings.TrimPrefix(ns, liveNamespace+"-"), strings.Fields(what)[1])))
			if err != nil {
				return 0, 0, err
			}
			defer stop()
		}
		// Where its requests go, printed when it has settled: what
		// Progressive adds to All, request by request.
		requests0, err := requestCounts(ctx, f.s)
		if err != nil {
			return 0, 0, err
		}
		cpu0, err := procCPU(pid)
		if err != nil {
			return 0, 0, err
		}
		f.sim.takeLag()
		began := time.Now()
		if err := change(); err != nil {
			return 0, 0, err
		}
		logAt := f.serverLogSize()
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
		progress("%s, %s: %s, %s of the server's CPU beyond the fleet's at rest; the simulated edges ran up to %s late", what, strategy, long(took), long(max(cpu, 0)), long(f.sim.takeLag()))
		if drops, _ := f.logSince(logAt, []string{dropMark}); drops > 0 {
			progress("the server dropped %d tunnels for silence during %s, %s", drops, what, strategy)
		}
		if stalls, first := f.logSince(logAt, stallMarks); stalls > 0 {
			r.stalls += stalls
			progress("the server stalled during %s, %s: %d requests ran past their timeout; the first:", what, strategy, stalls)
			for _, line := range first {
				progress("  %s", line)
			}
		}
		if slow, first := f.logSince(logAt, maintenanceMarks); slow > 0 {
			progress("the datastore's maintenance was slow %d times during %s, %s; the first:", slow, what, strategy)
			for _, line := range first {
				progress("  %s", line)
			}
		}
		if requests1, err := requestCounts(ctx, f.s); err == nil {
			progress("the server's busiest requests, %s, %s:", what, strategy)
			for _, line := range busiest(requests0, requests1, 20) {
				progress("%s", line)
			}
		}
		return took, max(cpu, 0), nil
	}

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
