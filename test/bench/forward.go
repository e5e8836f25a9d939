// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/tunnel"
)

// The forwarding comparison's fixtures.
const (
	forwardInv  = "bench-fwd-inv"  // inventory space
	forwardEdge = "bench-fwd-edge" // the edge cluster and its SyncTarget
	// forwardPath is what it GETs: a small object every cluster has
	// (kube-controller-manager publishes it).
	forwardPath = "/api/v1/namespaces/default/configmaps/kube-root-ca.crt"
)

// forwardBench compares GETs sent to a real edge cluster directly with the
// same GETs sent through the center's edge proxy and the syncer's tunnel,
// on a fresh server with one `kubestellar syncer join` process, and through
// konnectivity (the reverse tunnel kube-apiserver uses to reach nodes), the
// field's reference, on the same edge cluster.
func forwardBench(ctx context.Context, bin string, o tunnelOptions, progress func(string, ...any)) (_ []row, err error) {
	progress = prefixed(progress, "forward: ")
	s, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(s.dataDir)
	defer s.stop()
	defer func() {
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w\n--- end of the server's log ---\n%s", err, tailFile(filepath.Join(s.dataDir, "server.log"), 3000))
		}
	}()
	if _, err := s.cli(ctx, bin, "space", "create", forwardInv, "--type", "inventory", "--no-context"); err != nil {
		return nil, err
	}
	edge, err := joinEdge(ctx, bin, s, forwardInv, forwardEdge, "env=bench", progress)
	if err != nil {
		return nil, err
	}
	defer func() {
		err = edge.withLog(err)
		if stopErr := edge.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()

	// Plain http.Clients from the rest.Configs: client-go's rate limiter
	// (5 requests/s by default) lives in its REST client, not in these.
	directCfg := rest.CopyConfig(edge.cluster.Config)
	direct, err := rest.HTTPClientFor(directCfg)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := s.cli(ctx, bin, "kubeconfig", "--edge", forwardEdge, "--inventory-space", forwardInv)
	if err != nil {
		return nil, err
	}
	viaCfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("kubestellar kubeconfig --edge: %w", err)
	}
	via, err := rest.HTTPClientFor(viaCfg)
	if err != nil {
		return nil, err
	}
	directURL, viaURL := strings.TrimSuffix(directCfg.Host, "/")+forwardPath, strings.TrimSuffix(viaCfg.Host, "/")+forwardPath

	progress("waiting for %s at the edge, directly and through the tunnel", forwardPath)
	for _, c := range []struct {
		client *http.Client
		url    string
	}{{direct, directURL}, {via, viaURL}} {
		var lastErr error
		if err := edge.syncer.poll(ctx, time.Minute, "GET "+c.url, func(ctx context.Context) (bool, error) {
			_, lastErr = get(ctx, c.client, c.url)
			return lastErr == nil, nil
		}); err != nil {
			return nil, fmt.Errorf("%w (last: %v)", err, lastErr)
		}
		// Warm up: connections, the edge's caches.
		if _, err := getMany(ctx, c.client, c.url, 100, o.workers); err != nil {
			return nil, fmt.Errorf("GET %s: %w", c.url, err)
		}
	}
	var knClient *http.Client
	var knPIDs map[string]int
	if o.konnectivity {
		kn, err := startKonnectivity(ctx, progress)
		if err != nil {
			return nil, err
		}
		defer kn.stop()
		knCfg := rest.CopyConfig(directCfg)
		knCfg.Dial = kn.DialContext
		if knClient, err = rest.HTTPClientFor(knCfg); err != nil {
			return nil, err
		}
		if _, err := getMany(ctx, knClient, directURL, 100, o.workers); err != nil { // warm up, as the others
			return nil, fmt.Errorf("GET %s through konnectivity: %w (logs: %s, %s)", directURL, err, kn.ServerLog, kn.AgentLog)
		}
		knPIDs = kn.PIDs()
	}

	// Every process runs on the same cores: where their CPU goes per GET
	// says what bounds each path. The three paths take turns, a share of
	// the GETs each per round, so that the machine's drift during the
	// section falls on all three.
	procs := procGroups{"edge cluster": edge.cluster.PIDs(), "server": {"server": s.cmd.Process.Pid},
		"syncer": {"syncer": edge.syncer.cmd.Process.Pid}, "client": {"bench": os.Getpid()}}
	for name, pid := range knPIDs {
		procs[name] = map[string]int{name: pid}
	}
	paths := []*edgeRoute{
		{name: "directly to the edge cluster", client: direct, url: directURL},
		{name: "through the center's edge proxy", client: via, url: viaURL},
	}
	if knClient != nil {
		paths = append(paths, &edgeRoute{name: "through konnectivity", client: knClient, url: directURL})
	}
	for round := range forwardRounds {
		n := o.requests / forwardRounds
		if round < o.requests%forwardRounds {
			n++
		}
		for _, p := range paths {
			progress("round %d of %d: %d GETs %s, %d workers", round+1, forwardRounds, n, p.name, o.workers)
			if err := p.measure(ctx, procs, n, o.workers); err != nil {
				return nil, err
			}
		}
		if edge.syncer.exited() {
			return nil, errors.New("the syncer exited")
		}
	}
	directRun, viaRun := paths[0].run, paths[1].run
	directCPU, viaCPU := paths[0].perGET(), paths[1].perGET()

	workload := fmt.Sprintf("%d GETs of %s each way, %d concurrent, in %d rounds in which the ways take turns, one edge cluster (kube-apiserver on loopback)",
		o.requests, forwardPath, o.workers, forwardRounds)
	rows := []row{
		{"edge GETs direct: requests/s", fmt.Sprintf("%.0f", directRun.rate()), workload + ", with its admin credentials" + directRun.failures()},
		{"edge GETs direct: latency p50", ms(percentile(directRun.latencies, 50)), ""},
		{"edge GETs direct: latency p99", ms(percentile(directRun.latencies, 99)), ""},
		{"edge GETs through the tunnel: requests/s", fmt.Sprintf("%.0f", viaRun.rate()),
			"same GETs, admin token, " + tunnel.EdgesPrefix + forwardInv + "/" + forwardEdge + "/proxy (kubestellar kubeconfig --edge) → tunnel → syncer → edge" + viaRun.failures()},
		{"edge GETs through the tunnel: latency p50", ms(percentile(viaRun.latencies, 50)), ""},
		{"edge GETs through the tunnel: latency p99", ms(percentile(viaRun.latencies, 99)), ""},
		{"tunnel / direct: throughput", fmt.Sprintf("%.2f", viaRun.rate()/directRun.rate()), "requests/s through the tunnel ÷ direct"},
		{"tunnel / direct: latency p50", fmt.Sprintf("%.2f", float64(percentile(viaRun.latencies, 50))/float64(percentile(directRun.latencies, 50))),
			"p50 through the tunnel ÷ direct"},
		{"CPU per GET direct: edge cluster / client", fmt.Sprintf("%s / %s", msCPU(directCPU["edge cluster"]), msCPU(directCPU["client"])),
			"utime+stime of each process over the run ÷ GETs answered (the server and syncer idle: " + msCPU(directCPU["server"]+directCPU["syncer"]) + ")"},
		{"CPU per GET through the tunnel: edge cluster / server / syncer / client",
			fmt.Sprintf("%s / %s / %s / %s", msCPU(viaCPU["edge cluster"]), msCPU(viaCPU["server"]), msCPU(viaCPU["syncer"]), msCPU(viaCPU["client"])), ""},
		{"CPU per GET, every process: direct ÷ tunnel", fmt.Sprintf("%.2f", directCPU.total().Seconds()/viaCPU.total().Seconds()),
			fmt.Sprintf("%s ÷ %s: with every process on the same %d cores, the most the tunnel's throughput can be of direct's", msCPU(directCPU.total()), msCPU(viaCPU.total()), runtime.NumCPU())},
	}
	if len(paths) < 3 {
		return rows, nil
	}
	knRun, knCPU := paths[2].run, paths[2].perGET()
	return append(rows, []row{
		{"edge GETs through konnectivity: requests/s", fmt.Sprintf("%.0f", knRun.rate()),
			"same GETs, the edge's admin credentials end to end: HTTP CONNECT on proxy-server's unix socket → gRPC over mTLS → proxy-agent → edge (as kube-apiserver reaches nodes)" + knRun.failures()},
		{"edge GETs through konnectivity: latency p50", ms(percentile(knRun.latencies, 50)), ""},
		{"edge GETs through konnectivity: latency p99", ms(percentile(knRun.latencies, 99)), ""},
		{"konnectivity / direct: throughput", fmt.Sprintf("%.2f", knRun.rate()/directRun.rate()), "requests/s through konnectivity ÷ direct"},
		{"konnectivity / direct: latency p50", fmt.Sprintf("%.2f", float64(percentile(knRun.latencies, 50))/float64(percentile(directRun.latencies, 50))),
			"p50 through konnectivity ÷ direct"},
		{"tunnel / konnectivity: throughput", fmt.Sprintf("%.2f", viaRun.rate()/knRun.rate()),
			"ours ÷ the field's reference; konnectivity only carries bytes, ours authenticates the caller at the center and the syncer calls the edge with its own credentials"},
		{"CPU per GET through konnectivity: edge cluster / proxy-server / proxy-agent / client",
			fmt.Sprintf("%s / %s / %s / %s", msCPU(knCPU["edge cluster"]), msCPU(knCPU["proxy-server"]), msCPU(knCPU["proxy-agent"]), msCPU(knCPU["client"])),
			fmt.Sprintf("every process: direct ÷ konnectivity %.2f (%s ÷ %s)", directCPU.total().Seconds()/knCPU.total().Seconds(), msCPU(directCPU.total()), msCPU(knCPU.total()))},
	}...), nil
}

// forwardRounds is how many turns the forwarding section's paths take.
const forwardRounds = 5

// edgeRoute is one way to the edge cluster, and what its GETs have
// measured so far.
type edgeRoute struct {
	name   string
	client *http.Client
	url    string

	run getRun
	cpu map[string]time.Duration // each group's, over this path's GETs
}

// measure sends n more GETs along p, adding their latencies, wall time
// and every group's CPU time to p's.
func (p *edgeRoute) measure(ctx context.Context, procs procGroups, n, workers int) error {
	before, err := procs.cpu()
	if err != nil {
		return err
	}
	run, err := getMany(ctx, p.client, p.url, n, workers)
	if err != nil {
		return fmt.Errorf("GET %s %s: %w", p.url, p.name, err)
	}
	after, err := procs.cpu()
	if err != nil {
		return err
	}
	if p.cpu == nil {
		p.cpu = map[string]time.Duration{}
	}
	for group := range after {
		p.cpu[group] += after[group] - before[group]
	}
	p.run.latencies = append(p.run.latencies, run.latencies...)
	p.run.took += run.took
	if p.run.failed += run.failed; p.run.first == nil {
		p.run.first = run.first
	}
	return nil
}

// perGET is each group's CPU time per GET answered along p.
func (p *edgeRoute) perGET() cpuPerOp {
	return perOp(map[string]time.Duration{}, p.cpu, len(p.run.latencies))
}

// konnectivity is a proxy-server and proxy-agent started for the
// forwarding section, in a directory of their own.
type konnectivity struct {
	*edgecluster.Konnectivity
	dir string
}

// startKonnectivity starts them: the client's TLS and HTTP/2 then run end
// to end through the tunnel (DialContext), as kube-apiserver's do through
// its egress selector.
func startKonnectivity(ctx context.Context, progress func(string, ...any)) (*konnectivity, error) {
	dir, err := os.MkdirTemp("", "kubestellar-bench-konnectivity-")
	if err != nil {
		return nil, err
	}
	progress("starting konnectivity's proxy-server and proxy-agent")
	kn, err := edgecluster.StartKonnectivity(ctx, edgecluster.KonnectivityOptions{Dir: dir, Logf: prefixed(progress, "edgecluster: ")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &konnectivity{Konnectivity: kn, dir: dir}, nil
}

func (k *konnectivity) stop() {
	_ = k.Stop()
	os.RemoveAll(k.dir)
}

// procGroups are the processes a section measures, by group (the
// forwarding comparison's, the syncer burst's).
type procGroups map[string]map[string]int

// cpu reads each group's CPU time so far (utime+stime of its processes).
func (p procGroups) cpu() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for group, pids := range p {
		for name, pid := range pids {
			t, err := procCPU(pid)
			if err != nil {
				return nil, fmt.Errorf("CPU time of %s's %s: %w", group, name, err)
			}
			out[group] += t
		}
	}
	return out, nil
}

// cpuPerOp is each group's CPU time per operation (a GET, an object).
type cpuPerOp map[string]time.Duration

func perOp(before, after map[string]time.Duration, n int) cpuPerOp {
	out := cpuPerOp{}
	for group := range after {
		out[group] = (after[group] - before[group]) / time.Duration(max(n, 1))
	}
	return out
}

func (c cpuPerOp) total() time.Duration {
	var sum time.Duration
	for _, d := range c {
		sum += d
	}
	return sum
}

// getRun is the outcome of many GETs.
type getRun struct {
	latencies []time.Duration // of those that answered 200
	took      time.Duration   // wall time of them all
	failed    int
	first     error // the first failure
}

func (r getRun) rate() float64 { return float64(len(r.latencies)) / r.took.Seconds() }

// failures describes the failed GETs for a note, "" for none.
func (r getRun) failures() string {
	if r.failed == 0 {
		return ""
	}
	return fmt.Sprintf("; %d FAILED, first: %.200v", r.failed, r.first)
}

// getMany sends n GETs of url from workers goroutines. A benchmark counts
// failures rather than stopping at the first; more than one in ten is an
// error.
func getMany(ctx context.Context, client *http.Client, url string, n, workers int) (getRun, error) {
	lat := make([]time.Duration, n)
	ok := make([]bool, n)
	var mu sync.Mutex
	run := getRun{}
	began := time.Now()
	took, err := parallel(workers, n, func(i int) error {
		sent := time.Now()
		if _, err := get(ctx, client, url); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			mu.Lock()
			defer mu.Unlock()
			if run.failed++; run.first == nil {
				run.first = fmt.Errorf("%s into the run: %w", sent.Sub(began).Round(time.Millisecond), err)
			}
			return nil
		}
		lat[i], ok[i] = time.Since(sent), true
		return nil
	})
	if err != nil {
		return getRun{}, err
	}
	run.took = took
	for i := range lat {
		if ok[i] {
			run.latencies = append(run.latencies, lat[i])
		}
	}
	if run.failed*10 > n {
		return getRun{}, fmt.Errorf("%d of %d GETs failed, first: %w", run.failed, n, run.first)
	}
	return run, nil
}

// get returns the body of a GET that must answer 200.
func get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		// The API servers, and the edge proxy, say why in a Status.
		var status metav1.Status
		if json.Unmarshal(body, &status) == nil && status.Message != "" {
			return "", fmt.Errorf("%s: %s", resp.Status, status.Message)
		}
		return "", fmt.Errorf("%s: %.300s", resp.Status, body)
	}
	return string(body), nil
}

// msCPU shows a CPU time per request in milliseconds, to the microsecond.
func msCPU(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}
