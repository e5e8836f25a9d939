// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bench measures a kubestellar server built from this tree and
// prints the figures as a table: time to ready, memory at rest and with many
// spaces, write throughput, watch latency and list latency, the fan-out of
// placements, the edge syncer's latencies and memory against a real edge
// cluster, and the reverse tunnels: many syncers' tunnels held by one server
// (memory, CPU, coming back after a restart) and requests forwarded through
// one compared with the same requests sent to the edge directly; and our
// server side by side with the stock kube-apiserver, on kine/SQLite and on
// etcd (stock.go).
//
//	go -C test/bench run .   (make bench)
//
// It is a module of its own (go.mod says why). Wherever it runs from, it
// measures _output/kubestellar and writes to _output/bench/ at the
// repository's root unless told otherwise (-kubestellar, -out).
//
// Before measuring anything it checks that what the chosen sections need is
// here (preflight.go); `make bench` installs it first (make bench-deps).
//
// Two runs replace the sections: the soak (-soak, make soak) and the chaos
// test (-chaos, make chaos); see soak.go and chaos.go.
//
// Every section's size flag skips the section when 0, e.g. only the syncer:
//
//	go run . -ready-repeats 0 -throughput-objects 0 -latency-samples 0 \
//		-list-objects 0 -spaces 0 -fanout-targets 0 -syncer-objects 200 \
//		-tunnels 0 -forward-requests 0 -live-edges 0
//
// Some goals sit at this machine's noise: the stock comparison's creates
// and LIST ratios, the rollouts' Progressive ÷ All CPU ratios and the
// syncer's create → edge p99 at 500 creates/s. -repeat N measures those N
// times and judges them on the median, shown with the min and max
// (repeat.go):
//
//	make bench BENCH_ARGS='-repeat 5'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
	"github.com/kubestellar/kubestellar/test/harness/databases"
)

type options struct {
	bin          string
	spaces       int
	perSpace     int
	throughputN  int
	latencyN     int
	listN        int
	readyRepeats int
	fanTargets   int
	fanObjects   int
	// fanSyncerWatches holds a watch of each mailbox during the fan-out.
	fanSyncerWatches bool
	syncer           syncerOptions
	tunnel           tunnelOptions
	datastoreN       int
	stockN           int
	tenants          tenantOptions
	flood            floodOptions
	churn            churnOptions
	noise            noiseOptions
	soak             soakOptions
	chaos            chaosOptions
	dashboard        dashboardOptions
	live             liveOptions
	rolloutEdges     int
	haEdges          int
	crds             crdOptions
	// repeat is how many times the figures whose goals sit at the
	// machine's noise are measured (repeat.go).
	repeat int
	// out is where the report goes ("" for nowhere).
	out string
	// record and doc are the performance record and doc a run updates
	// (perfdoc.go; "" for none); docsOnly writes the doc from the record
	// and measures nothing.
	record, doc string
	docsOnly    bool
	// merge is a saved report to merge into the record instead of
	// measuring.
	merge string
	// compare is two reports to compare instead of measuring.
	compare []string
}

// rollouts is the rollouts section's fleet: -rollout-edges live edges
// with -live-objects ConfigMaps each.
func (o options) rollouts() liveOptions {
	r := o.live
	r.edges = o.rolloutEdges
	return r
}

// ha is the HA section's fleet: -ha-edges live edges with -live-objects
// ConfigMaps each.
func (o options) ha() liveOptions {
	r := o.live
	r.edges = o.haEdges
	return r
}

// serverSections reports whether any section measuring one server runs.
func (o options) serverSections() bool {
	return o.throughputN > 0 || o.latencyN > 0 || o.listN > 0 || o.spaces > 0
}

func main() {
	o := options{}
	flag.StringVar(&o.bin, "kubestellar", filepath.Join(harness.RepoRoot(), "_output", "kubestellar"), "the kubestellar binary to measure")
	flag.IntVar(&o.spaces, "spaces", 1000, "spaces to create for the memory-per-space figure (0 skips it and the restart)")
	flag.IntVar(&o.perSpace, "objects-per-space", 10, "ConfigMaps to create in each of those spaces")
	flag.IntVar(&o.throughputN, "throughput-objects", 2000, "ConfigMaps to create per throughput run (0 skips)")
	flag.IntVar(&o.latencyN, "latency-samples", 500, "create-to-watch-event samples (0 skips)")
	flag.IntVar(&o.listN, "list-objects", 1000, "objects in the listed namespace (0 skips)")
	flag.IntVar(&o.readyRepeats, "ready-repeats", 5, "cold starts to time (0 skips)")
	flag.IntVar(&o.fanTargets, "fanout-targets", 1000, "SyncTargets to place objects on (0 skips the fan-out)")
	flag.IntVar(&o.fanObjects, "fanout-objects", 100, "objects to place on every SyncTarget")
	flag.BoolVar(&o.fanSyncerWatches, "fanout-syncer-watches", false, "fan-out: hold a watch of the copies in each mailbox, as its syncer does")
	flag.IntVar(&o.syncer.objects, "syncer-objects", 200, "ConfigMaps, and Gauges, synced to one real edge cluster (0 skips the syncer section)")
	flag.Float64Var(&o.syncer.rate, "syncer-rate", 20, "creates and edge status patches per second in the syncer section")
	flag.IntVar(&o.syncer.burstObjects, "syncer-burst-objects", 1000, "syncer: ConfigMaps created last at -syncer-burst-rate, for the propagation latency under load (0 skips)")
	flag.Float64Var(&o.syncer.burstRate, "syncer-burst-rate", 500, "syncer: creates per second of the burst")
	flag.IntVar(&o.tunnel.tunnels, "tunnels", 1000, "simulated syncers holding a tunnel to one server, for its memory, CPU and restart figures (0 skips)")
	flag.IntVar(&o.tunnel.requests, "forward-requests", 2000, "GETs sent to one real edge cluster directly, and again through the center's edge proxy (0 skips)")
	flag.IntVar(&o.tunnel.workers, "forward-workers", 8, "concurrent GETs in the forwarding comparison")
	flag.BoolVar(&o.tunnel.konnectivity, "forward-konnectivity", true, "forwarding comparison: send the GETs through konnectivity too, the reference tunnel (built from Go modules on first use)")
	flag.IntVar(&o.datastoreN, "datastore-objects", 1000, "ConfigMaps created on SQLite, and on PostgreSQL, MySQL and etcd (two servers each), for write throughput and watch latency (0 skips)")
	flag.IntVar(&o.stockN, "stock-objects", 2000, "side by side with the stock kube-apiserver, each on a fresh kine/SQLite, then ours on its embedded SQLite against the stock one on kine/SQLite, then both on etcd: ConfigMaps per 32-client create run (a quarter with 1 client) and in the listed namespace (0 skips)")
	flag.IntVar(&o.tenants.samples, "tenant-samples", 300, "creates by the quiet space's one client, alone and beside the noisy space, in the tenants section (0 skips it)")
	flag.IntVar(&o.tenants.noisyWriters, "noisy-writers", 64, "tenants: concurrent writers in the noisy space")
	flag.IntVar(&o.tenants.throughputN, "tenant-throughput-objects", 2000, "tenants: creates by 32 clients as a user and as the admin, for the cost of RBAC (0 skips)")
	flag.IntVar(&o.flood.samples, "flood-samples", 300, "creates by a quiet tenant before and during another tenant's flood of its spaces to their default limits (0 skips the flood section)")
	flag.IntVar(&o.flood.writers, "flood-writers", 8, "flood: the flooding tenant's concurrent writers")
	flag.DurationVar(&o.churn.duration, "churn", 2*time.Minute, "how long to churn the SQLite datastore (creates, updates, deletes, as the API server writes) for its files' sizes during and after (0 skips the churn section)")
	flag.DurationVar(&o.churn.compact, "churn-compact", 20*time.Second, "churn: the compaction interval (the server's is 5 minutes), so that the churn sees several")
	flag.IntVar(&o.dashboard.targets, "dashboard-targets", 1000, "SyncTargets shown by the dashboard, for its first render in chromium and the server's CPU with dashboards open (0 skips)")
	flag.IntVar(&o.dashboard.sessions, "dashboard-sessions", 10, "dashboards (sessions with the fleet's event stream) open at rest for the CPU figure")
	flag.IntVar(&o.dashboard.renders, "dashboard-renders", 5, "loads of the fleet view timed in chromium")
	flag.IntVar(&o.live.edges, "live-edges", 1000, "live edges: simulated edges, each the real syncer against an edge cluster in memory, run in a process of their own (liveedges.go), for the server with a live fleet: connect, at rest, fan-out, one update (0 skips)")
	flag.IntVar(&o.live.objects, "live-objects", 10, "live edges: ConfigMaps placed on every edge")
	flag.Float64Var(&o.live.startRate, "live-start-rate", 0, "live edges, rollouts and HA: how many syncers a second the fleet starts, as a fleet comes online (0: all at once, a storm; the restart is a storm either way)")
	flag.DurationVar(&o.live.rest, "live-rest", time.Minute, "live edges: how long the fleet is watched at rest, sampling whether any edge is shown disconnected")
	flag.StringVar(&o.live.profiles, "profiles", "", "a directory to write the server's profiles into (pprof), for what it spends its CPU and memory on: the live edges' heap at rest (live-rest-heap.pb.gz, after a collection), the rollouts' CPU over the first 30 s of each measured change, and the fan-out's over the first 30 s of its mailboxes' making")
	flag.IntVar(&o.rolloutEdges, "rollout-edges", 1000, "rollouts: live edges (as -live-edges) on which -live-objects ConfigMaps are placed and one updated, with strategy All and then Progressive in 5 waves, for what a Progressive rollout costs the server (rollouts.go; 0 skips)")
	flag.IntVar(&o.haEdges, "ha-edges", 0, "HA: live edges (as -live-edges) spread over 3 servers sharing one PostgreSQL, with -live-objects ConfigMaps each; the leading server is killed with SIGKILL and its edges' move to the others and every mailbox's exactness are timed (ha.go; 0 skips)")
	flag.IntVar(&o.crds.spaces, "crd-spaces", 1000, "CRDs: spaces that each install the same 10 CRDs, bound (--crds-per-space=false) and then per space (the default), each on a fresh server, for the memory per space (0 skips the section)")
	flag.IntVar(&o.crds.own, "crd-own-spaces", 100, "CRDs: spaces that each install 10 CRDs of their own, in each layout")
	flag.IntVar(&o.crds.objects, "crd-objects", 200, "CRDs: custom resources created one by one and listed in one space, in each layout")
	flag.IntVar(&o.repeat, "repeat", 1, "measure the figures whose goals sit at this machine's noise this many times, and show each as its median (which the goal is judged on) with the min and max: the stock comparison's creates and LIST ratios (each run on fresh servers), the rollouts' Progressive ÷ All CPU ratios (on the same fleet) and the syncer's burst of creates at -syncer-burst-rate (make bench BENCH_ARGS='-repeat 5')")
	flag.StringVar(&o.live.simulate, "simulate-edges", "", "internal: run as the live edges' simulator, with this spec file")
	flag.IntVar(&o.live.nice, "sim-nice", -1, "live edges and rollouts: the simulators' niceness (nice(1)); by default 0 up to two simulator processes (5,000 edges) and 10 beyond. Above 0 they yield the cores to the server when both want them, and starve in its bursts (their pings run late and the server drops their tunnels); at 0 four of them starve the server (docs/performance.md)")
	flag.StringVar(&o.noise.kubeconfig, "noise-kubeconfig", "", "internal: run as the tenants section's noisy tenant, with this admin kubeconfig's server and CA")
	flag.StringVar(&o.noise.space, "noise-space", "", "internal: the noisy tenant's space")
	flag.IntVar(&o.noise.writers, "noise-writers", 0, "internal: the noisy tenant's writers")
	flag.StringVar(&o.out, "out", filepath.Join(harness.RepoRoot(), "_output", "bench"), "directory the run's figures are written to, as JSON and Markdown, section by section (empty: nowhere)")
	flag.StringVar(&o.record, "record", filepath.Join(harness.RepoRoot(), "docs", "performance.json"), "the performance record each run merges its sections into, for the doc's table (empty: none)")
	flag.StringVar(&o.doc, "doc", filepath.Join(harness.RepoRoot(), "docs", "performance.md"), "the doc whose generated table a run writes again from the record (empty: none)")
	flag.BoolVar(&o.docsOnly, "docs", false, "write the doc's table from the record, and measure nothing (make bench-docs)")
	flag.StringVar(&o.merge, "merge", "", "REPORT.json: merge a run's saved report (_output/bench/bench-....json) into -record and write -doc's table again, measuring nothing: for a run made with -record \"\" that turned out worth keeping")
	compare := flag.String("compare", "", "OLD.json,NEW.json: print the figures of two reports side by side with their ratios, and measure nothing (make bench-compare)")
	flag.BoolVar(&o.soak.on, "soak", false, "run the soak instead of the sections (soak.go): one server, simulated syncers, churn; fails on growth or anything unreconciled")
	flag.DurationVar(&o.soak.duration, "duration", 30*time.Minute, "soak: how long the churn runs, warm-up included")
	flag.DurationVar(&o.soak.warmup, "soak-warmup", 0, "soak: the warm-up, after which growth is measured (0: a sixth of -duration, at least the 5 min the datastore's history takes to fill, or half a shorter soak)")
	flag.IntVar(&o.soak.syncers, "soak-syncers", 50, "soak: simulated syncers (SyncTargets), each holding a tunnel and writing status")
	flag.Float64Var(&o.soak.rate, "soak-rate", 2, "soak: churn operations per second")
	flag.DurationVar(&o.soak.settle, "soak-settle", 5*time.Minute, "soak: how long everything may take to be reconciled once the churn pauses")
	flag.Float64Var(&o.soak.maxGrowth, "soak-max-growth", 0.10, "soak: the growth of RSS and goroutines after the warm-up that fails it, as a fraction")
	flag.Uint64Var(&o.soak.seed, "soak-seed", 1, "soak: seed of the churn's random choices")
	flag.BoolVar(&o.chaos.on, "chaos", false, "run the chaos test instead of the sections (chaos.go): kill -9 of the server while it propagates copies, restart, check every mailbox")
	flag.IntVar(&o.chaos.objects, "chaos-objects", 100, "chaos: ConfigMaps placed")
	flag.IntVar(&o.chaos.targets, "chaos-targets", 100, "chaos: SyncTargets they are placed on (copies = objects × targets)")
	flag.Float64Var(&o.chaos.killAt, "chaos-kill-at", 0.4, "chaos: the fraction of the copies made when the server is killed")
	flag.DurationVar(&o.chaos.converge, "chaos-converge", 10*time.Minute, "chaos: how long the restarted server may take to make every mailbox exact")
	flag.Parse()
	if *compare != "" {
		o.compare = strings.Split(*compare, ",")
		if len(o.compare) != 2 {
			fmt.Fprintln(os.Stderr, "bench: -compare wants OLD.json,NEW.json")
			os.Exit(2)
		}
	}
	if o.repeat < 1 {
		fmt.Fprintln(os.Stderr, "bench: -repeat must be at least 1")
		os.Exit(2)
	}
	o.syncer.bursts = o.repeat
	if o.syncer.objects > 0 && o.syncer.burstObjects > 0 && o.syncer.burstRate <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -syncer-burst-rate must be positive")
		os.Exit(2)
	}
	if o.syncer.objects > 0 && o.syncer.rate <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -syncer-rate must be positive")
		os.Exit(2)
	}
	if o.live.startRate < 0 {
		fmt.Fprintln(os.Stderr, "bench: -live-start-rate must be 0 (all at once) or positive")
		os.Exit(2)
	}
	if o.tunnel.requests > 0 && o.tunnel.workers <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -forward-workers must be positive")
		os.Exit(2)
	}
	// The first interrupt cancels ctx so that the bench stops what it started
	// (servers, the edge cluster, the syncer); a second one kills it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()
	var err error
	switch {
	case o.compare != nil:
		err = compareReports(os.Stdout, o.compare[0], o.compare[1])
	case o.docsOnly:
		err = docsOnly(o)
	case o.merge != "":
		err = mergeReport(o)
	case o.noise.kubeconfig != "":
		err = runNoise(ctx, o.noise)
	case o.live.simulate != "":
		err = runSimulatedEdges(ctx, o.live.simulate)
	default:
		err = run(ctx, o)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type row struct{ metric, value, note string }

func run(ctx context.Context, o options) error {
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("-kubestellar %s: %w (run 'make build')", o.bin, err)
	}
	switch {
	case o.soak.on && o.chaos.on:
		return errors.New("-soak and -chaos are separate runs: choose one")
	case o.soak.on:
		return runAlone(o, "soak", func() ([]row, error) { return soakRun(ctx, bin, o.soak) })
	case o.chaos.on:
		return runAlone(o, "chaos", func() ([]row, error) { return chaosRun(ctx, bin, o.chaos) })
	}
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
	if err := prerequisites(ctx, o, progress); err != nil {
		return err
	}
	rep := newReport(o.out, os.Stdout)
	// section runs one section: its rows are printed and saved as soon as
	// it ends; a failed one ends the run, with every earlier figure kept.
	section := func(name string, f func() ([]row, error)) error {
		rows, err := f()
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
		if saveErr := rep.add(name, rows, err); saveErr != nil && err == nil {
			err = saveErr
		}
		return err
	}
	err = runSections(ctx, bin, o, progress, section)
	if o.record != "" && o.doc != "" {
		// What was measured counts, even when a later section failed.
		if docErr := updateDocs(rep, o.record, o.doc); docErr != nil {
			err = errors.Join(err, fmt.Errorf("updating the performance doc: %w", docErr))
		} else if len(rep.Sections) > 0 {
			fmt.Fprintf(os.Stderr, "bench: merged into %s; %s's table written again from it\n", o.record, o.doc)
		}
	}
	if all := rep.rows(); len(all) > 0 {
		fmt.Println("\n== all figures")
		printRows(os.Stdout, all)
	}
	if o.out != "" {
		fmt.Fprintf(os.Stderr, "bench: the figures are in %s (JSON and Markdown; latest.json is the newest; make bench-compare OLD=... NEW=... compares two)\n",
			filepath.Join(o.out, rep.base+".json"))
	}
	return err
}

// fanoutSection names the fan-out section: "fan-out" for the default
// sizes, and with its sizes otherwise, so that the record keeps a run with
// other options beside the default one rather than in its place.
func fanoutSection(o options) string {
	if o.fanTargets == 1000 && o.fanObjects == 100 && !o.fanSyncerWatches {
		return "fan-out"
	}
	name := fmt.Sprintf("fan-out, %d SyncTargets × %d objects", o.fanTargets, o.fanObjects)
	if o.fanSyncerWatches {
		name += ", a syncer's watch per mailbox"
	}
	return name
}

// verdictError is a run that measured what it should and failed its
// checks (the soak's growth, the chaos test's exactness): its figures are
// recorded with the verdict, and the run still fails.
type verdictError struct{ error }

func (e *verdictError) Unwrap() error { return e.error }

// runAlone runs the soak or the chaos test as a report of one section,
// recorded and written into the doc as make bench's sections are.
func runAlone(o options, name string, f func() ([]row, error)) error {
	rep := newReport(o.out, os.Stdout)
	rows, err := f()
	var verdict *verdictError
	recordErr := err
	if errors.As(err, &verdict) {
		recordErr = nil
	}
	if saveErr := rep.add(name, rows, recordErr); saveErr != nil {
		err = errors.Join(err, saveErr)
	}
	if o.record != "" && o.doc != "" && recordErr == nil && len(rows) > 0 {
		if docErr := updateDocs(rep, o.record, o.doc); docErr != nil {
			err = errors.Join(err, fmt.Errorf("updating the performance doc: %w", docErr))
		} else {
			fmt.Fprintf(os.Stderr, "bench: merged into %s; %s's table written again from it\n", o.record, o.doc)
		}
	}
	return err
}

// runSections runs each section whose size is not 0, in order, through
// section.
func runSections(ctx context.Context, bin string, o options, progress func(string, ...any), section func(string, func() ([]row, error)) error) error {
	if o.readyRepeats > 0 {
		if err := section("cold start", func() ([]row, error) {
			progress("timing %d cold starts", o.readyRepeats)
			var readies []time.Duration
			for range o.readyRepeats {
				s, err := start(ctx, bin, "")
				if err != nil {
					return nil, err
				}
				readies = append(readies, s.ready)
				s.stop()
				os.RemoveAll(s.dataDir)
			}
			return []row{{"time to ready, fresh data dir (median)", ms(percentile(readies, 50)), fmt.Sprintf("%d starts; target < 2 s", o.readyRepeats)}}, nil
		}); err != nil {
			return err
		}
	}
	if o.serverSections() {
		if err := section("one server", func() ([]row, error) { return serverSections(ctx, bin, o, progress) }); err != nil {
			return err
		}
	}
	if o.fanTargets > 0 {
		if err := section(fanoutSection(o), func() ([]row, error) {
			fs, err := start(ctx, bin, "")
			if err != nil {
				return nil, err
			}
			// A failure keeps the server's data directory, whose log (and
			// datastore) the error names.
			failed := false
			defer func() {
				if !failed {
					os.RemoveAll(fs.dataDir)
				}
			}()
			defer fs.stop()
			rows, err := fanout(ctx, bin, fs, o.fanTargets, o.fanObjects, o.fanSyncerWatches, o.live.profiles, progress)
			if err != nil {
				failed = true
				return nil, fmt.Errorf("server log %s (kept with its data directory): %w", filepath.Join(fs.dataDir, "server.log"), err)
			}
			return rows, nil
		}); err != nil {
			return err
		}
	}
	if o.syncer.objects > 0 {
		if err := section("syncer", func() ([]row, error) {
			ss, err := start(ctx, bin, "")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(ss.dataDir)
			defer ss.stop()
			rows, err := syncerBench(ctx, bin, ss, o.syncer, progress)
			if err != nil {
				// The server's data dir goes too; keep the end of its log.
				return nil, fmt.Errorf("%w\n--- end of the server's log ---\n%s", err, tailFile(filepath.Join(ss.dataDir, "server.log"), 3000))
			}
			return rows, nil
		}); err != nil {
			return err
		}
	}
	sections := []struct {
		name string
		on   bool
		run  func() ([]row, error)
	}{
		{liveSection(o.live), o.live.edges > 0, func() ([]row, error) { return liveEdgesBench(ctx, bin, o.live, progress) }},
		{rolloutsSection(o.rollouts()), o.rolloutEdges > 0, func() ([]row, error) { return rolloutsBench(ctx, bin, o.rollouts(), o.repeat, progress) }},
		{haSection(o.ha()), o.haEdges > 0, func() ([]row, error) { return haBench(ctx, bin, o.ha(), progress) }},
		{"tunnels", o.tunnel.tunnels > 0, func() ([]row, error) { return tunnelsBench(ctx, bin, o.tunnel.tunnels, progress) }},
		{"forwarding", o.tunnel.requests > 0, func() ([]row, error) { return forwardBench(ctx, bin, o.tunnel, progress) }},
		{"tenants", o.tenants.samples > 0, func() ([]row, error) { return tenantsBench(ctx, bin, o.tenants, progress) }},
		{"flood", o.flood.samples > 0, func() ([]row, error) { return floodBench(ctx, bin, o.flood, progress) }},
		{"churn", o.churn.duration > 0, func() ([]row, error) { return churnBench(ctx, o.churn, progress) }},
		{"datastores", o.datastoreN > 0, func() ([]row, error) { return datastoreBench(ctx, bin, o.datastoreN, progress) }},
		{"stock kube-apiserver side by side", o.stockN > 0, func() ([]row, error) { return stockBench(ctx, bin, o.stockN, o.repeat, progress) }},
		{"dashboard", o.dashboard.targets > 0, func() ([]row, error) { return dashboardBench(ctx, bin, o.dashboard, progress) }},
		{"CRDs bound and per space", o.crds.spaces > 0, func() ([]row, error) { return crdsBench(ctx, bin, o.crds, progress) }},
	}
	for _, s := range sections {
		if !s.on {
			continue
		}
		if err := section(s.name, s.run); err != nil {
			return err
		}
	}
	return nil
}

// serverSections measures one server: idle memory, then each section whose
// size is not 0: write throughput, watch and list latency, memory with many
// spaces and the restart with them.
func serverSections(ctx context.Context, bin string, o options, progress func(string, ...any)) ([]row, error) {
	var rows []row
	s, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(s.dataDir)
	defer s.stop()
	// Idle: once the start's work is done (the server gives the binary's
	// pages back when it is ready, and maps again what it goes on using).
	settled, err := settle(ctx, s.cmd.Process.Pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	idle, _, err := atRest(ctx, s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"idle RSS", mib(idle), restNote(settled) + " after ready, no spaces; target ≤ 120 MB"})

	cfg := s.config(spaces.Root)
	kube := kubernetes.NewForConfigOrDie(cfg)

	if o.throughputN > 0 {
		for _, clients := range []int{1, 32} {
			n := o.throughputN
			if clients == 1 {
				n /= 4
			}
			progress("creating %d ConfigMaps with %d client(s)", n, clients)
			ns := fmt.Sprintf("throughput-%d", clients)
			if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace(ns), metav1.CreateOptions{}); err != nil {
				return nil, err
			}
			took, err := parallel(clients, n, func(i int) error {
				_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{})
				return err
			})
			if err != nil {
				return nil, err
			}
			rows = append(rows, row{fmt.Sprintf("ConfigMap creates/s, %d client(s)", clients), fmt.Sprintf("%.0f", float64(n)/took.Seconds()), fmt.Sprintf("%d creates in %s", n, took.Round(time.Millisecond))})
		}
	}

	if o.latencyN > 0 {
		progress("measuring create-to-watch-event latency over %d creates", o.latencyN)
		lat, err := watchLatency(ctx, kube, o.latencyN)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{"create→watch event latency p50", ms(percentile(lat, 50)), fmt.Sprintf("%d samples, one client", len(lat))},
			row{"create→watch event latency p99", ms(percentile(lat, 99)), ""})
	}

	if o.listN > 0 {
		progress("measuring list latency of %d objects", o.listN)
		list, err := listLatency(ctx, kube, o.listN)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{fmt.Sprintf("list latency, %d ConfigMaps p50", o.listN), ms(percentile(list, 50)), fmt.Sprintf("%d lists", len(list))},
			row{fmt.Sprintf("list latency, %d ConfigMaps p99", o.listN), ms(percentile(list, 99)), ""})
	}

	if o.spaces > 0 {
		before := s.rss()
		progress("creating %d spaces with %d ConfigMaps each", o.spaces, o.perSpace)
		took, err := manySpaces(ctx, s, o.spaces, o.perSpace)
		if err != nil {
			return nil, err
		}
		after := s.rss()
		rows = append(rows,
			row{fmt.Sprintf("RSS after %d spaces × %d objects", o.spaces, o.perSpace), mib(after), fmt.Sprintf("created in %s", took.Round(time.Millisecond))},
			row{"RSS cost per space", fmt.Sprintf("%.1f KiB", float64(after-before)/float64(o.spaces)/1024), "(RSS after − before) / spaces"},
		)

		restart := time.Now()
		s.stop()
		s2, err := startOn(ctx, bin, s.dataDir, s.port, time.Minute)
		if err != nil {
			return nil, err
		}
		defer s2.stop()
		rows = append(rows, row{fmt.Sprintf("time to ready, restart with %d spaces", o.spaces), ms(s2.ready), fmt.Sprintf("stop+start %s", time.Since(restart).Round(time.Millisecond))})
	}
	return rows, nil
}

type server struct {
	dataDir string
	port    int
	cmd     *exec.Cmd
	ready   time.Duration
	done    chan struct{}
}

func start(ctx context.Context, bin, dataDir string, args ...string) (*server, error) {
	if dataDir == "" {
		dir, err := os.MkdirTemp("", "kubestellar-bench-")
		if err != nil {
			return nil, err
		}
		dataDir = dir
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startOn(ctx, bin, dataDir, port, time.Minute, args...)
}

// startOn starts the server on a data directory and port, and waits up to
// readyWithin for it to be ready.
func startOn(ctx context.Context, bin, dataDir string, port int, readyWithin time.Duration, args ...string) (*server, error) {
	log, err := os.Create(filepath.Join(dataDir, "server.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"server", "start", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{dataDir: dataDir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(s.done) }()
	if err := harness.WaitReady(ctx, port, readyWithin); err != nil {
		s.stop()
		return nil, fmt.Errorf("server not ready (log: %s): %w", log.Name(), err)
	}
	s.ready = time.Since(began)
	return s, nil
}

func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.done
}

func (s *server) rss() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// url is the server's base URL, as a syncer is given it and as the
// server names itself (a SyncTarget's tunnelServer).
func (s *server) url() string { return fmt.Sprintf("https://127.0.0.1:%d", s.port) }

func (s *server) config(space string) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.dataDir, "admin.kubeconfig"))
	if err != nil {
		panic(err)
	}
	cfg.Host += spaces.URLPath(space)
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

func manySpaces(ctx context.Context, s *server, n, perSpace int) (time.Duration, error) {
	began := time.Now()
	if err := createSpaces(ctx, s, "bench-", n); err != nil {
		return 0, err
	}
	base := s.config(spaces.Root)
	_, err := parallel(32, n*perSpace, func(i int) error {
		cfg := rest.CopyConfig(base)
		cfg.Host += spaces.URLPath(fmt.Sprintf("bench-%04d", i/perSpace))
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, configMap(fmt.Sprintf("cm-%d", i%perSpace)), metav1.CreateOptions{})
		return err
	})
	return time.Since(began), err
}

// createSpaces creates n spaces named prefix and a number of four digits,
// and waits until they are all ready.
func createSpaces(ctx context.Context, s *server, prefix string, n int) error {
	dyn := dynamic.NewForConfigOrDie(s.config(spaces.Root)).Resource(tenancyv1alpha1.SpacesGVR)
	_, err := parallel(16, n, func(i int) error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(tenancyv1alpha1.SchemeGroupVersion.String())
		u.SetKind("Space")
		u.SetName(fmt.Sprintf("%s%04d", prefix, i))
		_, err := dyn.Create(ctx, u, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := dyn.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, item := range list.Items {
			if phase, _, _ := unstructured.NestedString(item.Object, "status", "phase"); strings.HasPrefix(item.GetName(), prefix) && phase == string(tenancyv1alpha1.SpacePhaseReady) {
				ready++
			}
		}
		return ready >= n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d spaces to be ready: %w", n, err)
	}
	return nil
}

func watchLatency(ctx context.Context, kube kubernetes.Interface, n int) ([]time.Duration, error) {
	return createToWatch(ctx, kube, kube, "latency", n, false)
}

func listLatency(ctx context.Context, kube kubernetes.Interface, n int) ([]time.Duration, error) {
	ns := "list"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace(ns), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := parallel(32, n, func(i int) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	var out []time.Duration
	for range 30 {
		began := time.Now()
		list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		if got := benchConfigMaps(list.Items); got != n {
			return nil, fmt.Errorf("listed %d ConfigMaps, want %d", got, n)
		}
		out = append(out, time.Since(began))
	}
	return out, nil
}

// parallel runs fn for 0..n-1 on workers goroutines and returns the wall time.
func parallel(workers, n int, fn func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	began := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(began), firstErr
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// benchConfigMaps counts the ConfigMaps of a list that the bench made: a
// namespace also holds kube-root-ca.crt, which the server (like a
// cluster's controller manager) puts in every namespace, a moment after
// it is made.
func benchConfigMaps(items []corev1.ConfigMap) int {
	n := 0
	for i := range items {
		if items[i].Name != "kube-root-ca.crt" {
			n++
		}
	}
	return n
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"payload": strings.Repeat("x", 256)}}
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := (len(s)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return s[idx]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func freePort() (int, error) { return databases.FreeLoopbackPort() }
