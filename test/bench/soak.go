// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/certs"
	ksserver "github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/spaces"
)

// The soak: one server (the built binary, SQLite in a fresh data dir),
// simulated syncers (the tunnel section's tunnel.Clients, plus a watch of
// the mailbox that writes each copy's status, and heartbeats) and a steady,
// bounded churn of WDS objects, placements, Location labels and syncer
// reconnects. It samples the server's resources at the start, after the
// warm-up and at the end, and fails if memory or goroutines grew by more
// than -soak-max-growth after the warm-up, or if anything is left
// unreconciled (exact.go says what that means) at any sample.
//
// The churn keeps the amount of state constant (a Gauge created is one
// deleted, two Locations swap zones, a retargeted placement reaches as many
// SyncTargets, a reconnected syncer is back before the sample), so what
// grows after the warm-up is a leak, not more work. Each sample is taken
// with the churn paused, once every mailbox is exact, the server's CPU has
// settled and it has collected its garbage.

// The soak's fixtures. The SyncTargets and their tokens are the tunnel
// section's (makeSyncTargets, in space tunnelInv, edge-0000...).
const (
	soakWDS        = "bench-soak-wds"
	soakSolo       = "solo" // namespace of the objects placed on one SyncTarget each
	soakPlacements = 5      // namespaces ns-0..., one placement ep-N each
	soakInitial    = 8      // Gauges per namespace at the start
	soakMinPerNS   = 2      // the churn keeps each namespace within [soakMinPerNS, soakMaxPerNS]
	soakMaxPerNS   = 20
	soakHeartbeat  = 10 * time.Second
	soakProgress   = 30 * time.Second
	soakPoll       = 5 * time.Second // between two checks while converging
)

var soakZones = []string{"a", "b", "c"}

// soakOptions configures the soak.
type soakOptions struct {
	on        bool
	duration  time.Duration // churn, warm-up included
	warmup    time.Duration // 0: a sixth of duration
	syncers   int
	rate      float64       // churn operations per second
	settle    time.Duration // how long convergence may take after the churn stops
	maxGrowth float64       // allowed growth after warm-up, as a fraction
	seed      uint64
}

// churnWeights are the kinds of churn operation and how often each comes.
var churnWeights = []struct {
	kind   string
	weight int
}{
	{"gauge replace", 25}, {"gauge update", 25}, {"singleton update", 10},
	{"Location swap", 15}, {"placement retarget", 10}, {"placement recreate", 3}, {"syncer reconnect", 12},
}

func soakRun(ctx context.Context, bin string, o soakOptions) (rows []row, err error) {
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "soak: "+format+"\n", args...) }
	if o.warmup == 0 {
		o.warmup = defaultWarmup(o.duration)
	}
	if o.syncers <= 0 || o.rate <= 0 || o.duration <= 0 || o.warmup >= o.duration {
		return nil, fmt.Errorf("soak: need -soak-syncers > 0, -soak-rate > 0 and -soak-warmup < -duration")
	}
	if err := raiseFileLimit(4*o.syncers + 1024); err != nil {
		return nil, err
	}
	began := time.Now()
	s, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	defer func() {
		s.stop()
		if err == nil {
			os.RemoveAll(s.dataDir)
			return
		}
		err = fmt.Errorf("%w\n(the server's data dir and log are kept in %s)\n--- end of the server's log ---\n%s", err, s.dataDir,
			tailFile(filepath.Join(s.dataDir, "server.log"), 3000))
	}()
	progress("server pid %d, data dir %s; %d simulated syncers, churn %g ops/s for %s (warm-up %s)",
		s.cmd.Process.Pid, s.dataDir, o.syncers, o.rate, o.duration, o.warmup)

	w, err := setUpSoak(ctx, bin, s, o, progress)
	if err != nil {
		return nil, err
	}
	defer w.stopSyncers()

	x := exactness{gvr: gaugesGVR, inventory: tunnelInv, wds: soakWDS, reported: true, reportedStatus: reportedBy}
	var samples []soakSample
	var verdicts []string
	measure := func(when string) error {
		progress("%s: converging (at most %s)", when, o.settle)
		f, counts, took, err := converge(ctx, s, x, o.settle, progress)
		if err != nil {
			return err
		}
		if n := f.total(); n > 0 {
			verdicts = append(verdicts, fmt.Sprintf("%d unreconciled %s, after %s:%s", n, when, o.settle, f))
		}
		if _, err := settle(ctx, s.cmd.Process.Pid, time.Minute); err != nil {
			return err
		}
		// Each sample's heap profile stays in the data dir (kept when the
		// soak fails): go tool pprof -diff_base heap-after-warm-up.pb.gz
		// heap-end.pb.gz shows what grew.
		if err := heapProfile(ctx, s, filepath.Join(s.dataDir, "heap-"+strings.ReplaceAll(when, " ", "-")+".pb.gz")); err != nil {
			return err
		}
		smp, err := takeSample(ctx, s)
		if err != nil {
			return err
		}
		smp.when, smp.at, smp.converged, smp.copies = when, time.Since(began), took, counts.found
		samples = append(samples, smp)
		progress("%s: %s; %d copies, reconciled in %s", when, smp, smp.copies, took.Round(time.Second))
		return nil
	}

	if err := measure("start"); err != nil {
		return nil, err
	}
	stopProgress := w.reportProgress(ctx, s, began, progress)
	defer stopProgress()
	if err := w.churn.run(ctx, o.warmup, o.rate); err != nil {
		return nil, err
	}
	if err := measure("after warm-up"); err != nil {
		return nil, err
	}
	if err := w.churn.run(ctx, o.duration-o.warmup, o.rate); err != nil {
		return nil, err
	}
	if err := measure("end"); err != nil {
		return nil, err
	}
	stopProgress()

	warm, end := samples[1], samples[2]
	grew := func(what string, from, to int64, show func(int64) string) {
		if from > 0 && float64(to-from) > o.maxGrowth*float64(from) {
			verdicts = append(verdicts, fmt.Sprintf("%s grew by %.1f %% after the warm-up (%s → %s; limit %.0f %%)",
				what, 100*float64(to-from)/float64(from), show(warm.value(what)), show(end.value(what)), 100*o.maxGrowth))
		}
	}
	grew("server RSS", warm.rss, end.rss, mib)
	grew("goroutines", warm.goroutines, end.goroutines, func(v int64) string { return strconv.FormatInt(v, 10) })
	ops, failed := w.churn.totals()
	if failed*20 > ops {
		verdicts = append(verdicts, fmt.Sprintf("%d of %d churn operations failed (more than 5 %%); last: %v", failed, ops, w.churn.lastError()))
	}

	printSoakTable(samples, w, o, time.Since(began))
	rows = soakRows(samples, w, o)
	if len(verdicts) > 0 {
		return append(rows, row{"soak: verdict", "failed", strings.Join(verdicts, "; ")}),
			&verdictError{fmt.Errorf("soak failed:\n- %s", strings.Join(verdicts, "\n- "))}
	}
	fmt.Println("soak passed: nothing unreconciled; memory and goroutines within the limit after the warm-up")
	return append(rows, row{"soak: verdict", "passed", "nothing unreconciled; RSS and goroutines within the limit after the warm-up"}), nil
}

// soakHistory is the datastore's history the server keeps (one compaction
// interval): the heap, and state.db, grow until it is full.
const soakHistory = 5 * time.Minute

// defaultWarmup is a sixth of the soak, and at least the time the history
// takes to fill (or half a short soak): a 10-minute soak whose growth was
// measured after 1m40s counted the history filling as a leak.
func defaultWarmup(duration time.Duration) time.Duration {
	return max(duration/6, min(soakHistory, duration/2))
}

// soakWorld is what the soak set up and drives.
type soakWorld struct {
	syncers  []*soakSyncer
	counters *syncerCounters
	churn    *churner
	logFile  *os.File
}

func (w *soakWorld) stopSyncers() {
	for _, y := range w.syncers {
		y.stop()
	}
	logrus.SetOutput(os.Stderr)
	w.logFile.Close()
}

// setUpSoak makes the inventory (SyncTargets, tokens, one Location each),
// the WDS (the Gauge CRD, namespaces, Gauges, placements) and starts the
// simulated syncers.
func setUpSoak(ctx context.Context, bin string, s *server, o soakOptions, progress func(string, ...any)) (*soakWorld, error) {
	for _, args := range [][]string{{tunnelInv, "--type", "inventory"}, {soakWDS, "--type", "wds", "--inventory-space", tunnelInv}} {
		if _, err := s.cli(ctx, bin, append([]string{"space", "create"}, append(args, "--no-context")...)...); err != nil {
			return nil, err
		}
	}
	wds := dynamic.NewForConfigOrDie(s.config(soakWDS))
	inv := dynamic.NewForConfigOrDie(s.config(tunnelInv))
	if _, err := wds.Resource(crdsGVR).Create(ctx, gaugeCRDObject(), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(ksserver.PKIDir(s.dataDir), certs.CACertFile))
	if err != nil {
		return nil, err
	}
	progress("creating %d SyncTargets, their tokens and Locations", o.syncers)
	bearers, err := makeSyncTargets(ctx, s, o.syncers, caPEM, progress)
	if err != nil {
		return nil, err
	}
	if _, err := parallel(16, o.syncers, func(i int) error {
		_, err := inv.Resource(locationsGVR).Create(ctx, soakLocation(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if err := waitMailboxes(ctx, s, o.syncers, progress); err != nil {
		return nil, err
	}
	mailboxes := make([]string, o.syncers)
	if err := pollProgress(ctx, time.Minute, "SyncTargets naming their mailbox", progress, func(ctx context.Context) (int, error) {
		list, err := inv.Resource(stGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, nil
		}
		n := 0
		for _, st := range list.Items {
			i, err := strconv.Atoi(strings.TrimPrefix(st.GetName(), "edge-"))
			mb, _, _ := unstructured.NestedString(st.Object, "status", "mailboxSpace")
			if err == nil && i < o.syncers && mb != "" {
				mailboxes[i] = mb
				n++
			}
		}
		return n, nil
	}, o.syncers); err != nil {
		return nil, err
	}
	if err := pollProgress(ctx, time.Minute, "an established Gauge CRD", progress, func(ctx context.Context) (int, error) {
		crd, err := wds.Resource(crdsGVR).Get(ctx, gaugeCRD, metav1.GetOptions{})
		if err == nil && established(crd) {
			return 1, nil
		}
		return 0, nil
	}, 1); err != nil {
		return nil, err
	}

	progress("creating the workload: %d namespaces of %d Gauges, %d singletons, %d placements", soakPlacements, soakInitial, o.syncers, soakPlacements+o.syncers)
	kube := kubernetes.NewForConfigOrDie(s.config(soakWDS))
	c := newChurner(wds, inv, o)
	for k := range soakPlacements {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace(nsName(k)), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		for range soakInitial {
			if err := c.createGauge(ctx, nsName(k)); err != nil {
				return nil, err
			}
		}
		c.zones[k] = soakZones[k%len(soakZones)]
		if err := c.createPlacement(ctx, k); err != nil {
			return nil, err
		}
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace(soakSolo), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := parallel(8, o.syncers, func(i int) error {
		name := simulatedName(i)
		if _, err := wds.Resource(gaugesGVR).Namespace(soakSolo).Create(ctx, soakGauge(soakSolo, "solo-"+name, 1), metav1.CreateOptions{}); err != nil {
			return err
		}
		u, err := toUnstructured(placementObject("solo-"+name, map[string]string{"name": name},
			edgev2alpha1.DownsyncClause{APIGroup: ptr.To(gaugesGVR.Group), Resources: []string{gaugesGVR.Resource},
				Namespaces: []string{soakSolo}, ObjectNames: []string{"solo-" + name}}))
		if err != nil {
			return err
		}
		_, err = wds.Resource(epGVR).Create(ctx, u, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}

	// The clients' loggers, as in the tunnel section: remotedialer's to a
	// file, tunnel.Client's nowhere.
	logFile, err := os.Create(filepath.Join(s.dataDir, "tunnel-clients.log"))
	if err != nil {
		return nil, err
	}
	logrus.SetOutput(logFile)
	logrus.SetLevel(logrus.WarnLevel)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the server's CA certificate is not PEM")
	}
	w := &soakWorld{counters: &syncerCounters{}, churn: c, logFile: logFile}
	baseURL := s.url()
	progress("starting %d simulated syncers", o.syncers)
	for i := range o.syncers {
		y := &soakSyncer{name: simulatedName(i), mailbox: mailboxes[i], bearer: bearers[i], serverURL: baseURL,
			tls: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ca: caPEM, counters: w.counters}
		y.start(klog.NewContext(ctx, klog.Logger{}))
		w.syncers = append(w.syncers, y)
	}
	c.syncers = w.syncers
	c.runCtx = klog.NewContext(ctx, klog.Logger{})
	return w, nil
}

func nsName(k int) string { return fmt.Sprintf("ns-%d", k) }

func soakLocation(i int) *unstructured.Unstructured {
	name := simulatedName(i)
	return obj("Location", name, map[string]any{"soak": "true", "zone": soakZones[i%len(soakZones)], "name": name}, map[string]any{
		"resource":         map[string]any{"group": edgev2alpha1.GroupName, "version": "v2alpha1", "resource": "synctargets"},
		"instanceSelector": map[string]any{"matchLabels": map[string]any{"name": name}},
	})
}

func soakGauge(ns, name string, version int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gaugesGVR.GroupVersion().String(),
		"kind":       gaugeKind,
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": "soak"}},
		"spec":       map[string]any{"unit": "soak", "version": version},
	}}
}

// placementObject is an EdgePlacement wanting the singleton reported state
// (so that every placed object carries executing-count, which the check
// verifies) on the Locations labelled match.
func placementObject(name string, match map[string]string, clause edgev2alpha1.DownsyncClause) *edgev2alpha1.EdgePlacement {
	return &edgev2alpha1.EdgePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "EdgePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: edgev2alpha1.EdgePlacementSpec{
			LocationSelectors:          []metav1.LabelSelector{{MatchLabels: match}},
			WantSingletonReportedState: true,
			Downsync:                   []edgev2alpha1.DownsyncClause{clause},
		},
	}
}

// reportedBy tells whether an object's status is what the simulated
// syncer of syncTarget reports for its current spec: a copy's in the
// mailbox, or a singleton's returned to the WDS.
func reportedBy(u *unstructured.Unstructured, syncTarget string) bool {
	version, _, _ := unstructured.NestedInt64(u.Object, "spec", "version")
	value, found, _ := unstructured.NestedInt64(u.Object, "status", "value")
	edge, _, _ := unstructured.NestedString(u.Object, "status", "edge")
	return found && value == version && edge == syncTarget
}

// converge checks until nothing is unreconciled or timeout, and returns
// the last findings and how long it took.
func converge(ctx context.Context, s *server, x exactness, timeout time.Duration, progress func(string, ...any)) (findings, mailboxCounts, time.Duration, error) {
	began, lastReport := time.Now(), time.Now()
	for {
		f, c, err := x.check(ctx, s)
		if err != nil && ctx.Err() != nil {
			return nil, c, 0, err
		}
		took := time.Since(began)
		if err == nil && f.total() == 0 {
			return f, c, took, nil
		}
		if took > timeout {
			if err != nil {
				return nil, c, took, fmt.Errorf("checking the mailboxes: %w", err)
			}
			return f, c, took, nil
		}
		if time.Since(lastReport) >= soakProgress {
			if err != nil {
				progress("converging for %s; the last check failed: %v", took.Round(time.Second), err)
			} else {
				progress("converging for %s; %d unreconciled, %d of %d copies", took.Round(time.Second), f.total(), c.found, c.expected)
			}
			lastReport = time.Now()
		}
		if err := sleep(ctx, soakPoll); err != nil {
			return nil, c, took, err
		}
	}
}

// soakSample is one reading of the server's resources.
type soakSample struct {
	when                       string
	at, converged              time.Duration
	rss, heap, goroutines, fds int64
	db, wal, shm               int64
	copies                     int
}

func (smp soakSample) String() string {
	return fmt.Sprintf("RSS %s, heap in use %s, %d goroutines, %d open FDs, SQLite %s + WAL %s + SHM %s",
		mib(smp.rss), mib(smp.heap), smp.goroutines, smp.fds, mib(smp.db), mib(smp.wal), mib(smp.shm))
}

func (smp soakSample) value(what string) int64 {
	if what == "goroutines" {
		return smp.goroutines
	}
	return smp.rss
}

// takeSample reads the server's RSS and open FDs from /proc, its
// goroutines and heap from /metrics, and the SQLite files' sizes.
func takeSample(ctx context.Context, s *server) (soakSample, error) {
	var smp soakSample
	pid := s.cmd.Process.Pid
	mem, err := procMemory(pid)
	if err != nil {
		return smp, err
	}
	smp.rss = mem["VmRSS"]
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return smp, err
	}
	smp.fds = int64(len(fds))
	metrics, err := scrape(ctx, s, "go_goroutines", "go_memstats_heap_inuse_bytes")
	if err != nil {
		return smp, err
	}
	smp.goroutines, smp.heap = int64(metrics["go_goroutines"]), int64(metrics["go_memstats_heap_inuse_bytes"])
	for _, f := range []struct {
		suffix string
		into   *int64
	}{{"", &smp.db}, {"-wal", &smp.wal}, {"-shm", &smp.shm}} {
		if fi, err := os.Stat(filepath.Join(s.dataDir, "db", "state.db"+f.suffix)); err == nil {
			*f.into = fi.Size()
		}
	}
	return smp, nil
}

// adminGet GETs a path of the server's as its admin, who may read
// /metrics and /debug/pprof. The caller closes the body.
func adminGet(ctx context.Context, s *server, path string) (*http.Response, error) {
	cfg := s.config(spaces.Root)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp, nil
}

// collectGarbage makes the server run a garbage collection (the heap
// profile does, with gc=1), so that the heap figure that follows is the
// live heap, not wherever the collector's cycle happens to be.
func collectGarbage(ctx context.Context, s *server) error { return heapProfile(ctx, s, "") }

// heapProfile has the server collect its garbage and writes its heap
// profile, after the collection, to path ("" for nowhere).
func heapProfile(ctx context.Context, s *server, path string) error {
	resp, err := adminGet(ctx, s, "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if path == "" {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// scrape reads unlabelled samples from the server's /metrics.
func scrape(ctx context.Context, s *server, names ...string) (map[string]float64, error) {
	resp, err := adminGet(ctx, s, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				if out[n], err = strconv.ParseFloat(value, 64); err != nil {
					return nil, fmt.Errorf("/metrics: %s: %w", sc.Text(), err)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", n)
		}
	}
	return out, nil
}

// reportProgress prints a line every soakProgress until the returned
// function is called.
func (w *soakWorld) reportProgress(ctx context.Context, s *server, began time.Time, progress func(string, ...any)) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleep(ctx, soakProgress) == nil {
			smp, err := takeSample(ctx, s)
			if err != nil {
				if ctx.Err() == nil {
					progress("%s: reading the server: %v", time.Since(began).Round(time.Second), err)
				}
				continue
			}
			open := 0
			for _, y := range w.syncers {
				open += y.tunnelOpen()
			}
			ops, failed := w.churn.totals()
			progress("%s: %d churn ops (%d failed); %s; %d/%d tunnels open; syncers: %d status writes, %d heartbeats, %d errors",
				time.Since(began).Round(time.Second), ops, failed, smp, open, len(w.syncers),
				w.counters.statusWrites.Load(), w.counters.heartbeats.Load(), w.counters.errors.Load())
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

func printSoakTable(samples []soakSample, w *soakWorld, o soakOptions, took time.Duration) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "SOAK (%d syncers, %s churn at %g ops/s, warm-up %s; %s in all)", o.syncers, o.duration, o.rate, o.warmup, took.Round(time.Second))
	for _, smp := range samples {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(smp.when))
	}
	fmt.Fprintln(tw, "\tEND / AFTER WARM-UP")
	rows := []struct {
		name  string
		value func(soakSample) int64
		show  func(int64) string
		limit bool
	}{
		{"server RSS", func(s soakSample) int64 { return s.rss }, mib, true},
		{"Go heap in use, after a GC", func(s soakSample) int64 { return s.heap }, mib, false},
		{"goroutines", func(s soakSample) int64 { return s.goroutines }, itoa, true},
		{"open FDs", func(s soakSample) int64 { return s.fds }, itoa, false},
		{"SQLite state.db", func(s soakSample) int64 { return s.db }, mib, false},
		{"SQLite state.db-wal", func(s soakSample) int64 { return s.wal }, mib, false},
		{"SQLite state.db-shm", func(s soakSample) int64 { return s.shm }, mib, false},
		{"copies in mailboxes", func(s soakSample) int64 { return int64(s.copies) }, itoa, false},
		{convergedRow, func(s soakSample) int64 { return int64(s.converged.Seconds()) }, itoa, false},
	}
	for _, r := range rows {
		fmt.Fprint(tw, r.name)
		for _, smp := range samples {
			fmt.Fprintf(tw, "\t%s", r.show(r.value(smp)))
		}
		growth := ""
		if from := r.value(samples[1]); from > 0 && r.name != convergedRow {
			growth = fmt.Sprintf("%+.1f %%", 100*float64(r.value(samples[2])-from)/float64(from))
			if r.limit {
				growth += fmt.Sprintf(" (limit +%.0f %%)", 100*o.maxGrowth)
			}
		}
		fmt.Fprintf(tw, "\t%s\n", growth)
	}
	fmt.Fprintln(tw)
	ops := w.churn.byKind()
	fmt.Fprintln(tw, "CHURN\tDONE\tFAILED")
	for _, k := range churnWeights {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", k.kind, ops[k.kind][0], ops[k.kind][1])
	}
	fmt.Fprintf(tw, "syncer status writes\t%d\t\n", w.counters.statusWrites.Load())
	fmt.Fprintf(tw, "syncer heartbeats\t%d\t\n", w.counters.heartbeats.Load())
	fmt.Fprintf(tw, "syncer request errors\t%d\t(conflicts not counted)\n", w.counters.errors.Load())
	_ = tw.Flush()
}

// soakRows are the figures of the soak the record keeps: each quantity at
// the start, after the warm-up and at the end, with its growth after the
// warm-up, and the work done.
func soakRows(samples []soakSample, w *soakWorld, o soakOptions) []row {
	if len(samples) < 3 {
		return nil
	}
	what := fmt.Sprintf("%d syncers, %s at %g ops/s", o.syncers, o.duration, o.rate)
	three := func(name string, v func(soakSample) int64, show func(int64) string) row {
		from, to := v(samples[1]), v(samples[2])
		note := ""
		if from > 0 {
			note = fmt.Sprintf("%+.1f %% after the warm-up", 100*float64(to-from)/float64(from))
		}
		return row{fmt.Sprintf("soak: %s, start → warm-up → end (%s)", name, what),
			fmt.Sprintf("%s → %s → %s", show(v(samples[0])), show(from), show(to)), note}
	}
	rows := []row{
		three("server RSS", func(s soakSample) int64 { return s.rss }, mib),
		three("Go heap in use after a GC", func(s soakSample) int64 { return s.heap }, mib),
		three("goroutines", func(s soakSample) int64 { return s.goroutines }, itoa),
		three("open FDs", func(s soakSample) int64 { return s.fds }, itoa),
		three("SQLite state.db", func(s soakSample) int64 { return s.db }, mib),
		three("SQLite WAL", func(s soakSample) int64 { return s.wal }, mib),
	}
	ops, failed := w.churn.totals()
	conv := make([]string, len(samples))
	for i, smp := range samples {
		conv[i] = long(smp.converged)
	}
	rows = append(rows,
		row{"soak: copies in mailboxes at the end", itoa(int64(samples[2].copies)), ""},
		row{"soak: every mailbox exact after the churn paused, start / warm-up / end", strings.Join(conv, " / "), ""},
		row{"soak: churn operations, failed", fmt.Sprintf("%d, %d failed", ops, failed), ""},
		row{"soak: syncer status writes, heartbeats, request errors", fmt.Sprintf("%d, %d, %d",
			w.counters.statusWrites.Load(), w.counters.heartbeats.Load(), w.counters.errors.Load()), "conflicts not counted"},
	)
	return rows
}

// convergedRow is how long the mailboxes took to be exact once the churn
// paused: no growth to compare.
const convergedRow = "reconciled in (s), churn paused"

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// syncerCounters are shared by the simulated syncers.
type syncerCounters struct {
	statusWrites, heartbeats, errors atomic.Int64
}

// soakSyncer is one simulated syncer: a tunnel (tunnel.go's
// simulatedSyncers, of one), a watch of the Gauge copies in its mailbox
// whose status it writes as a syncer would ({value: spec.version, edge:
// its SyncTarget}), and a heartbeat on its SyncTarget's status. Stopping
// and starting it again is a reconnect: a new tunnel, a new list and
// watch, a status written again for whatever changed meanwhile.
type soakSyncer struct {
	name, mailbox, bearer, serverURL string
	tls                              *tls.Config
	ca                               []byte
	counters                         *syncerCounters

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	tunnels *simulatedSyncers
}

func (y *soakSyncer) start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	tunnels := startSimulatedSyncers(ctx, y.serverURL, y.tls, []string{y.bearer})
	y.mu.Lock()
	y.cancel, y.done, y.tunnels = cancel, done, tunnels
	y.mu.Unlock()
	go func() {
		defer close(done)
		defer tunnels.stop()
		y.run(ctx)
	}()
}

// stop closes everything the syncer holds and waits for it.
func (y *soakSyncer) stop() {
	y.mu.Lock()
	cancel, done := y.cancel, y.done
	y.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (y *soakSyncer) tunnelOpen() int {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.tunnels == nil {
		return 0
	}
	return int(y.tunnels.open.Load())
}

// config addresses a space as this syncer, with its token.
func (y *soakSyncer) config(space string) *rest.Config {
	return &rest.Config{Host: y.serverURL + spaces.PathPrefix + space, BearerToken: y.bearer,
		TLSClientConfig: rest.TLSClientConfig{CAData: y.ca}, QPS: 100, Burst: 200, Timeout: 30 * time.Second}
}

func (y *soakSyncer) run(ctx context.Context) {
	mailbox := dynamic.NewForConfigOrDie(y.config(y.mailbox))
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	informer := dynamicinformer.NewFilteredDynamicInformer(mailbox, gaugesGVR, "", 0, cache.Indexers{}, nil).Informer()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		y.counters.errors.Add(1)
		return
	}
	// The context's logger (none) also takes the reflector's complaints
	// when a reconnect cuts its watch.
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); informer.RunWithContext(ctx) }()
	defer func() { <-informerDone }()
	go func() { <-ctx.Done(); queue.ShutDown() }()
	go y.heartbeats(ctx)
	for {
		key, quit := queue.Get()
		if quit {
			return
		}
		err := y.report(ctx, mailbox, informer.GetStore(), key)
		switch {
		case err == nil:
			queue.Forget(key)
		case ctx.Err() != nil:
		default:
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				y.counters.errors.Add(1)
			}
			queue.AddRateLimited(key)
		}
		queue.Done(key)
	}
}

// report writes a copy's status, if it does not say its spec yet.
func (y *soakSyncer) report(ctx context.Context, mailbox dynamic.Interface, store cache.Store, key string) error {
	item, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	cp := item.(*unstructured.Unstructured)
	if reportedBy(cp, y.name) {
		return nil
	}
	version, _, _ := unstructured.NestedInt64(cp.Object, "spec", "version")
	cp = cp.DeepCopy()
	cp.Object["status"] = map[string]any{"value": version, "edge": y.name}
	if _, err := mailbox.Resource(gaugesGVR).Namespace(cp.GetNamespace()).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
		return err
	}
	y.counters.statusWrites.Add(1)
	return nil
}

// heartbeats writes the SyncTarget's heartbeat, as the syncer does
// (syncer/heartbeat.go), every soakHeartbeat.
func (y *soakSyncer) heartbeats(ctx context.Context) {
	rc := dynamic.NewForConfigOrDie(y.config(tunnelInv)).Resource(stGVR)
	for {
		if err := y.heartbeat(ctx, rc); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
			y.counters.errors.Add(1)
		}
		if sleep(ctx, soakHeartbeat) != nil {
			return
		}
	}
}

func (y *soakSyncer) heartbeat(ctx context.Context, rc dynamic.ResourceInterface) error {
	u, err := rc.Get(ctx, y.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	st := &edgev2alpha1.SyncTarget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st); err != nil {
		return err
	}
	now := metav1.Now()
	meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: edgev2alpha1.SyncTargetHeartbeat, Status: metav1.ConditionTrue,
		Reason: "Heartbeat", Message: "simulated syncer of the soak", ObservedGeneration: st.Generation})
	st.Status.LastSyncerHeartbeatTime = &now
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return err
	}
	if _, err := rc.UpdateStatus(ctx, &unstructured.Unstructured{Object: out}, metav1.UpdateOptions{}); err != nil {
		return err
	}
	y.counters.heartbeats.Add(1)
	return nil
}

// churner changes the WDS and the inventory at a steady rate: Gauges
// created, updated and deleted, singletons updated, Locations moved
// between zones, placements retargeted at another zone or deleted and
// made again, syncers reconnected after a pause.
type churner struct {
	wds, inv dynamic.Interface
	rng      *rand.Rand
	syncers  []*soakSyncer
	runCtx   context.Context // the syncers run in it

	gauges   map[string][]string // namespace -> Gauges made and not deleted
	zones    map[int]string      // placement ep-N -> its zone
	locZones map[int]string      // Location edge-N -> its zone
	seq      int
	version  int64
	pending  sync.WaitGroup // syncers to start again

	mu      sync.Mutex
	down    map[int]bool      // syncers stopped, to start again
	ops     map[string][2]int // kind -> done, failed
	lastErr error
}

func newChurner(wds, inv dynamic.Interface, o soakOptions) *churner {
	return &churner{wds: wds, inv: inv, rng: rand.New(rand.NewPCG(o.seed, 0)), gauges: map[string][]string{},
		zones: map[int]string{}, down: map[int]bool{}, ops: map[string][2]int{}, version: 1}
}

// run churns for d at rate operations per second, then waits for the
// syncers it stopped to be started again.
func (c *churner) run(ctx context.Context, d time.Duration, rate float64) error {
	churnCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	n := int(d.Seconds() * rate)
	_, err := paced(churnCtx, n, rate, func(int) error {
		kind := c.pick()
		err := c.do(churnCtx, kind)
		c.mu.Lock()
		defer c.mu.Unlock()
		counts := c.ops[kind]
		counts[0]++
		if err != nil && churnCtx.Err() == nil {
			counts[1]++
			c.lastErr = fmt.Errorf("%s: %w", kind, err)
		}
		c.ops[kind] = counts
		return nil
	})
	cancel() // start the stopped syncers now
	c.pending.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func (c *churner) pick() string {
	total := 0
	for _, k := range churnWeights {
		total += k.weight
	}
	r := c.rng.IntN(total)
	for _, k := range churnWeights {
		if r < k.weight {
			return k.kind
		}
		r -= k.weight
	}
	return churnWeights[0].kind
}

func (c *churner) do(ctx context.Context, kind string) error {
	ns := nsName(c.rng.IntN(soakPlacements))
	switch kind {
	case "gauge replace":
		return c.replaceGauge(ctx)
	case "gauge update":
		return c.updateGauge(ctx, ns)
	case "singleton update":
		c.version++
		return c.patch(ctx, c.wds.Resource(gaugesGVR).Namespace(soakSolo), "solo-"+simulatedName(c.rng.IntN(len(c.syncers))),
			map[string]any{"spec": map[string]any{"version": c.version}})
	case "Location swap":
		return c.swapLocations(ctx)
	case "placement retarget":
		k := c.rng.IntN(soakPlacements)
		c.zones[k] = soakZones[c.rng.IntN(len(soakZones))]
		return c.patch(ctx, c.wds.Resource(epGVR), placementName(k),
			map[string]any{"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"zone": c.zones[k]}}}}})
	case "placement recreate":
		return c.recreatePlacement(ctx, c.rng.IntN(soakPlacements))
	case "syncer reconnect":
		return c.reconnect(ctx)
	}
	return fmt.Errorf("unknown churn %q", kind)
}

// replaceGauge creates a Gauge in one namespace and deletes one in
// another: the number of objects stays the same.
func (c *churner) replaceGauge(ctx context.Context) error {
	var into, from []string
	for k := range soakPlacements {
		if len(c.gauges[nsName(k)]) < soakMaxPerNS {
			into = append(into, nsName(k))
		}
		if len(c.gauges[nsName(k)]) > soakMinPerNS {
			from = append(from, nsName(k))
		}
	}
	if err := c.createGauge(ctx, into[c.rng.IntN(len(into))]); err != nil {
		return err
	}
	ns := from[c.rng.IntN(len(from))]
	i := c.rng.IntN(len(c.gauges[ns]))
	name := c.gauges[ns][i]
	c.gauges[ns] = append(c.gauges[ns][:i], c.gauges[ns][i+1:]...)
	return c.wds.Resource(gaugesGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// swapLocations swaps the zones of two Locations in different zones: the
// SyncTargets each placement reaches change, their number does not.
func (c *churner) swapLocations(ctx context.Context) error {
	n := len(c.syncers)
	if c.locZones == nil {
		c.locZones = map[int]string{}
		for i := range n {
			c.locZones[i] = soakZones[i%len(soakZones)]
		}
	}
	a := c.rng.IntN(n)
	var others []int
	for i := range n {
		if c.locZones[i] != c.locZones[a] {
			others = append(others, i)
		}
	}
	if len(others) == 0 {
		return nil // fewer SyncTargets than zones
	}
	b := others[c.rng.IntN(len(others))]
	c.locZones[a], c.locZones[b] = c.locZones[b], c.locZones[a]
	for _, i := range []int{a, b} {
		if err := c.patch(ctx, c.inv.Resource(locationsGVR), simulatedName(i),
			map[string]any{"metadata": map[string]any{"labels": map[string]any{"zone": c.locZones[i]}}}); err != nil {
			return err
		}
	}
	return nil
}

func placementName(k int) string { return fmt.Sprintf("ep-%d", k) }

func (c *churner) createGauge(ctx context.Context, ns string) error {
	c.seq++
	name := fmt.Sprintf("g-%05d", c.seq)
	if _, err := c.wds.Resource(gaugesGVR).Namespace(ns).Create(ctx, soakGauge(ns, name, c.version), metav1.CreateOptions{}); err != nil {
		return err
	}
	c.gauges[ns] = append(c.gauges[ns], name)
	return nil
}

func (c *churner) updateGauge(ctx context.Context, ns string) error {
	if len(c.gauges[ns]) == 0 {
		return c.createGauge(ctx, ns)
	}
	c.version++
	return c.patch(ctx, c.wds.Resource(gaugesGVR).Namespace(ns), c.gauges[ns][c.rng.IntN(len(c.gauges[ns]))],
		map[string]any{"spec": map[string]any{"version": c.version}})
}

func (c *churner) patch(ctx context.Context, rc dynamic.ResourceInterface, name string, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = rc.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

func (c *churner) createPlacement(ctx context.Context, k int) error {
	u, err := toUnstructured(placementObject(placementName(k), map[string]string{"zone": c.zones[k]},
		edgev2alpha1.DownsyncClause{APIGroup: ptr.To(gaugesGVR.Group), Resources: []string{gaugesGVR.Resource}, Namespaces: []string{nsName(k)}}))
	if err != nil {
		return err
	}
	_, err = c.wds.Resource(epGVR).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// recreatePlacement deletes a placement, waits until it is gone, and
// makes it again.
func (c *churner) recreatePlacement(ctx context.Context, k int) error {
	rc := c.wds.Resource(epGVR)
	if err := rc.Delete(ctx, placementName(k), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := pollProgress(ctx, 30*time.Second, "the placement to be gone", func(string, ...any) {}, func(ctx context.Context) (int, error) {
		_, err := rc.Get(ctx, placementName(k), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return 1, nil
		}
		return 0, nil
	}, 1); err != nil {
		return err
	}
	return c.createPlacement(ctx, k)
}

// reconnect stops a running syncer and starts it again after 2 to 10 s,
// or as soon as ctx ends.
func (c *churner) reconnect(ctx context.Context) error {
	var up []int
	c.mu.Lock()
	for i := range c.syncers {
		if !c.down[i] {
			up = append(up, i)
		}
	}
	if len(up) == 0 {
		c.mu.Unlock()
		return nil
	}
	i := up[c.rng.IntN(len(up))]
	c.down[i] = true
	c.mu.Unlock()
	y := c.syncers[i]
	y.stop()
	pause := 2*time.Second + time.Duration(c.rng.Int64N(int64(8*time.Second)))
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		_ = sleep(ctx, pause)
		y.start(c.runCtx)
		c.mu.Lock()
		delete(c.down, i)
		c.mu.Unlock()
	}()
	return nil
}

func (c *churner) totals() (ops, failed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.ops {
		ops += v[0]
		failed += v[1]
	}
	return ops, failed
}

func (c *churner) byKind() map[string][2]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][2]int{}
	for k, v := range c.ops {
		out[k] = v
	}
	return out
}

func (c *churner) lastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}
