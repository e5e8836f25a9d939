// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The live edges section: a fleet whose every edge is alive. Each simulated
// edge is the real syncer (package syncer, unchanged: its own join token,
// the CA-pinning handshake, the tunnel, its watches of its own mailbox with
// its own token, its heartbeats and status writes) against an edge cluster
// in memory (memedge), many of them in one process: the bench started
// again with -simulate-edges, so that the simulator's CPU and memory are
// its own process's and the server's figures are the server's.
//
// The section measures, for -live-edges N and -live-objects M: every
// syncer connected; the server at rest with them (RSS, CPU) and whether
// any edge was shown disconnected at any sample meanwhile; the fan-out of
// M ConfigMaps until every edge cluster holds all M; and one update until
// every edge cluster has it (p50, p99, max).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/certs"
	ksserver "github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/syncer"
	"github.com/kubestellar/kubestellar/test/memedge"
)

const (
	liveInv       = "live-inv"
	liveWDS       = "live-wds"
	liveNamespace = "live"
	liveProbe     = "probe"
	// serverFilesPerEdge is how many sockets the server holds for a live
	// edge (its one HTTP/2 connection, which carries its tunnel too), for
	// the server's limit of open files; simFilesPerEdge is about how many
	// files a simulated edge holds (measured: 3.2 when the tunnel was a
	// connection of its own), for a simulator's.
	serverFilesPerEdge = 1
	simFilesPerEdge    = 4
	// simEdgesPerProcess is how many edges one simulator process runs at
	// most: 10,000 edges' files would pass the open-files limit of one.
	simEdgesPerProcess = 2500
)

// simWorkers is each simulated syncer's --workers.
const simWorkers = 2

type liveOptions struct {
	edges, objects int
	// rest is how long the fleet is watched at rest.
	rest time.Duration
	// simulate is the spec file of a simulator process (internal).
	simulate string
	// nice is the simulators' niceness (nice(1)); below 0, niceFor
	// chooses it by the fleet's size.
	nice int
	// startRate is how many syncers a second the fleet starts, as a fleet
	// comes online; 0 starts them all at once, a storm (as after the
	// server's restart, which liveRestart measures either way).
	startRate float64
	// profiles, when set, is the directory the live edges section writes
	// the server's heap profile at rest into, and the rollouts section
	// its CPU profile of each measured change.
	profiles string
}

// liveSection names the section: "live edges" for 1,000 edges and 10
// objects (the size to become make bench's default once it finishes in a
// few minutes), and with its sizes otherwise, so that the record keeps
// each size's run (-live-edges 10000 -live-objects 100 is the issue's
// fleet).
func liveSection(o liveOptions) string { return o.section("live edges") }

// section is a section's name for this fleet: name alone at the default
// size, else with the size.
func (o liveOptions) section(name string) string {
	if o.edges == 1000 && o.objects == 10 {
		return name
	}
	return fmt.Sprintf("%s, %d edges × %d objects", name, o.edges, o.objects)
}

// simSpec is what the simulator process runs.
type simSpec struct {
	Server  string    `json:"server"`
	DataDir string    `json:"dataDir"`
	Edges   []simEdge `json:"edges"`
	// Pprof has the simulator serve its profiles on a loopback port,
	// which it reports (simReport.Pprof).
	Pprof bool `json:"pprof,omitempty"`
	// StartEvery is how long the simulator waits between starting one of
	// its syncers and the next (0: it starts them all at once).
	StartEvery time.Duration `json:"startEvery,omitempty"`
}

type simEdge struct {
	Name  string `json:"name"`
	Token string `json:"token"`
	// Server is the servers this edge's syncer is given, in its order
	// (--server a,b,c), when not the spec's: the HA section gives each
	// edge the cluster's servers beginning with another.
	Server string `json:"server,omitempty"`
}

// simReport is a line the simulator prints every second.
type simReport struct {
	// Ready is how many syncers have connected; Failed how many ended
	// with an error.
	Ready, Failed int
	// Objects is, per namespace whose name begins with liveNamespace, how
	// many ConfigMaps the edge clusters hold, all together.
	Objects map[string]int64 `json:",omitempty"`
	// Requests is how many requests the edge clusters have served.
	Requests int64
	// Probe is, per probeKey (the probe's namespace and data.v), how
	// many edges hold it.
	Probe map[string]int `json:",omitempty"`
	// Arrivals is, once every edge holds a probeKey, when each one's
	// cluster stored it (Unix ns), in the order of the spec's edges; said
	// once per key.
	Arrivals map[string][]int64 `json:",omitempty"`
	// Errors are the first errors syncers ended with.
	Errors []string `json:",omitempty"`
	// Pprof is the address the simulator serves its profiles on
	// (simSpec.Pprof).
	Pprof string `json:",omitempty"`
	// Lag is how late the simulator ran a timer at worst since its last
	// report (lagProbe): what a syncer's ping, due every few seconds,
	// waited for a core, in a process whose thousands of edges share
	// what the server leaves them.
	Lag time.Duration `json:",omitempty"`
	// Deployments is how many Deployments of liveStatusNamespace the edge
	// clusters hold; StatusSet how many of them the simulator has given
	// an available status (statusPlayer), StatusAt when it last finished
	// (Unix ns) and StatusError why it could not.
	Deployments, StatusSet, StatusAt int64  `json:",omitempty"`
	StatusError                      string `json:",omitempty"`
}

// lagProbe measures how late a process runs what is due: a goroutine
// woken every lagTick notes how much later than due it ran. take returns
// the worst since the last take.
type lagProbe struct{ worst atomic.Int64 }

const lagTick = 100 * time.Millisecond

func newLagProbe(ctx context.Context) *lagProbe {
	p := &lagProbe{}
	go func() {
		tick := time.NewTicker(lagTick)
		defer tick.Stop()
		due := time.Now().Add(lagTick)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due = p.tick(due, time.Now())
		}
	}()
	return p
}

// tick notes how late a tick due at due ran at now, and returns when the
// next one is due: a ticker drops the ticks it could not deliver, so the
// next is a tick from now, not from the one missed.
func (p *lagProbe) tick(due, now time.Time) time.Time {
	p.note(now.Sub(due))
	return now.Add(lagTick)
}

func (p *lagProbe) note(late time.Duration) {
	for {
		w := p.worst.Load()
		if int64(late) <= w || p.worst.CompareAndSwap(w, int64(late)) {
			return
		}
	}
}

func (p *lagProbe) take() time.Duration { return time.Duration(p.worst.Swap(0)) }

// runSimulatedEdges is the simulator process: it runs the spec's syncers
// until it is interrupted, printing a simReport each second.
func runSimulatedEdges(ctx context.Context, specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec simSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	// Thousands of syncers' logs would cost more than the syncers: none.
	klog.SetLogger(logr.Discard())
	logrus.SetOutput(io.Discard)
	ctx = klog.NewContext(ctx, logr.Discard())
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var pprofAddr string
	if spec.Pprof {
		if pprofAddr, err = servePprof(ctx); err != nil {
			return err
		}
	}

	lag := newLagProbe(ctx)
	var (
		ready, failed atomic.Int64
		mu            sync.Mutex
		objects       = map[string]int64{}
		arrivals      = map[string]map[int]int64{}
		told          = map[string]bool{}
		errs          []string
		clusters      = make([]*memedge.Cluster, len(spec.Edges))
		wg            sync.WaitGroup
		player        = &statusPlayer{clusters: clusters}
		statusErr     atomic.Value
	)
	for i, e := range spec.Edges {
		c := memedge.New()
		c.OnChange = func(gvr schema.GroupVersionResource, typ watch.EventType, obj *unstructured.Unstructured) {
			player.onChange(gvr, typ, obj)
			ns := obj.GetNamespace()
			if gvr != cmGVR || !strings.HasPrefix(ns, liveNamespace) {
				return
			}
			now := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			switch typ {
			case watch.Added:
				objects[ns]++
			case watch.Deleted:
				objects[ns]--
				return
			}
			if obj.GetName() != liveProbe {
				return
			}
			v, _, _ := unstructured.NestedString(obj.Object, "data", "v")
			k := probeKey(ns, v)
			if arrivals[k] == nil {
				arrivals[k] = map[int]int64{}
			}
			if _, ok := arrivals[k][i]; !ok {
				arrivals[k][i] = now
			}
		}
		clusters[i] = c
		o := syncer.NewOptions()
		o.Server, o.Token, o.SyncTarget = spec.Server, e.Token, e.Name
		if e.Server != "" {
			o.Server = e.Server
		}
		o.DataDir = filepath.Join(spec.DataDir, e.Name)
		o.EdgeConfig, o.EdgeQPS = c.Config(), -1
		// A small edge's syncer: two objects in step at a time rather than
		// sixteen (each worker an idle goroutine the rest of the time, 32
		// goroutines an edge the simulator did not need).
		o.Workers = simWorkers
		o.OnReady = func(string) { ready.Add(1) }
		o.Complete()
		if err := o.Validate(); err != nil {
			return fmt.Errorf("edge %s: %w", e.Name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep(ctx, startDelay(i, spec.StartEvery)) != nil {
				return
			}
			ctx := ctx
			if i < 10 {
				// A few edges' logs, in detail, in the simulator's log:
				// what every edge does, at the cost of a few.
				ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(4), textlogger.Output(os.Stderr))))
			}
			if err := syncer.Run(ctx, o, io.Discard); err != nil && ctx.Err() == nil {
				failed.Add(1)
				mu.Lock()
				if len(errs) < 5 {
					errs = append(errs, fmt.Sprintf("%s: %v", o.SyncTarget, err))
				}
				mu.Unlock()
			}
		}()
	}
	// The bench's lines: play the edges' controllers (statusPlayer).
	go player.serve(ctx, os.Stdin, func(err error) { statusErr.Store(err.Error()) })
	enc := json.NewEncoder(os.Stdout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-tick.C:
		}
		r := simReport{Ready: int(ready.Load()), Failed: int(failed.Load()), Objects: map[string]int64{}, Probe: map[string]int{}, Pprof: pprofAddr, Lag: lag.take()}
		for _, c := range clusters {
			r.Requests += c.Counts.Requests.Load()
		}
		r.Deployments, r.StatusSet, r.StatusAt = player.held.Load(), player.set.Load(), player.doneAt.Load()
		r.StatusError, _ = statusErr.Load().(string)
		mu.Lock()
		r.Errors = slices.Clone(errs)
		maps.Copy(r.Objects, objects)
		for v, at := range arrivals {
			r.Probe[v] = len(at)
			if len(at) == len(spec.Edges) && !told[v] {
				told[v] = true
				if r.Arrivals == nil {
					r.Arrivals = map[string][]int64{}
				}
				r.Arrivals[v] = make([]int64, len(at))
				for i, t := range at {
					r.Arrivals[v][i] = t
				}
			}
		}
		mu.Unlock()
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
}

// servePprof serves the process's profiles on a loopback port until ctx
// ends, and returns its address.
func servePprof(ctx context.Context) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go srv.Serve(l) //nolint:errcheck // ends with ctx
	return l.Addr().String(), nil
}

// probeKey names a value of the probe (data.v of the ConfigMap liveProbe)
// in a namespace.
func probeKey(namespace, v string) string { return namespace + "=" + v }

// simulator is the simulator process as the section sees it.
type simulator struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{}
	log    string
	mu     sync.Mutex
	last   simReport
	arrive map[string][]int64
	// lag is the worst of the reports' Lag since takeLag.
	lag time.Duration
	err error
}

// niceFor is the simulators' niceness for a fleet of edges: -sim-nice
// when given, else 0 while the fleet takes at most two simulator
// processes and 10 beyond. Each simulator runs as many threads as the
// server, and the kernel shares the cores by thread: at 3,000 edges (two
// simulators) at nice 0 the server kept up (its edges at most 2 s late
// in a fan-out, none shown disconnected at rest), and at 10,000 (four)
// it had an eighth of a core in the connect, answered nothing for
// minutes, dropped 6,678 tunnels for silence, and its request
// goroutines queued on its log's lock (22,707 of 57,893) and APF's
// (9,671) while the simulators reconnected.
func (o liveOptions) niceFor(edges int) int {
	if o.nice >= 0 {
		return o.nice
	}
	if (edges+simEdgesPerProcess-1)/simEdgesPerProcess <= 2 {
		return 0
	}
	return 10
}

func startSimulator(ctx context.Context, specPath, log string, nice int) (*simulator, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	// The simulator runs at nice (liveOptions.niceFor). Real edges
	// have cores of their own; here both share two. A niced simulator
	// leaves the server the cores whenever both want them (at a connect
	// of 10,000 edges at nice 0, four simulators had 1.25 cores and the
	// server 0.6), but starves in the server's bursts: at nice 10 its
	// edges ran up to 4 s late in a fan-out to 1,000 of them, their
	// pings through the tunnels 15 s late, and the server dropped dozens
	// of tunnels (and their syncers reconnected and reported everything
	// again, more load in the burst); at nice 0 none. Its lateness
	// (lagProbe) is printed with each measurement, its CPU as its own.
	cmd := exec.Command("nice", "-n", strconv.Itoa(nice), self, "-simulate-edges", specPath)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sim := &simulator{cmd: cmd, stdin: stdin, done: make(chan struct{}), log: log, arrive: map[string][]int64{}}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r simReport
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				continue
			}
			sim.mu.Lock()
			sim.last = r
			sim.lag = max(sim.lag, r.Lag)
			for v, at := range r.Arrivals {
				sim.arrive[v] = at
			}
			sim.mu.Unlock()
		}
		sim.err = cmd.Wait()
		logFile.Close()
		close(sim.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			sim.stop()
		case <-sim.done:
		}
	}()
	return sim, nil
}

// simFleet is the simulator processes of a section, seen as one.
type simFleet []*simulator

// startSimulators starts the simulator processes of spec's edges, at most
// simEdgesPerProcess each, with their specs and logs in dir.
func startSimulators(ctx context.Context, spec simSpec, dir string, nice int, rate float64) (simFleet, error) {
	var fleet simFleet
	processes := (len(spec.Edges) + simEdgesPerProcess - 1) / simEdgesPerProcess
	for i := 0; i < processes; i++ {
		part := spec
		part.Edges = spec.Edges[i*simEdgesPerProcess : min(len(spec.Edges), (i+1)*simEdgesPerProcess)]
		part.StartEvery = startEvery(rate, processes)
		specPath := filepath.Join(dir, fmt.Sprintf("simulated-edges-%d.json", i))
		data, err := json.Marshal(part)
		if err == nil {
			err = os.WriteFile(specPath, data, 0o600)
		}
		var sim *simulator
		if err == nil {
			sim, err = startSimulator(ctx, specPath, filepath.Join(dir, fmt.Sprintf("simulated-edges-%d.log", i)), nice)
		}
		if err != nil {
			fleet.stop()
			return nil, err
		}
		fleet = append(fleet, sim)
	}
	return fleet, nil
}

// startedNote is what a connect row adds when n syncers were started at
// a pace: "" when they all started at once.
func (o liveOptions) startedNote(n int) string {
	if o.startRate <= 0 {
		return ""
	}
	return fmt.Sprintf(", started %g a second (the last %s after the first)", o.startRate, long(time.Duration(float64(n-1)*float64(time.Second)/o.startRate)))
}

// startEvery is the pause between two starts in one of processes
// simulators that together start rate syncers a second (0: none).
func startEvery(rate float64, processes int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(processes) * float64(time.Second) / rate)
}

// startDelay is when, after its simulator began, the i-th syncer starts.
func startDelay(i int, every time.Duration) time.Duration {
	return time.Duration(i) * every
}

// report sums the processes' last reports.
func (f simFleet) report() simReport {
	var out simReport
	out.Objects, out.Probe = map[string]int64{}, map[string]int{}
	for _, sim := range f {
		r := sim.report()
		out.Ready += r.Ready
		out.Failed += r.Failed
		for ns, k := range r.Objects {
			out.Objects[ns] += k
		}
		out.Requests += r.Requests
		for v, k := range r.Probe {
			out.Probe[v] += k
		}
		out.Errors = append(out.Errors, r.Errors...)
		out.Lag = max(out.Lag, r.Lag)
		out.Deployments += r.Deployments
		out.StatusSet += r.StatusSet
		out.StatusAt = max(out.StatusAt, r.StatusAt)
		if out.StatusError == "" {
			out.StatusError = r.StatusError
		}
	}
	return out
}

// tell writes line to every simulator's standard input.
func (f simFleet) tell(line string) error {
	for i, sim := range f {
		if _, err := io.WriteString(sim.stdin, line+"\n"); err != nil {
			return fmt.Errorf("telling simulator %d %q: %w", i, line, err)
		}
	}
	return nil
}

// takeLag is how late the simulators ran what was due, at worst, since
// the last takeLag.
func (f simFleet) takeLag() time.Duration {
	var worst time.Duration
	for _, sim := range f {
		sim.mu.Lock()
		worst = max(worst, sim.lag)
		sim.lag = 0
		sim.mu.Unlock()
	}
	return worst
}

// arrivals is when every edge stored probeKey v, in the order of the
// fleet's edges, once every process has said it.
func (f simFleet) arrivals(v string) []int64 {
	var out []int64
	for _, sim := range f {
		at := sim.arrivals(v)
		if at == nil {
			return nil
		}
		out = append(out, at...)
	}
	return out
}

func (f simFleet) stop() {
	var wg sync.WaitGroup
	for _, sim := range f {
		wg.Go(sim.stop)
	}
	wg.Wait()
}

func (f simFleet) alive() error {
	for _, sim := range f {
		if err := sim.alive(); err != nil {
			return err
		}
	}
	return nil
}

// cpu is the processes' CPU time so far.
func (f simFleet) cpu() (time.Duration, error) {
	var sum time.Duration
	for _, sim := range f {
		d, err := procCPU(sim.cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// rss is the processes' resident memory.
func (f simFleet) rss() (int64, error) {
	var sum int64
	for _, sim := range f {
		m, err := procMemory(sim.cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		sum += m["VmRSS"]
	}
	return sum, nil
}

// wait polls the processes' reports until ok, failing after timeout or if
// one of them or a syncer ends.
func (f simFleet) wait(ctx context.Context, timeout time.Duration, what string, progress func(string, ...any), count func(simReport) int, want int) error {
	return pollProgress(ctx, timeout, what, progress, func(context.Context) (int, error) {
		if err := f.alive(); err != nil {
			return 0, err
		}
		return count(f.report()), nil
	}, want)
}

// cpuProfile starts a 30-second CPU profile of the simulator and returns
// what waits for it to end and be written to path.
func (sim *simulator) cpuProfile(ctx context.Context, path string) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := func() error {
			addr := sim.report().Pprof
			if addr == "" {
				return fmt.Errorf("the simulator serves no profiles")
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/profile?seconds=30", nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			return os.WriteFile(path, data, 0o644)
		}()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: the simulator's CPU profile for %s: %v\n", path, err)
		}
	}()
	return func() { <-done }
}

func (sim *simulator) report() simReport {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return sim.last
}

func (sim *simulator) arrivals(v string) []int64 {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return sim.arrive[v]
}

// stop interrupts the simulator, whose syncers end as on SIGTERM, and
// waits for it (killing it after a minute).
func (sim *simulator) stop() {
	select {
	case <-sim.done:
		return
	default:
	}
	_ = sim.cmd.Process.Signal(os.Interrupt)
	select {
	case <-sim.done:
	case <-time.After(time.Minute):
		_ = sim.cmd.Process.Kill()
		<-sim.done
	}
}

// alive fails if the simulator has exited or a syncer in it has failed.
func (sim *simulator) alive() error {
	select {
	case <-sim.done:
		return fmt.Errorf("the simulator exited: %v\n%s", sim.err, tailFile(sim.log, 3000))
	default:
	}
	r := sim.report()
	if r.Failed > 0 {
		return fmt.Errorf("%d simulated syncers failed: %v", r.Failed, r.Errors)
	}
	if r.StatusError != "" {
		return fmt.Errorf("the simulator could not play its edges' controllers: %s", r.StatusError)
	}
	return nil
}

// liveFleet is a server with a fleet of live edges: its SyncTargets,
// Locations and join tokens, and the simulator processes running their
// syncers.
type liveFleet struct {
	s *server
	// servers are every server of the fleet's cluster, s first: one, or
	// the HA section's servers on one datastore.
	servers []*server
	sim     simFleet
	// inv is the inventory space's client.
	inv dynamic.Interface
	// connected is how long the syncers took to connect, and
	// conditionsAt when the last SyncTarget was SyncerConnected.
	connected    time.Duration
	began        time.Time
	conditionsAt time.Time
	// mailboxes is how long the SyncTargets took from the first create
	// until every mailbox was ready (the creates, their Locations and
	// tokens included).
	mailboxes time.Duration
	// profiles is where the server's and a simulator's profiles go ("":
	// none).
	profiles string
}

// startLiveFleet starts a server with n SyncTargets (labelled env=live,
// name=NAME and ring=RING, whose rings rollouts' waves select) in
// liveInv, the WDS liveWDS, and the syncers of the SyncTargets,
// simulated, and waits for them to connect. stop ends it all; explain
// adds the server's and the simulator's logs to an error.
func startLiveFleet(ctx context.Context, bin string, o liveOptions, progress func(string, ...any)) (*liveFleet, error) {
	// The limit is the server's: each simulator process needs fewer.
	if err := raiseFileLimit(serverFilesPerEdge*o.edges + 1024); err != nil {
		return nil, fmt.Errorf("%d live edges: the server holds %d sockets per edge: %w", o.edges, serverFilesPerEdge, err)
	}
	s, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	return fleetOn(ctx, bin, []*server{s}, o, progress)
}

// fleetOn makes the live fleet's spaces, SyncTargets and tokens through
// servers[0] and starts the syncers, each given every server beginning
// with servers[i % len(servers)], so that each server holds its share of
// the tunnels. The fleet owns the servers: stop, or an error, stops them.
func fleetOn(ctx context.Context, bin string, servers []*server, o liveOptions, progress func(string, ...any)) (_ *liveFleet, err error) {
	n, profiles := o.edges, o.profiles
	s := servers[0]
	f := &liveFleet{s: s, servers: servers, profiles: profiles}
	defer func() {
		if err != nil {
			err = f.explain(ctx, err)
			f.stop()
		}
	}()
	for _, args := range [][]string{{liveInv, "--type", "inventory"}, {liveWDS, "--type", "wds", "--inventory-space", liveInv}} {
		if _, err := s.cli(ctx, bin, append([]string{"space", "create"}, append(args, "--no-context")...)...); err != nil {
			return nil, err
		}
	}
	caPEM, err := os.ReadFile(filepath.Join(ksserver.PKIDir(s.dataDir), certs.CACertFile))
	if err != nil {
		return nil, err
	}
	progress("creating %d SyncTargets, their Locations and join tokens", n)
	spec := simSpec{Server: s.url(), DataDir: filepath.Join(s.dataDir, "edges"), Edges: make([]simEdge, n), Pprof: true}
	f.inv = dynamic.NewForConfigOrDie(s.config(liveInv))
	root := kubernetes.NewForConfigOrDie(s.config(spaces.Root))
	var made atomic.Int64
	creating := time.Now()
	if _, err := parallel(16, n, func(i int) error {
		name := simulatedName(i)
		created, err := f.inv.Resource(stGVR).Create(ctx, obj("SyncTarget", name, map[string]any{"env": "live", "name": name, "ring": ringOf(i, n)}, nil), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating SyncTarget %s: %w", name, err)
		}
		loc := obj("Location", name, map[string]any{"env": "live"}, map[string]any{
			"resource":         map[string]any{"group": edgev2alpha1.GroupName, "version": "v2alpha1", "resource": "synctargets"},
			"instanceSelector": map[string]any{"matchLabels": map[string]any{"name": name}},
		})
		if _, err := f.inv.Resource(locationsGVR).Create(ctx, loc, metav1.CreateOptions{}); err != nil {
			return err
		}
		tok, _, err := auth.CreateToken(ctx, root, auth.NewTokenOptions{InventorySpace: liveInv, SyncTarget: name, SyncTargetUID: created.GetUID(),
			Description: "kubestellar bench", CAPEM: caPEM})
		if err != nil {
			return err
		}
		spec.Edges[i] = simEdge{Name: name, Token: tok.String()}
		if len(servers) > 1 {
			spec.Edges[i].Server = serverList(servers, i)
		}
		if k := made.Add(1); k%500 == 0 || k == int64(n) {
			progress("%d of %d SyncTargets", k, n)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := mailboxesReady(ctx, dynamic.NewForConfigOrDie(s.config(spaces.Root)), n); err != nil {
		return nil, err
	}
	f.mailboxes = time.Since(creating)

	progress("starting %d syncers, each with an edge cluster in memory", n)
	// Where the connect's requests went, printed when it ends (or
	// fails): what to profile next.
	printRequests, err := requestsSince(ctx, s, progress)
	if err != nil {
		return nil, err
	}
	f.began = time.Now()
	if f.sim, err = startSimulators(ctx, spec, s.dataDir, o.niceFor(n), o.startRate); err != nil {
		return nil, err
	}
	go f.dumpOnDrop(ctx, progress)
	profiled := make(chan struct{})
	if profiles != "" {
		// The server and a simulator in the thick of the connect: 30 s
		// from a minute after the syncers start.
		go func() {
			defer close(profiled)
			if sleep(ctx, time.Minute) != nil {
				return
			}
			if wait, err := cpuProfile(ctx, s, filepath.Join(profiles, "live-connect-cpu.pb.gz")); err == nil {
				f.sim[0].cpuProfile(ctx, filepath.Join(profiles, "live-connect-simulator-cpu.pb.gz"))()
				wait()
			}
		}()
	} else {
		close(profiled)
	}
	if err := f.sim.wait(ctx, connectLimit(n, o.startRate), fmt.Sprintf("%d syncers connected", n), progress, func(r simReport) int { return r.Ready }, n); err != nil {
		printRequests("the unfinished connect")
		return nil, err
	}
	printRequests("the connect")
	f.connected = time.Since(f.began)
	if f.conditionsAt, err = waitSyncersConnected(ctx, s, liveInv, n, progress); err != nil {
		return nil, err
	}
	// The server profiles one thing at a time: a section's own profiles
	// (the rollouts') start once the connect's has ended.
	select {
	case <-profiled:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return f, nil
}

// serverList is edge i's --server: every server, beginning with the
// i-th (modulo their number), so that each holds its share of the edges
// while all can reach it.
func serverList(servers []*server, i int) string {
	urls := make([]string, len(servers))
	for j := range servers {
		urls[j] = servers[(i+j)%len(servers)].url()
	}
	return strings.Join(urls, ",")
}

// connectLimit is how long n syncers started rate a second (0: at once)
// may take to connect: 10 minutes, or 100 ms an edge for a larger fleet
// (10,000 edges: 16 min 40 s), so that a fleet that connects slowly is
// measured rather than failed; after the last one starts, if that is
// later.
func connectLimit(n int, rate float64) time.Duration {
	limit := max(10*time.Minute, time.Duration(n)*100*time.Millisecond)
	if rate > 0 {
		limit = max(limit, time.Duration(float64(n)*float64(time.Second)/rate)+5*time.Minute)
	}
	return limit
}

// explain adds the end of the server's log and of the first simulator's
// to err, unless the run was interrupted.
func (f *liveFleet) explain(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w\n--- end of the server's log ---\n%s\n--- end of the simulator's log ---\n%s%s", err,
		tailFile(filepath.Join(f.s.dataDir, "server.log"), 3000), tailFile(filepath.Join(f.s.dataDir, "simulated-edges-0.log"), 2000), f.keepLogs())
}

// keepLogs copies the servers' and the simulators' logs out of the data
// directories, which stop removes, and says where. The first server's
// keep their names; another server's are prefixed with its index
// (1-server.log).
func (f *liveFleet) keepLogs() string {
	dir := ""
	for i, s := range f.servers {
		logs, _ := filepath.Glob(filepath.Join(s.dataDir, "*.log"))
		for _, l := range logs {
			if dir == "" {
				var err error
				if dir, err = os.MkdirTemp("", "kubestellar-bench-logs-"); err != nil {
					return ""
				}
			}
			name := filepath.Base(l)
			if i > 0 {
				name = fmt.Sprintf("%d-%s", i, name)
			}
			if data, err := os.ReadFile(l); err == nil {
				_ = os.WriteFile(filepath.Join(dir, name), data, 0o644)
			}
		}
	}
	if dir == "" {
		return ""
	}
	return "\n--- the logs are kept in " + dir + " ---"
}

// stallMarks are what the server logs when it stalls: requests that ran
// past their timeout. maintenanceMarks are what it logs of a slow round of
// the datastore's maintenance, which holds the writes in turns: a cause
// to look at, not a stall by itself.
var (
	stallMarks       = []string{"Post-timeout activity", "FinishRequest: post-timeout activity"}
	maintenanceMarks = []string{"maintenance round was slow", "log checkpoint was slow"}
)

// serverLogSize is how long the server's log is now, for stallsSince.
func (f *liveFleet) serverLogSize() int64 {
	info, err := os.Stat(filepath.Join(f.s.dataDir, "server.log"))
	if err != nil {
		return 0
	}
	return info.Size()
}

// logSince returns how many lines of the server's log after offset carry
// one of marks, and the first few of them.
func (f *liveFleet) logSince(offset int64, marks []string) (int, []string) {
	file, err := os.Open(filepath.Join(f.s.dataDir, "server.log"))
	if err != nil {
		return 0, nil
	}
	defer file.Close()
	if _, err := file.Seek(offset, io.SeekStart); err != nil {
		return 0, nil
	}
	return markedLines(file, marks, 3)
}

// markedLines counts the lines of r that carry one of marks, and returns
// the first few, cut short.
func markedLines(r io.Reader, marks []string, few int) (int, []string) {
	n, first := 0, []string(nil)
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !slices.ContainsFunc(marks, func(m string) bool { return strings.Contains(line, m) }) {
			continue
		}
		n++
		if len(first) < few {
			if len(line) > 300 {
				line = line[:300] + "…"
			}
			first = append(first, line)
		}
	}
	return n, first
}

// stop ends the simulators and the servers, and removes the servers' data.
func (f *liveFleet) stop() {
	f.sim.stop()
	for _, s := range f.servers {
		s.stop()
		os.RemoveAll(s.dataDir)
	}
}

// ringOf is edge i's ring of n, for rollouts' waves: canary (1 %), early
// (4 %), middle (15 %), late (30 %) and the rest (50 %).
func ringOf(i, n int) string {
	for _, r := range liveRings {
		if i < n*r.upTo/100 {
			return r.name
		}
	}
	return "rest"
}

var liveRings = []struct {
	name string
	upTo int // percent of the fleet, counted from the first edge
}{{"canary", 1}, {"early", 5}, {"middle", 20}, {"late", 50}}

// onLiveFleet runs measure on a fleet of n live edges (startLiveFleet),
// stopping it after, with the ends of its logs in an error.
func onLiveFleet(ctx context.Context, bin string, o liveOptions, progress func(string, ...any), measure func(*liveFleet) ([]row, error)) ([]row, error) {
	f, err := startLiveFleet(ctx, bin, o, progress)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	rows, err := measure(f)
	if err != nil {
		return nil, f.explain(ctx, err)
	}
	return rows, nil
}

func liveEdgesBench(ctx context.Context, bin string, o liveOptions, progress func(string, ...any)) ([]row, error) {
	progress = prefixed(progress, "live edges: ")
	return onLiveFleet(ctx, bin, o, progress, func(f *liveFleet) ([]row, error) { return liveEdgesMeasure(ctx, bin, f, o, progress) })
}

// liveEdgesMeasure is the live edges section on its fleet.
func liveEdgesMeasure(ctx context.Context, bin string, f *liveFleet, o liveOptions, progress func(string, ...any)) ([]row, error) {
	n, m := o.edges, o.objects
	s, sim, inv := f.s, f.sim, f.inv

	progress("watching the fleet at rest for %s", o.rest)
	// One watch of the SyncTargets says whether any edge is shown
	// disconnected at any moment, at the cost of their changes only: a
	// list every few seconds would be most of the server's CPU at rest.
	fleetCtx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	fleet, err := watchFleet(fleetCtx, inv)
	if err != nil {
		return nil, err
	}
	pid := s.cmd.Process.Pid
	settled, err := settle(ctx, pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	simCPU0, err := sim.cpu()
	if err != nil {
		return nil, err
	}
	sim.takeLag()
	// What a fleet at rest asks of the server: its watches' renewals, its
	// heartbeats' writes.
	printRestRequests, err := requestsSince(ctx, s, progress)
	if err != nil {
		return nil, err
	}
	restBegan := time.Now()
	fleet.reset()
	if o.profiles != "" {
		// What the server and a simulator spend at rest: the first 30 s.
		wait, err := cpuProfile(ctx, s, filepath.Join(o.profiles, "live-rest-cpu.pb.gz"))
		if err != nil {
			return nil, err
		}
		defer wait()
		simWait := sim[0].cpuProfile(ctx, filepath.Join(o.profiles, "live-rest-simulator-cpu.pb.gz"))
		defer simWait()
	}
	for time.Since(restBegan) < o.rest {
		if err := sleep(ctx, min(5*time.Second, o.rest-time.Since(restBegan))); err != nil {
			return nil, err
		}
		if err := sim.alive(); err != nil {
			return nil, err
		}
	}
	worst := fleet.worst()
	restTook := time.Since(restBegan)
	printRestRequests("the rest")
	restLag := sim.takeLag()
	cpu1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	simCPU1, err := sim.cpu()
	if err != nil {
		return nil, err
	}
	rssRest := s.rss()
	// What the server holds for the fleet, without the heap's growth
	// before a collection: the live heap after one, and the goroutines.
	heapRest, err := liveHeap(ctx, s)
	if err != nil {
		return nil, err
	}
	if o.profiles != "" {
		if err := heapProfile(ctx, s, filepath.Join(o.profiles, "live-rest-heap.pb.gz")); err != nil {
			return nil, err
		}
	}
	goroutines, err := scrape(ctx, s, "go_goroutines", "go_memstats_stack_inuse_bytes")
	if err != nil {
		return nil, err
	}
	simRSS, err := sim.rss()
	if err != nil {
		return nil, err
	}

	progress("placing %d ConfigMaps on the %d live edges (%d copies)", m, n, m*n)
	wds := kubernetes.NewForConfigOrDie(s.config(liveWDS))
	if err := createLiveObjects(ctx, wds, liveNamespace, m); err != nil {
		return nil, err
	}
	// Where the fan-out's requests went, printed when it ends (or fails):
	// what to profile next.
	printRequests, err := requestsSince(ctx, s, progress)
	if err != nil {
		return nil, err
	}
	sim.takeLag()
	fanBegan := time.Now()
	fanCPU0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	if err := placeLive(ctx, s); err != nil {
		return nil, err
	}
	if err := sim.wait(ctx, 30*time.Minute, fmt.Sprintf("%d ConfigMaps in the edge clusters", m*n), progress,
		func(r simReport) int { return int(r.Objects[liveNamespace]) }, m*n); err != nil {
		printRequests("the unfinished fan-out")
		return nil, err
	}
	fanTook := time.Since(fanBegan)
	fanLag := sim.takeLag()
	printRequests("the fan-out")
	fanCPU1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	rssFan := s.rss()

	progress("updating one ConfigMap placed on all %d edges", n)
	probe, err := wds.CoreV1().ConfigMaps(liveNamespace).Get(ctx, liveProbe, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	probe.Data["v"] = "2"
	updated := time.Now()
	if _, err := wds.CoreV1().ConfigMaps(liveNamespace).Update(ctx, probe, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	if err := sim.wait(ctx, 10*time.Minute, fmt.Sprintf("%d edges with the update", n), progress,
		func(r simReport) int {
			if len(sim.arrivals(probeKey(liveNamespace, "2"))) == n {
				return n
			}
			return min(r.Probe[probeKey(liveNamespace, "2")], n-1)
		}, n); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, n)
	for _, t := range sim.arrivals(probeKey(liveNamespace, "2")) {
		lat = append(lat, time.Unix(0, t).Sub(updated))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	down := fleet.now()
	simCPUNote := func(cpu time.Duration, d time.Duration) string {
		return fmt.Sprintf("%.1f %% of a core", 100*cpu.Seconds()/d.Seconds())
	}
	processes := "one simulator process"
	if len(sim) > 1 {
		processes = fmt.Sprintf("%d simulator processes", len(sim))
	}
	who := fmt.Sprintf("%d live edges: the real syncer (--workers %d) against an edge cluster in memory, in %s at nice %d", n, simWorkers, processes, o.niceFor(n))
	who += o.startedNote(n)
	measured := []row{
		{fmt.Sprintf("%d syncers started → all connected", n), long(f.connected), who},
		{fmt.Sprintf("%d syncers started → all SyncTargets SyncerConnected", n), long(f.conditionsAt.Sub(f.began)), "the server writes the condition when a syncer's tunnel opens"},
		{fmt.Sprintf("edges shown disconnected, %d live edges at rest", n), strconv.Itoa(worst),
			fmt.Sprintf("the most at any moment of %s at rest (a watch of every SyncTarget); %d after the update; the simulated edges ran up to %s late", long(restTook), down, long(restLag))},
		{fmt.Sprintf("server RSS at rest, %d live edges", n), mib(rssRest), liveRestNote(settled, restTook) + "; target ≤ 4 GiB for 10,000"},
		{fmt.Sprintf("server live heap at rest, %d live edges", n), mib(heapRest), fmt.Sprintf("after a collection; %.1f KiB per edge", float64(heapRest)/float64(n)/1024)},
		{fmt.Sprintf("server goroutines at rest, %d live edges", n), strconv.Itoa(int(goroutines["go_goroutines"])),
			fmt.Sprintf("%.1f per edge; their stacks %s of the RSS", goroutines["go_goroutines"]/float64(n), mib(int64(goroutines["go_memstats_stack_inuse_bytes"])))},
		{fmt.Sprintf("server CPU at rest, %d live edges", n), simCPUNote(cpu1-cpu0, restTook), fmt.Sprintf("heartbeats every %s each", syncer.NewOptions().HeartbeatInterval)},
		{"simulator RSS at rest", mib(simRSS), fmt.Sprintf("%.1f KiB per edge (syncer and its edge cluster in memory)", float64(simRSS)/float64(n)/1024)},
		{"simulator CPU at rest", simCPUNote(simCPU1-simCPU0, restTook), "the simulated syncers' own cost, not the server's"},
		{fmt.Sprintf("fan-out: %d ConfigMaps × %d live edges", m, n), long(fanTook), fmt.Sprintf("%d copies, from the placement until every edge cluster holds all; the simulated edges ran up to %s late; target ≤ 5 min for 10,000 edges", m*n, long(fanLag))},
		{"server CPU per copy, live fan-out", fmt.Sprintf("%d µs", (fanCPU1-fanCPU0).Microseconds()/int64(max(1, m*n))), "utime+stime of the server during the fan-out ÷ copies"},
		{"server RSS after the live fan-out", mib(rssFan), ""},
		{fmt.Sprintf("one update → all %d live edges, p50", n), long(percentile(lat, 50)), "from the WDS update to each edge cluster's write; target ≤ 10 s for 10,000"},
		{fmt.Sprintf("one update → all %d live edges, p99", n), long(percentile(lat, 99)), "target ≤ 30 s for 10,000"},
		{fmt.Sprintf("one update → all %d live edges, max", n), long(lat[len(lat)-1]), ""},
	}
	stopFleet() // its watch ends with the server
	restart, err := liveRestart(ctx, bin, f, n, progress)
	if err != nil {
		printMeasured(progress, measured)
		return nil, err
	}
	measured = append(measured, restart...)
	status, err := liveStatusMeasure(ctx, f, o, progress)
	if err != nil {
		printMeasured(progress, measured)
		return nil, err
	}
	return append(measured, status...), nil
}

// printMeasured prints, through progress, the rows a section measured before
// a later measurement failed: a large fleet's run is long, and what it
// measured stands even when the section fails.
func printMeasured(progress func(string, ...any), rows []row) {
	progress("measured before the failure:")
	for _, r := range rows {
		progress("  %s: %s (%s)", r.metric, r.value, r.note)
	}
}

// createLiveObjects creates namespace in the WDS and m ConfigMaps in it,
// the first of them the probe, each with data.v "1".
func createLiveObjects(ctx context.Context, wds kubernetes.Interface, ns string, m int) error {
	if _, err := wds.CoreV1().Namespaces().Create(ctx, namespace(ns), metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range m {
		cm := configMap(fmt.Sprintf("obj-%03d", i))
		if i == 0 {
			cm.Name = liveProbe
		}
		cm.Data["v"] = "1"
		if _, err := wds.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// placeLive places the live namespace's ConfigMaps on every live edge.
func placeLive(ctx context.Context, s *server) error {
	ep := placementObject("live", map[string]string{"env": "live"},
		edgev2alpha1.DownsyncClause{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{liveNamespace}})
	u, err := toUnstructured(ep)
	if err != nil {
		return err
	}
	_, err = dynamic.NewForConfigOrDie(s.config(liveWDS)).Resource(epGVR).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// liveRestNote says how a figure at rest was measured.
func liveRestNote(settled bool, d time.Duration) string {
	note := fmt.Sprintf("at the end of %s at rest", long(d))
	if !settled {
		note += " (the server had not settled under 10 % of a core after 2 min)"
	}
	return note
}

// waitSyncersConnected waits until n SyncTargets of inventory say
// SyncerConnected.
func waitSyncersConnected(ctx context.Context, s *server, inventory string, n int, progress func(string, ...any)) (time.Time, error) {
	inv := dynamic.NewForConfigOrDie(s.config(inventory))
	err := pollProgress(ctx, 5*time.Minute, fmt.Sprintf("%d SyncTargets with SyncerConnected=True", n), progress, func(ctx context.Context) (int, error) {
		down, err := disconnected(ctx, inv)
		if err != nil {
			return 0, nil
		}
		return n - down, nil
	}, n)
	return time.Now(), err
}

// fleetWatch follows an inventory's SyncTargets with one watch: how many
// are not shown SyncerConnected now, and the most since reset.
type fleetWatch struct {
	mu   sync.Mutex
	down map[string]bool
	most int
}

func watchFleet(ctx context.Context, inv dynamic.Interface) (*fleetWatch, error) {
	f := &fleetWatch{down: map[string]bool{}}
	inf := dynamicinformer.NewFilteredDynamicInformer(inv, stGVR, "", 0, cache.Indexers{}, nil).Informer()
	set := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			f.mu.Lock()
			f.down[u.GetName()] = !syncerConnected(u)
			f.most = max(f.most, f.countLocked())
			f.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				f.mu.Lock()
				delete(f.down, u.GetName())
				f.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("watching the SyncTargets: %w", ctx.Err())
	}
	return f, nil
}

func (f *fleetWatch) countLocked() int {
	n := 0
	for _, d := range f.down {
		if d {
			n++
		}
	}
	return n
}

// now is how many edges are shown disconnected now.
func (f *fleetWatch) now() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.countLocked()
}

// reset starts counting the most from now.
func (f *fleetWatch) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.most = f.countLocked()
}

// worst is the most edges shown disconnected at once since reset.
func (f *fleetWatch) worst() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.most
}

// disconnected counts the SyncTargets not shown SyncerConnected.
func disconnected(ctx context.Context, inv dynamic.Interface) (int, error) {
	list, err := inv.Resource(stGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	down := 0
	for i := range list.Items {
		if !syncerConnected(&list.Items[i]) {
			down++
		}
	}
	return down, nil
}

// dropMark is what the server and the syncers log when they drop a
// tunnel that went silent.
const dropMark = "tunnel silent too long"

// dumpOnDrop watches the server's log from now until ctx ends and, when a
// tunnel is dropped for silence, writes a dump of every goroutine of the
// server and of each simulator into a directory of its own, which the
// bench leaves (the data directory goes when the server stops): where
// both ends of the silent tunnels wait, in the seconds after the first
// drop. Each process's dump comes twice: every goroutine's stack
// (debug=2, which Go cuts at 64 MiB, about 75,000 goroutines of a
// simulator of 1,000 edges), and the count of goroutines on each stack
// (debug=1, goroutine-counts-*.log), which is never cut. It dumps at most
// twice, a few minutes apart, and ends with the simulators.
func (f *liveFleet) dumpOnDrop(ctx context.Context, progress func(string, ...any)) {
	offset := f.serverLogSize()
	var last time.Time
	dir := ""
	for dumps := 0; dumps < 2; {
		if sleep(ctx, time.Second) != nil || f.sim.alive() != nil {
			return
		}
		size := f.serverLogSize()
		n, _ := f.logSince(offset, []string{dropMark})
		offset = size
		if n == 0 || time.Since(last) < 3*time.Minute {
			continue
		}
		last = time.Now()
		dumps++
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "kubestellar-bench-dumps-"); err != nil {
				progress("%d tunnels dropped for silence; no directory for goroutine dumps: %v", n, err)
				return
			}
		}
		var where []string
		save := func(file string, get func() (*http.Response, error)) {
			resp, err := get()
			if err != nil {
				progress("a goroutine dump (%s): %v", file, err)
				return
			}
			defer resp.Body.Close()
			path := filepath.Join(dir, file)
			out, err := os.Create(path)
			if err != nil {
				progress("a goroutine dump (%s): %v", file, err)
				return
			}
			defer out.Close()
			if _, err := io.Copy(out, resp.Body); err == nil {
				where = append(where, filepath.Base(path))
			}
		}
		for _, debug := range []int{2, 1} {
			name := func(process string) string {
				if debug == 1 {
					return fmt.Sprintf("goroutine-counts-%d-%s.log", dumps, process)
				}
				return fmt.Sprintf("goroutines-%d-%s.log", dumps, process)
			}
			query := fmt.Sprintf("/debug/pprof/goroutine?debug=%d", debug)
			save(name("server"), func() (*http.Response, error) { return adminGet(ctx, f.s, query) })
			for i, sim := range f.sim {
				addr := sim.report().Pprof
				if addr == "" {
					continue
				}
				save(name(fmt.Sprintf("simulator-%d", i)), func() (*http.Response, error) {
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+query, nil)
					if err != nil {
						return nil, err
					}
					return http.DefaultClient.Do(req)
				})
			}
		}
		progress("%d tunnels dropped for silence: the goroutines of the server and the simulators dumped in %s (%s)", n, dir, strings.Join(where, ", "))
	}
}
