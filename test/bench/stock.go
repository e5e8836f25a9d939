// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// The stock section compares our server with the stock kube-apiserver
// (built by test/edgecluster from k8s.io/kubernetes, with a real
// deployment's flags and its watch cache on), side by side in one run, on
// the same kind of datastore: a standalone kine over SQLite, then etcd.
// Between the two, ours runs as `kubestellar server start` does by
// default, on the SQLite database in its data directory through the kine
// it embeds, against the stock server on a standalone kine/SQLite again:
// what a user of ours gets against what kube-apiserver gets on the same
// database engine (k3s's default). Each server gets a fresh datastore of
// its own, the same client code and the same objects, a warm-up, and then
// the measurements, taken alternately (ours, stock, then stock, ours) so
// that a change in the machine's load falls on both. Our server is
// measured inside a space, as a tenant uses it; each server's client is
// its administrator (system:masters, which RBAC and API Priority and
// Fairness let through on both).
//
// The goals are the issue's: ours ÷ stock creates/s ≥ 1.2 with 32
// clients, and LIST latency ours ÷ stock ≤ 1.0. Both sit at the machine's
// noise: with -repeat N the whole comparison runs N times and they are
// judged on the median of the runs' ratios (repeat.go).

const (
	stockSpace        = "bench"
	stockCreatesGoal  = 1.2 // ours ÷ stock, creates/s with 32 clients, at least
	stockListGoal     = 1.0 // ours ÷ stock, LIST p50, at most
	stockRounds       = 3   // throughput runs per server, alternately; the best counts
	stockLists        = 50  // LISTs per server, alternately
	stockWarmupCreate = 200 // warm-up creates (32 clients) per server, at most
)

// stockDatastore is one fresh datastore for one server.
type stockDatastore struct {
	// ours are the `kubestellar server start` flags that use it.
	ours []string
	// stock holds kube-apiserver's storage flags (EtcdServers and TLS).
	stock edgecluster.APIServerOptions
	stop  func()
	// pid is its process, 0 when it has none of its own.
	pid int
}

// stockBackend is a kind of datastore both servers are measured on.
type stockBackend struct {
	name string
	// note says how it runs, for the first row.
	note  string
	start func(ctx context.Context, progress func(string, ...any)) (*stockDatastore, error)
	// embedded runs our server on its default datastore, the SQLite
	// database in its data directory, instead of one start makes.
	embedded bool
}

// stockFigures are one server's numbers on one backend.
type stockFigures struct {
	creates1, creates32 float64         // ConfigMap creates/s, best run
	watch               []time.Duration // create → ADDED on a watch of the same server
	list                []time.Duration // LIST of the listed namespace
	// createCPU and listCPU are the CPU time (utime + stime) of the
	// server's processes, by group ("server", "datastore"), over all its
	// 32-client create runs and over all its LISTs; created counts those
	// creates. Empty when not measured.
	createCPU, listCPU map[string]time.Duration
	created            int
}

// stockBench measures our server and the stock kube-apiserver on kine over
// SQLite and on etcd, repeat times on each (fresh servers and datastores
// each time, so that the runs are as independent as the machine allows).
func stockBench(ctx context.Context, bin string, n, repeat int, progress func(string, ...any)) ([]row, error) {
	bins, err := edgecluster.EnsureBinaries(ctx, prefixed(progress, "edgecluster: "))
	if err != nil {
		return nil, err
	}
	kine, err := edgecluster.EnsureKine(ctx, prefixed(progress, "edgecluster: "))
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, b := range stockBackends(kine, bins) {
		var runs [][2]stockFigures
		for run := range repeat {
			if repeat > 1 {
				progress("stock: %s: run %d of %d", b.name, run+1, repeat)
			}
			f, err := stockCompare(ctx, bin, bins, b, n, progress)
			if err != nil {
				return rows, fmt.Errorf("%s: %w", b.name, err)
			}
			runs = append(runs, f)
		}
		rows = append(rows, stockRows(b, n, runs...)...)
	}
	return rows, nil
}

// stockBackends are the datastores: a standalone kine over SQLite, which
// our server reaches as kube-apiserver does, through its etcd API (kine's
// etcd passthrough); ours on its embedded default against the stock server
// on that standalone kine; and etcd, reached directly by both.
func stockBackends(kine *edgecluster.KineBuild, bins *edgecluster.Binaries) []stockBackend {
	standalone := fmt.Sprintf("standalone kine %s (cgo, go-sqlite3 %s: the kine ours embeds) on a unix socket, our SQLite settings (%s, incremental auto-vacuum)",
		kine.Kine, kine.SQLite, sqliteDurability())
	startKine := func(ctx context.Context, progress func(string, ...any)) (*stockDatastore, error) {
		dir, err := os.MkdirTemp("", "kubestellar-bench-kine-")
		if err != nil {
			return nil, err
		}
		k, err := startStockKine(ctx, kine, dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		return &stockDatastore{
			ours:  []string{"--datastore-endpoint", k.Endpoint},
			stock: edgecluster.APIServerOptions{EtcdServers: []string{k.Endpoint}},
			pid:   k.PID(),
			stop: func() {
				if err := k.Stop(); err != nil {
					progress("stock: kine: %v", err)
				}
				os.RemoveAll(dir)
			},
		}, nil
	}
	return []stockBackend{
		{name: "kine/SQLite", note: standalone + ", a fresh one per server", start: startKine},
		{
			name:  "embedded SQLite",
			note:  "ours on its default datastore (`server start` without --datastore-endpoint: the kine it embeds, in process, on SQLite in its data directory); the stock server on a fresh " + standalone,
			start: startKine, embedded: true,
		},
		{
			name: "etcd",
			note: fmt.Sprintf("etcd %s, one member, TLS with client certificates, no fsync, a fresh one per server; ours through kine's etcd passthrough", bins.Versions.Etcd),
			start: func(ctx context.Context, progress func(string, ...any)) (*stockDatastore, error) {
				e, err := harness.NewEtcd(ctx, func(format string, args ...any) { progress(format, args...) })
				if err != nil {
					return nil, err
				}
				return &stockDatastore{
					ours: e.ServerArgs(),
					stock: edgecluster.APIServerOptions{EtcdServers: []string{e.Endpoint},
						EtcdCAFile: e.CAFile, EtcdCertFile: e.CertFile, EtcdKeyFile: e.KeyFile},
					stop: e.Stop,
					pid:  e.PID(),
				}, nil
			},
		},
	}
}

// sqliteDurability names the durability settings in storage.SQLiteParams
// ("journal_mode=WAL, synchronous=NORMAL").
func sqliteDurability() string {
	params, err := url.ParseQuery(storage.SQLiteParams)
	if err != nil {
		return storage.SQLiteParams
	}
	return fmt.Sprintf("journal_mode=%s, synchronous=%s", params.Get("_journal_mode"), params.Get("_synchronous"))
}

// startStockKine starts kine on a new SQLite database in dir, set up as our
// server sets up its own: the same connection parameters
// (storage.SQLiteParams, in storage.DefaultEndpoint), the file made in
// incremental auto-vacuum, and kine's settings as server/storage.Start
// gives them to the kine it runs in process.
func startStockKine(ctx context.Context, kine *edgecluster.KineBuild, dir string) (*edgecluster.Kine, error) {
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o700); err != nil {
		return nil, err
	}
	if err := prepareSQLite(ctx, filepath.Join(dir, "db", "state.db")); err != nil {
		return nil, err
	}
	return edgecluster.StartKine(ctx, edgecluster.KineOptions{Binary: kine, Dir: dir, Endpoint: storage.DefaultEndpoint(dir), Args: stockKineArgs()})
}

// stockKineArgs are the kine command's flags for the endpoint.Config that
// server/storage.Start gives kine: its defaults, written out, but for
// idle connections, which the command closes after 2 minutes and kine in
// process keeps. Compaction is left to the API servers, which both ask
// kine for every 5 minutes (the first after this section's end).
func stockKineArgs() []string {
	return []string{
		"--watch-progress-notify-interval=5s",
		"--emulated-etcd-version=3.6.11",
		"--compact-interval=0s",
		"--compact-timeout=5s",
		fmt.Sprintf("--compact-min-retain=%d", storage.DefaultCompactMinRetain),
		"--compact-batch-size=1000",
		"--poll-batch-size=500",
		"--datastore-connection-max-idle-time=0s",
	}
}

// prepareSQLite makes a new database incremental auto-vacuum, in WAL mode,
// as server/storage does before its kine opens a new one. It uses the
// SQLite driver that kine's, linked in through server/storage, registers.
func prepareSQLite(ctx context.Context, path string) error {
	drivers := sql.Drivers()
	driver := "sqlite3" // mattn's, with cgo
	if !slices.Contains(drivers, driver) {
		driver = "sqlite" // modernc's, without
	}
	if !slices.Contains(drivers, driver) {
		return errors.New("no SQLite driver is linked into the bench")
	}
	db, err := sql.Open(driver, path)
	if err != nil {
		return err
	}
	defer db.Close()
	// One connection: a new database takes auto_vacuum from the connection
	// that writes its header (here, with journal_mode).
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		return fmt.Errorf("preparing %s: %w", path, err)
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("preparing %s: %w", path, err)
	}
	return nil
}

// stockCompare starts our server and kube-apiserver, each on a fresh
// datastore of kind b, and measures both.
func stockCompare(ctx context.Context, bin string, bins *edgecluster.Binaries, b stockBackend, n int, progress func(string, ...any)) ([2]stockFigures, error) {
	var none [2]stockFigures
	progress("stock: %s: our server on a fresh datastore, in space %s", b.name, stockSpace)
	var oursArgs []string
	var oursDSPID int
	if !b.embedded {
		oursDS, err := b.start(ctx, progress)
		if err != nil {
			return none, err
		}
		defer oursDS.stop()
		oursArgs, oursDSPID = oursDS.ours, oursDS.pid
	}
	s, err := start(ctx, bin, "", oursArgs...)
	if err != nil {
		return none, err
	}
	defer os.RemoveAll(s.dataDir)
	defer s.stop()
	kubeconfig := filepath.Join(s.dataDir, "admin.kubeconfig")
	if out, err := exec.CommandContext(ctx, bin, "space", "create", stockSpace, "--kubeconfig", kubeconfig, "--no-context").CombinedOutput(); err != nil {
		return none, fmt.Errorf("kubestellar space create %s: %w: %s", stockSpace, err, out)
	}

	progress("stock: %s: kube-apiserver %s on another fresh datastore", b.name, bins.Versions.Kubernetes)
	stockDS, err := b.start(ctx, progress)
	if err != nil {
		return none, err
	}
	defer stockDS.stop()
	opts := stockDS.stock
	opts.Options = edgecluster.Options{Name: "stock", Binaries: bins, Logf: progress}
	c, err := edgecluster.StartAPIServer(ctx, opts)
	if err != nil {
		return none, err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			progress("stock: %v", err)
		}
	}()
	stockCfg := rest.CopyConfig(c.Config)
	stockCfg.QPS, stockCfg.Burst = 5000, 10000

	clients := [2]kubernetes.Interface{kubernetes.NewForConfigOrDie(s.config(stockSpace)), kubernetes.NewForConfigOrDie(stockCfg)}
	stockPID, ok := c.PIDs()["kube-apiserver"]
	if !ok {
		return none, errors.New("no kube-apiserver process in the stock server's cluster")
	}
	procs := [2]procGroups{{"server": {"kubestellar": s.cmd.Process.Pid}}, {"server": {"kube-apiserver": stockPID}}}
	if oursDSPID != 0 {
		procs[0]["datastore"] = map[string]int{"datastore": oursDSPID}
	}
	if stockDS.pid != 0 {
		procs[1]["datastore"] = map[string]int{"datastore": stockDS.pid}
	}
	cpu := [2]func() (map[string]time.Duration, error){procs[0].cpu, procs[1].cpu}
	f, err := sideBySide(ctx, clients, cpu, n, prefixed(progress, "stock: "+b.name+": "))
	if err != nil {
		// Both logs go with their directories: keep their ends.
		return none, fmt.Errorf("%w\n--- end of our server's log ---\n%s\n--- end of kube-apiserver's log ---\n%s", err,
			tailFile(filepath.Join(s.dataDir, "server.log"), 2000), tailFile(c.LogFiles()["kube-apiserver"], 2000))
	}
	return f, nil
}

// sideBySide warms both servers up, then measures them alternately:
// creates/s with 1 and 32 clients (best of stockRounds runs each),
// create-to-watch latency, and LIST latency of n ConfigMaps in one
// namespace. clients[0] is ours, clients[1] the stock server; cpu reads
// the CPU time so far of each server's processes, by group (nil: not
// measured).
func sideBySide(ctx context.Context, clients [2]kubernetes.Interface, cpu [2]func() (map[string]time.Duration, error), n int, progress func(string, ...any)) ([2]stockFigures, error) {
	var f [2]stockFigures
	names := [2]string{"ours", "stock"}
	// order alternates who goes first, round by round.
	order := func(round int) []int {
		if round%2 == 1 {
			return []int{1, 0}
		}
		return []int{0, 1}
	}
	createIn := func(i int, ns string, workers, count int) (time.Duration, error) {
		return parallel(workers, count, func(k int) error {
			_, err := clients[i].CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("cm-%d", k)), metav1.CreateOptions{})
			return err
		})
	}
	newNamespace := func(i int, ns string) error {
		_, err := clients[i].CoreV1().Namespaces().Create(ctx, namespace(ns), metav1.CreateOptions{})
		return err
	}
	// spent adds what server i's processes spend on fn to *total, by
	// group.
	spent := func(i int, total *map[string]time.Duration, fn func() error) error {
		if cpu[i] == nil {
			return fn()
		}
		before, err := cpu[i]()
		if err != nil {
			return err
		}
		if err := fn(); err != nil {
			return err
		}
		after, err := cpu[i]()
		if err != nil {
			return err
		}
		if *total == nil {
			*total = map[string]time.Duration{}
		}
		for group := range after {
			(*total)[group] += after[group] - before[group]
		}
		return nil
	}
	listAll := func(i int, ns string, want int) (time.Duration, error) {
		began := time.Now()
		list, err := clients[i].CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		if got := benchConfigMaps(list.Items); got != want {
			return 0, fmt.Errorf("listed %d ConfigMaps in %s, want %d", got, ns, want)
		}
		return time.Since(began), nil
	}

	warm := min(n, stockWarmupCreate)
	samples := min(max(n/4, 10), 250)
	progress("warming both servers up: %d creates (32 clients), 10 watch samples and 10 LISTs each", warm)
	for i := range clients {
		if err := newNamespace(i, "warm-up"); err != nil {
			return f, fmt.Errorf("%s: %w", names[i], err)
		}
		if _, err := createIn(i, "warm-up", 32, warm); err != nil {
			return f, fmt.Errorf("%s: warm-up: %w", names[i], err)
		}
		if _, err := createToWatch(ctx, clients[i], clients[i], "warm-up-watch", 10, false); err != nil {
			return f, fmt.Errorf("%s: warm-up: %w", names[i], err)
		}
		for range 10 {
			if _, err := listAll(i, "warm-up", warm); err != nil {
				return f, fmt.Errorf("%s: warm-up: %w", names[i], err)
			}
		}
	}

	for _, run := range []struct {
		workers, count int
		best           func(i int) *float64
	}{
		{1, max(n/4, 1), func(i int) *float64 { return &f[i].creates1 }},
		{32, n, func(i int) *float64 { return &f[i].creates32 }},
	} {
		for round := range stockRounds {
			progress("creates with %d client(s), round %d of %d: %d ConfigMaps on each server", run.workers, round+1, stockRounds, run.count)
			for _, i := range order(round) {
				ns := fmt.Sprintf("creates-%d-%d", run.workers, round)
				if err := newNamespace(i, ns); err != nil {
					return f, fmt.Errorf("%s: %w", names[i], err)
				}
				var took time.Duration
				create := func() (err error) {
					took, err = createIn(i, ns, run.workers, run.count)
					return err
				}
				var err error
				if run.workers == 32 {
					err = spent(i, &f[i].createCPU, create)
					f[i].created += run.count
				} else {
					err = create()
				}
				if err != nil {
					return f, fmt.Errorf("%s: creates with %d client(s): %w", names[i], run.workers, err)
				}
				best := run.best(i)
				*best = max(*best, float64(run.count)/took.Seconds())
			}
		}
	}

	progress("create → watch latency: %d sequential creates on each server", samples)
	for _, i := range order(0) {
		lat, err := createToWatch(ctx, clients[i], clients[i], "watch", samples, false)
		if err != nil {
			return f, fmt.Errorf("%s: create → watch: %w", names[i], err)
		}
		f[i].watch = lat
	}

	progress("LIST latency: %d ConfigMaps in one namespace, %d LISTs on each server, alternately", n, stockLists)
	for i := range clients {
		if err := newNamespace(i, "list"); err != nil {
			return f, fmt.Errorf("%s: %w", names[i], err)
		}
		if _, err := createIn(i, "list", 32, n); err != nil {
			return f, fmt.Errorf("%s: filling the listed namespace: %w", names[i], err)
		}
	}
	for k := range stockLists {
		for _, i := range order(k) {
			var took time.Duration
			err := spent(i, &f[i].listCPU, func() (err error) {
				took, err = listAll(i, "list", n)
				return err
			})
			if err != nil {
				return f, fmt.Errorf("%s: LIST: %w", names[i], err)
			}
			f[i].list = append(f[i].list, took)
		}
	}
	return f, nil
}

// stockRows are a backend's rows, over one or more runs: each figure of
// ours and of the stock server, with ours ÷ stock, and the goals where the
// issue sets one. Over several runs each side's figure is its median and
// the ratio the median of the runs' ratios, with their min and max; the
// goals are judged on that median.
func stockRows(b stockBackend, n int, runs ...[2]stockFigures) []row {
	first := runs[0]
	// each is a figure of ours and of the stock server in every run.
	each := func(fig func(stockFigures) float64) [][2]float64 {
		out := make([][2]float64, len(runs))
		for i, r := range runs {
			out[i] = [2]float64{fig(r[0]), fig(r[1])}
		}
		return out
	}
	rate := func(fig func(stockFigures) float64) (string, spread) {
		return oursStock(each(fig), func(v float64) string { return fmt.Sprintf("%.0f", v) })
	}
	lat := func(fig func(stockFigures) []time.Duration, p int) (string, spread) {
		return oursStock(each(func(f stockFigures) float64 { return float64(percentile(fig(f), p)) }), asDuration(ms))
	}
	creates1, _ := rate(func(f stockFigures) float64 { return f.creates1 })
	creates32, createsRatio := rate(func(f stockFigures) float64 { return f.creates32 })
	watch50, _ := lat(func(f stockFigures) []time.Duration { return f.watch }, 50)
	watch99, _ := lat(func(f stockFigures) []time.Duration { return f.watch }, 99)
	list50, listRatio := lat(func(f stockFigures) []time.Duration { return f.list }, 50)
	list99, _ := lat(func(f stockFigures) []time.Duration { return f.list }, 99)
	repeated := ""
	if len(runs) > 1 {
		repeated = fmt.Sprintf("; %d runs, each on fresh servers and datastores: each side's median, and the median of the runs' ratios with their min–max", len(runs))
	}
	prefix := b.name + ": "
	return []row{
		{prefix + "ConfigMap creates/s, 1 client, ours / stock", creates1,
			fmt.Sprintf("%s; best of %d runs of %d creates each, alternately; ours in space %s; each server's admin (system:masters)%s", b.note, stockRounds, max(n/4, 1), stockSpace, repeated)},
		{prefix + "ConfigMap creates/s, 32 clients, ours / stock", creates32,
			goalNote(createsRatio.median, stockCreatesGoal, true) + createsRatio.judged() + fmt.Sprintf("; best of %d runs of %d creates each", stockRounds, n)},
		{prefix + "create → watch p50, ours / stock", watch50,
			fmt.Sprintf("%d sequential creates each, watch on the same server (both through their watch caches)", len(first[0].watch))},
		{prefix + "create → watch p99, ours / stock", watch99, ""},
		{prefix + fmt.Sprintf("LIST of %d ConfigMaps in one namespace p50, ours / stock", n), list50,
			goalNote(listRatio.median, stockListGoal, false) + listRatio.judged() + fmt.Sprintf("; %d LISTs each, alternately, consistent (no resourceVersion): both serve them from their watch caches (ours: one per resource, keyed by space)", len(first[0].list))},
		{prefix + fmt.Sprintf("LIST of %d ConfigMaps in one namespace p99, ours / stock", n), list99, ""},
		{prefix + "server CPU per create (32 clients), ours / stock", cpuRatio(runs, func(f stockFigures) (time.Duration, int) { return f.createCPU["server"], f.created }),
			"utime+stime of each server's process over its 32-client runs ÷ its creates" + datastoreNote(b)},
		{prefix + "datastore CPU per create (32 clients), ours / stock", datastoreCPU(b, runs),
			"the same, of each server's own datastore process"},
		{prefix + "server CPU per LIST, ours / stock", cpuRatio(runs, func(f stockFigures) (time.Duration, int) { return f.listCPU["server"], len(f.list) }),
			"over its LISTs ÷ LISTs: what the server spends, the client's decoding apart"},
	}
}

// oursStock writes a figure of ours and of the stock server over the runs
// as "ours / stock (ours ÷ stock)": each side's median, and the median of
// the runs' ratios, with their min and max over several runs.
func oursStock(runs [][2]float64, show func(float64) string) (string, spread) {
	var ours, stock, ratios []float64
	for _, r := range runs {
		ours, stock, ratios = append(ours, r[0]), append(stock, r[1]), append(ratios, r[0]/r[1])
	}
	ratio := spreadOf(ratios)
	value := fmt.Sprintf("%s / %s (%s", show(spreadOf(ours).median), show(spreadOf(stock).median), times(ratio.median))
	if ratio.runs > 1 {
		value += ", " + ratio.over(times)
	}
	return value + ")", ratio
}

// datastoreCPU writes the datastore processes' CPU per create; ours has
// none on the embedded row.
func datastoreCPU(b stockBackend, runs [][2]stockFigures) string {
	if b.embedded {
		var stock []time.Duration
		for _, r := range runs {
			if r[1].created > 0 && r[1].createCPU["datastore"] > 0 {
				stock = append(stock, r[1].createCPU["datastore"]/time.Duration(r[1].created))
			}
		}
		if len(stock) == 0 {
			return "not measured"
		}
		return "in ours' process / " + durationSpread(stock).show(asDuration(msCPU))
	}
	return cpuRatio(runs, func(f stockFigures) (time.Duration, int) { return f.createCPU["datastore"], f.created })
}

// cpuRatio writes two servers' CPU per operation and their ratio, over
// the runs that measured both; fig is a server's CPU and operations in
// one run.
func cpuRatio(runs [][2]stockFigures, fig func(stockFigures) (time.Duration, int)) string {
	var measured [][2]float64
	for _, r := range runs {
		ours, oursN := fig(r[0])
		stock, stockN := fig(r[1])
		if oursN == 0 || stockN == 0 || ours <= 0 || stock <= 0 {
			continue
		}
		measured = append(measured, [2]float64{float64(ours / time.Duration(oursN)), float64(stock / time.Duration(stockN))})
	}
	if len(measured) == 0 {
		return "not measured"
	}
	value, _ := oursStock(measured, asDuration(msCPU))
	return value
}

// datastoreNote says what a server's process holds beside the server.
func datastoreNote(b stockBackend) string {
	if b.embedded {
		return "; ours holds its datastore (kine and SQLite in its process), the stock server's kine is a process of its own (next row)"
	}
	return "; the datastore's process apart (next row)"
}

// times writes a ratio.
func times(r float64) string { return fmt.Sprintf("%.2f×", r) }

// goalNote says whether ratio (ours ÷ stock) meets the goal: at least goal,
// or at most.
func goalNote(ratio, goal float64, atLeast bool) string {
	sign, met := "≤", ratio <= goal
	if atLeast {
		sign, met = "≥", ratio >= goal
	}
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	return fmt.Sprintf("goal ours ÷ stock %s %.1f×: %s", sign, goal, verdict)
}
