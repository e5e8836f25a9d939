// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/mailbox"
	"github.com/kubestellar/kubestellar/internal/certs"
	ksserver "github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/tunnel"
)

// The tunnel section's fixtures and constants.
const (
	tunnelInv = "bench-tunnels" // inventory space of the simulated syncers

	// restWindow is how long the server's CPU time is counted at rest.
	restWindow = 10 * time.Second
	// userHZ is the unit of the CPU times in /proc/PID/stat: 1/100 s on
	// every Linux architecture.
	userHZ = 100
	// restartTarget is the target for tunnels after a restart.
	restartTarget = "target: every tunnel back within 5 s"
)

// tunnelOptions configures the tunnel section.
type tunnelOptions struct {
	tunnels  int // simulated syncers, each holding a tunnel (0 skips)
	requests int // GETs sent to one edge cluster directly, and again through the center (0 skips)
	workers  int // concurrent GETs
	// konnectivity sends the GETs through konnectivity too.
	konnectivity bool
}

// tunnelsBench measures, on a fresh server, n simulated syncers holding
// their reverse tunnels: how long until all are open, the server's memory
// and CPU at rest with them against without them, and how long after a
// restart of the server they are all back.
func tunnelsBench(ctx context.Context, bin string, n int, progress func(string, ...any)) (_ []row, err error) {
	progress = prefixed(progress, "tunnels: ")
	if err := raiseFileLimit(n + 1024); err != nil {
		return nil, err
	}
	s, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(s.dataDir)
	current := s // the restart replaces it
	defer func() { current.stop() }()
	clientLog := filepath.Join(s.dataDir, "tunnel-clients.log")
	defer func() {
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w\n--- end of the server's log ---\n%s\n--- end of the tunnel clients' log ---\n%s", err,
				tailFile(filepath.Join(s.dataDir, "server.log"), 3000), tailFile(clientLog, 2000))
		}
	}()

	progress("creating space %s, %d SyncTargets and a token for each", tunnelInv, n)
	if _, err := s.cli(ctx, bin, "space", "create", tunnelInv, "--type", "inventory", "--no-context"); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(ksserver.PKIDir(s.dataDir), certs.CACertFile))
	if err != nil {
		return nil, err
	}
	bearers, err := makeSyncTargets(ctx, s, n, caPEM, progress)
	if err != nil {
		return nil, err
	}
	progress("waiting for the %d mailbox spaces, then for the server to settle", n)
	if err := waitMailboxes(ctx, s, n, progress); err != nil {
		return nil, err
	}
	pid := s.cmd.Process.Pid
	settledBefore, err := settle(ctx, pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	progress("%s at rest without tunnels", restWindow)
	rssBefore, cpuBefore, err := atRest(ctx, pid)
	if err != nil {
		return nil, err
	}

	// The clients' own loggers: remotedialer's logrus warnings and errors
	// go to a file (they say why a tunnel fails), tunnel.Client's klog
	// lines nowhere (a zero klog.Logger discards): 1000 clients would drown
	// the progress lines.
	logFile, err := os.Create(clientLog)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	logrus.SetOutput(logFile)
	defer logrus.SetOutput(os.Stderr)
	defer logrus.SetLevel(logrus.GetLevel())
	logrus.SetLevel(logrus.WarnLevel)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the server's CA certificate is not PEM")
	}
	baseURL := s.url()
	progress("opening %d tunnels", n)
	began := time.Now()
	syncers := startSimulatedSyncers(klog.NewContext(ctx, klog.Logger{}), baseURL,
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, bearers)
	defer syncers.stop()
	allOpen, err := syncers.waitOpen(ctx, began, 3*time.Minute, progress)
	if err != nil {
		return nil, err
	}
	openTook := allOpen.Sub(began)
	if err := probeEdges(ctx, s, n); err != nil {
		return nil, err
	}
	progress("waiting for SyncerConnected on the %d SyncTargets", n)
	conditionsAt, err := waitSyncersConnected(ctx, s, tunnelInv, n, progress)
	if err != nil {
		return nil, err
	}
	settledAfter, err := settle(ctx, pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	progress("%s at rest with %d tunnels", restWindow, n)
	rssAfter, cpuAfter, err := atRest(ctx, pid)
	if err != nil {
		return nil, err
	}
	if open := syncers.open.Load(); open != int64(n) {
		return nil, fmt.Errorf("%d of %d tunnels open at the end of the rest", open, n)
	}

	progress("restarting the server with %d tunnels open", n)
	// Keep the first run's log: the restart starts a new one.
	if err := os.Rename(filepath.Join(s.dataDir, "server.log"), filepath.Join(s.dataDir, "server.before-restart.log")); err != nil {
		return nil, err
	}
	sigterm := time.Now()
	if err := s.terminate(time.Minute); err != nil {
		return nil, err
	}
	stopTook := time.Since(sigterm)
	restarted := time.Now()
	s2, err := startOn(ctx, bin, s.dataDir, s.port, time.Minute)
	if err != nil {
		return nil, err
	}
	current = s2
	ready := restarted.Add(s2.ready)
	backAt, err := syncers.waitOpen(ctx, sigterm, 2*time.Minute, progress)
	if err != nil {
		return nil, err
	}
	if err := probeEdges(ctx, s2, n); err != nil {
		return nil, fmt.Errorf("after the restart: %w", err)
	}

	cpuNote := func(cpu time.Duration) string {
		return fmt.Sprintf("%s of CPU (utime+stime) in %s", cpu.Round(time.Millisecond), restWindow)
	}
	return []row{
		{fmt.Sprintf("tunnels: all %d open, from the first dial", n), ms(openTook),
			fmt.Sprintf("%d simulated syncers (tunnel.Client in the bench, one token each) against one server", n)},
		{fmt.Sprintf("tunnels: all %d SyncTargets SyncerConnected", n), long(conditionsAt.Sub(began)), "from the first dial; the server writes the conditions"},
		{fmt.Sprintf("server RSS at rest, %d SyncTargets, no tunnel", n), mib(rssBefore), restNote(settledBefore) + "; mailbox spaces ready"},
		{fmt.Sprintf("server RSS at rest, %d tunnels open", n), mib(rssAfter), restNote(settledAfter)},
		{"server RSS per tunnel", fmt.Sprintf("%.1f KiB", float64(rssAfter-rssBefore)/float64(n)/1024), "(RSS with − without) / tunnels"},
		{fmt.Sprintf("server CPU at rest, %d SyncTargets, no tunnel", n), percentOfCore(cpuBefore), cpuNote(cpuBefore)},
		{fmt.Sprintf("server CPU at rest, %d tunnels open", n), percentOfCore(cpuAfter), cpuNote(cpuAfter) + "; remotedialer pings each tunnel every 5 s"},
		{fmt.Sprintf("restart with %d tunnels: SIGTERM → ready", n), long(ready.Sub(sigterm)), fmt.Sprintf("exit %s, start to ready %s", long(stopTook), long(s2.ready))},
		{fmt.Sprintf("restart with %d tunnels: ready → all tunnels open", n), long(backAt.Sub(ready)),
			restartTarget + "; clients retry after 250 ms doubling to 1.5 s, +0–50 % jitter (tunnel.Client) (negative if all were back before /readyz said ok)"},
		{fmt.Sprintf("restart with %d tunnels: SIGTERM → all tunnels open", n), long(backAt.Sub(sigterm)), restartTarget},
	}, nil
}

// raiseFileLimit lifts the soft limit on open files to the hard one and
// fails if that is under need: each tunnel is a socket in the bench and
// one in the server. The call itself matters too: after an explicit
// Setrlimit, child processes (the servers) inherit the raised limit, where
// Go would otherwise give them back the limit it started with.
func raiseFileLimit(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("reading the open files limit: %w", err)
	}
	if lim.Max < uint64(need) {
		// Root may raise the hard limit (up to fs.nr_open); others keep it.
		raised := syscall.Rlimit{Cur: uint64(need), Max: uint64(need)}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the open files limit to %d: %w", lim.Max, err)
	}
	if lim.Cur < uint64(need) {
		return fmt.Errorf("open files are limited to %d, the tunnels need about %d: raise the hard limit (ulimit -Hn)", lim.Cur, need)
	}
	return nil
}

// makeSyncTargets creates SyncTargets edge-0000... in tunnelInv and a token
// for each, and returns the tokens' bearer strings.
func makeSyncTargets(ctx context.Context, s *server, n int, caPEM []byte, progress func(string, ...any)) ([]string, error) {
	inv := dynamic.NewForConfigOrDie(s.config(tunnelInv)).Resource(stGVR)
	root := kubernetes.NewForConfigOrDie(s.config(spaces.Root))
	bearers := make([]string, n)
	var done atomic.Int64
	_, err := parallel(16, n, func(i int) error {
		name := simulatedName(i)
		created, err := inv.Create(ctx, obj("SyncTarget", name, map[string]any{"name": name}, nil), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating SyncTarget %s: %w", name, err)
		}
		tok, _, err := auth.CreateToken(ctx, root, auth.NewTokenOptions{InventorySpace: tunnelInv, SyncTarget: name, SyncTargetUID: created.GetUID(),
			Description: "kubestellar bench", CAPEM: caPEM})
		if err != nil {
			return err
		}
		bearers[i] = tok.Bearer()
		if k := done.Add(1); k%100 == 0 || k == int64(n) {
			progress("%d of %d SyncTargets and tokens", k, n)
		}
		return nil
	})
	return bearers, err
}

func simulatedName(i int) string { return fmt.Sprintf("edge-%04d", i) }

// waitMailboxes waits until the n mailbox spaces of tunnelInv are ready.
func waitMailboxes(ctx context.Context, s *server, n int, progress func(string, ...any)) error {
	spacesClient := dynamic.NewForConfigOrDie(s.config(spaces.Root)).Resource(tenancyv1alpha1.SpacesGVR)
	return pollProgress(ctx, 10*time.Minute, fmt.Sprintf("%d ready mailbox spaces", n), progress, func(ctx context.Context) (int, error) {
		list, err := spacesClient.List(ctx, metav1.ListOptions{LabelSelector: mailbox.LabelSyncTargetSpace + "=" + tunnelInv})
		if err != nil {
			return 0, nil
		}
		ready := 0
		for _, item := range list.Items {
			if phase, _, _ := unstructured.NestedString(item.Object, "status", "phase"); phase == string(tenancyv1alpha1.SpacePhaseReady) {
				ready++
			}
		}
		return ready, nil
	}, n)
}

// pollProgress polls count every 100 ms until it reaches want, printing
// progress every 10 s and failing after timeout.
func pollProgress(ctx context.Context, timeout time.Duration, what string, progress func(string, ...any), count func(context.Context) (int, error), want int) error {
	deadline, lastReport := time.Now().Add(timeout), time.Now()
	for {
		got, err := count(ctx)
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %d after %s", what, got, timeout)
		}
		if time.Since(lastReport) > 10*time.Second {
			progress("%d of %s", got, what)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probeEdges checks, through the center's edge proxy with the admin's
// credentials, that the first, a middle and the last simulated syncer each
// answer for their own SyncTarget.
func probeEdges(ctx context.Context, s *server, n int) error {
	cfg := s.config(spaces.Root)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	for _, i := range []int{0, n / 2, n - 1} {
		name := simulatedName(i)
		url := cfg.Host + tunnel.EdgesPrefix + tunnelInv + "/" + name + "/proxy/bench"
		// A tunnel may be open at the client a moment before the server
		// has registered it: retry briefly.
		var body string
		var lastErr error
		if err := waitFor(ctx, func() bool {
			body, lastErr = get(ctx, client, url)
			return lastErr == nil
		}); err != nil {
			return fmt.Errorf("GET %s through the edge proxy: %w (last: %v)", url, err, lastErr)
		}
		if body != name {
			return fmt.Errorf("GET %s through the edge proxy answered %q, not the simulated syncer %s", url, body, name)
		}
	}
	return nil
}

// simulatedSyncers are tunnel.Clients running in the bench process, one
// per SyncTarget, each with its own token: what many syncers' tunnels cost
// the server, without as many syncer processes. Each serves its "edge"
// with its SyncTarget's name.
type simulatedSyncers struct {
	open   atomic.Int64 // tunnels open now
	each   []simulatedSyncer
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type simulatedSyncer struct {
	open     atomic.Bool
	openedAt atomic.Int64 // UnixNano of its last opening
}

func startSimulatedSyncers(ctx context.Context, serverURL string, tlsConfig *tls.Config, bearers []string) *simulatedSyncers {
	ctx, cancel := context.WithCancel(ctx)
	ss := &simulatedSyncers{each: make([]simulatedSyncer, len(bearers)), cancel: cancel}
	for i, bearer := range bearers {
		one := &ss.each[i]
		name := simulatedName(i)
		c := &tunnel.Client{Servers: []string{serverURL}, BearerToken: bearer, TLS: tlsConfig,
			Edge: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) }),
			OnChange: func(open bool) {
				if open {
					one.openedAt.Store(time.Now().UnixNano())
					ss.open.Add(1)
				} else {
					ss.open.Add(-1)
				}
				one.open.Store(open)
			}}
		ss.wg.Add(1)
		go func() { defer ss.wg.Done(); c.Run(ctx) }()
	}
	return ss
}

// openSince counts the tunnels open that opened at or after since, and
// returns when the last of them opened.
func (ss *simulatedSyncers) openSince(since time.Time) (int, time.Time) {
	n, last := 0, int64(0)
	for i := range ss.each {
		at := ss.each[i].openedAt.Load()
		if ss.each[i].open.Load() && at >= since.UnixNano() {
			n++
			last = max(last, at)
		}
	}
	return n, time.Unix(0, last)
}

// waitOpen waits until every tunnel is open, having opened at or after
// since, and returns when the last one opened.
func (ss *simulatedSyncers) waitOpen(ctx context.Context, since time.Time, timeout time.Duration, progress func(string, ...any)) (time.Time, error) {
	deadline, lastReport := time.Now().Add(timeout), time.Now()
	for {
		n, last := ss.openSince(since)
		if n == len(ss.each) {
			return last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d tunnels open after %s (%d open in all)", n, len(ss.each), timeout, ss.open.Load())
		}
		if time.Since(lastReport) > 5*time.Second {
			progress("%d of %d tunnels open", n, len(ss.each))
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop closes every tunnel and waits (at most 30 s) for the clients.
func (ss *simulatedSyncers) stop() {
	ss.cancel()
	done := make(chan struct{})
	go func() { ss.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "bench: tunnels: %d simulated syncers still running 30 s after they were stopped\n", ss.open.Load())
	}
}

// terminate sends SIGTERM, as systemd would, and waits for the server to
// exit, killing it after limit.
func (s *server) terminate(limit time.Duration) error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(limit):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("the server did not exit within %s of SIGTERM: killed", limit)
	}
}

// settle waits until a process has used under 10 % of a core over 2 s, at
// most limit, and tells whether it did.
func settle(ctx context.Context, pid int, limit time.Duration) (bool, error) {
	const window = 2 * time.Second
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		before, err := procCPU(pid)
		if err != nil {
			return false, err
		}
		if err := sleep(ctx, window); err != nil {
			return false, err
		}
		after, err := procCPU(pid)
		if err != nil {
			return false, err
		}
		if after-before < window/10 {
			return true, nil
		}
	}
	return false, nil
}

// restNote says how a figure of atRest was measured: settled tells
// whether settle saw the server idle first.
func restNote(settled bool) string {
	note := fmt.Sprintf("%s at rest", restWindow)
	if !settled {
		note += " (the server had not settled under 10 % of a core after 2 min)"
	}
	return note
}

// atRest measures a process over restWindow: its CPU time, and its RSS at
// the end.
func atRest(ctx context.Context, pid int) (rss int64, cpu time.Duration, err error) {
	before, err := procCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	if err := sleep(ctx, restWindow); err != nil {
		return 0, 0, err
	}
	after, err := procCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	mem, err := procMemory(pid)
	if err != nil {
		return 0, 0, err
	}
	return mem["VmRSS"], after - before, nil
}

// long shows durations from 10 s in seconds, shorter ones in ms.
func long(d time.Duration) string {
	if d >= 10*time.Second || d <= -10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return ms(d)
}

func percentOfCore(cpu time.Duration) string {
	return fmt.Sprintf("%.1f %% of a core", 100*cpu.Seconds()/restWindow.Seconds())
}

// procCPU reads the user and system CPU time a process has used.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count the fields
	// after it, from field 3 (state). utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var ticks int64
	for _, field := range f[11:13] {
		t, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += t
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
