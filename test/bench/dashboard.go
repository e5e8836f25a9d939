// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The dashboard section's fixtures and constants.
const (
	dashInv = "bench-dashboard" // inventory space of the SyncTargets the fleet view shows

	// dashCPUWindow is how long the server's CPU time is counted at rest,
	// without dashboards and then with them.
	dashCPUWindow = 30 * time.Second
	// dashPageRows is how many rows the fleet view's first page has
	// (dashboard.DefaultPageSize).
	dashPageRows = 50
)

// dashboardOptions configures the dashboard section.
type dashboardOptions struct {
	targets  int // SyncTargets in one inventory space (0 skips the section)
	sessions int // dashboards open at rest, for the CPU figure
	renders  int // page loads timed in chromium
}

// dashboardBench measures, on a fresh server holding o.targets
// SyncTargets: the time from navigation to the fleet view's first page of
// rows in headless chromium (the page, its script, the event stream, the
// server's aggregation, the DOM), and the server's CPU at rest with
// o.sessions dashboards' event streams open against the same server with
// none, measured in this run.
func dashboardBench(ctx context.Context, bin string, o dashboardOptions, progress func(string, ...any)) (_ []row, err error) {
	progress = prefixed(progress, "dashboard: ")
	if o.sessions <= 0 || o.renders <= 0 {
		return nil, errors.New("-dashboard-sessions and -dashboard-renders must be positive")
	}
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

	progress("creating space %s and %d SyncTargets", dashInv, o.targets)
	if _, err := s.cli(ctx, bin, "space", "create", dashInv, "--type", "inventory", "--no-context"); err != nil {
		return nil, err
	}
	inv := dynamic.NewForConfigOrDie(s.config(dashInv)).Resource(stGVR)
	var made atomic.Int64
	if _, err := parallel(16, o.targets, func(i int) error {
		name := fmt.Sprintf("edge-%04d", i)
		if _, err := inv.Create(ctx, obj("SyncTarget", name, map[string]any{"name": name}, nil), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating SyncTarget %s: %w", name, err)
		}
		if k := made.Add(1); k%250 == 0 || k == int64(o.targets) {
			progress("%d of %d SyncTargets", k, o.targets)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// The dashboard's own view says when its store holds them all.
	first, err := openDashboard(ctx, s, bin, o.targets)
	if err != nil {
		return nil, fmt.Errorf("a dashboard session showing %d SyncTargets: %w", o.targets, err)
	}
	first.close()

	// Everything is measured on a server at rest: its mailbox controller
	// makes a mailbox space for each SyncTarget first.
	pid := s.cmd.Process.Pid
	progress("waiting for the server to settle (its mailbox controller makes %d mailboxes)", o.targets)
	if _, err := settle(ctx, pid, 5*time.Minute); err != nil {
		return nil, err
	}
	renderRow, err := firstRender(ctx, s, bin, o, progress)
	if err != nil {
		return nil, err
	}

	// The server's CPU at rest moves with its own background work: the
	// baseline is measured before the dashboards open and again after they
	// close, and the dashboards' window is compared with the mean of both.
	progress("%s at rest without dashboards", dashCPUWindow)
	settledBefore, err := settle(ctx, pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	cpuBefore, err := cpuOver(ctx, pid, dashCPUWindow)
	if err != nil {
		return nil, err
	}
	progress("opening %d dashboards (event streams of the fleet view), then %s at rest", o.sessions, dashCPUWindow)
	var open []*dashboardSession
	closeAll := func() {
		for _, d := range open {
			d.close()
		}
		open = nil
	}
	defer closeAll()
	for range o.sessions {
		d, err := openDashboard(ctx, s, bin, o.targets)
		if err != nil {
			return nil, err
		}
		open = append(open, d)
	}
	settledWith, err := settle(ctx, pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	cpuWith, err := cpuOver(ctx, pid, dashCPUWindow)
	if err != nil {
		return nil, err
	}
	for _, d := range open {
		if err := d.err(); err != nil {
			return nil, fmt.Errorf("a dashboard's event stream ended while measured: %w", err)
		}
	}
	closeAll()
	progress("dashboards closed, %s at rest without them again", dashCPUWindow)
	settledAfter, err := settle(ctx, pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	cpuAfter, err := cpuOver(ctx, pid, dashCPUWindow)
	if err != nil {
		return nil, err
	}

	unsettled := ""
	if !settledBefore || !settledWith || !settledAfter {
		unsettled = " (the server had not settled under 10 % of a core before each window)"
	}
	baseline := (cpuBefore + cpuAfter) / 2
	ratio := "n/a (no CPU without dashboards)"
	if baseline > 0 {
		ratio = fmt.Sprintf("%.2f× without", cpuWith.Seconds()/baseline.Seconds())
	}
	ms3 := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return []row{
		renderRow,
		{fmt.Sprintf("dashboard: server CPU at rest, %d SyncTargets, no dashboard", o.targets), percentOver(baseline, dashCPUWindow),
			fmt.Sprintf("mean of %s (before the dashboards) and %s (after) of CPU (utime+stime) in %s%s", ms3(cpuBefore), ms3(cpuAfter), dashCPUWindow, unsettled)},
		{fmt.Sprintf("dashboard: server CPU at rest, %d dashboards open", o.sessions), percentOver(cpuWith, dashCPUWindow) + ", " + ratio,
			fmt.Sprintf("%s of CPU in %s between those; each dashboard a session holding the fleet view's event stream; same server and run", ms3(cpuWith), dashCPUWindow)},
	}, nil
}

// firstRender loads the fleet view o.renders times in headless chromium,
// logged in through a link of `kubestellar dashboard`, and returns the row
// of the median time from navigation to the first page of rows (with the
// counts) in the DOM; a row saying it was not measured when chromium is
// not installed.
func firstRender(ctx context.Context, s *server, bin string, o dashboardOptions, progress func(string, ...any)) (row, error) {
	metric := fmt.Sprintf("dashboard: fleet view first render, %d SyncTargets (median)", o.targets)
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		return row{metric, "not measured", "chromium is not installed: `apt-get install chromium` (or `make test-deps`, as root)"}, nil
	}
	profile, err := os.MkdirTemp("", "kubestellar-bench-chromium-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(profile)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		// The server's certificate is signed by its own CA.
		chromedp.Flag("ignore-certificate-errors", true), chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 800))
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	link, err := s.cli(ctx, bin, "dashboard", "--no-browser")
	if err != nil {
		return row{}, err
	}
	rows := min(o.targets, dashPageRows)
	// performance.now() counts from the navigation's start. The poll
	// starts once the page has loaded and then runs on every change of the
	// DOM: where the rows came before the load event, it sees them at its
	// start, so the figure is an upper bound.
	rendered := chromedp.Poll[float64](fmt.Sprintf(`document.querySelectorAll("#fleet-table tbody tr[data-edge]").length === %d && `+
		`document.getElementById("count-total").textContent === "%d" ? performance.now() : false`, rows, o.targets),
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(2*time.Minute))
	tctx, tcancel := context.WithTimeout(bctx, 3*time.Minute)
	defer tcancel()
	// The link's page moves on to the dashboard by itself.
	if _, err := chromedp.Run(tctx, chromedp.Steps(chromedp.EmulateViewport(1280, 800), chromedp.Navigate(strings.TrimSpace(link)),
		chromedp.WaitVisible(chromedp.CSS("#fleet-table")))); err != nil {
		return row{}, fmt.Errorf("chromium: logging in: %w", err)
	}
	if _, err := chromedp.Run(tctx, rendered); err != nil {
		return row{}, fmt.Errorf("chromium: the fleet view after logging in: %w", err)
	}
	// Each sample reloads the page: a whole load (page, script, style,
	// event stream) in the same tab. The poll may start while the new
	// document's script context is being set up (chromium answers "Cannot
	// find context"): it is tried again, which only makes the figure later.
	var took []time.Duration
	for i := range o.renders {
		if _, err := chromedp.Run(tctx, chromedp.Reload()); err != nil {
			return row{}, fmt.Errorf("chromium: reloading the fleet view: %w", err)
		}
		var at float64
		var err error
		for range 3 {
			if at, err = chromedp.Run(tctx, rendered); err == nil {
				break
			}
		}
		if err != nil {
			return row{}, fmt.Errorf("chromium: load %d: the fleet view's rows: %w", i+1, err)
		}
		took = append(took, time.Duration(at*float64(time.Millisecond)))
	}
	progress("fleet view rendered in %v", took)
	version, _ := exec.CommandContext(ctx, path, "--version").Output()
	return row{metric, ms(percentile(took, 50)), fmt.Sprintf("from navigation to %d rows and the counts in the DOM (at most); %d loads, max %s; headless %s, 1280×800",
		rows, len(took), ms(percentile(took, 100)), strings.TrimSpace(string(version)))}, nil
}

// dashboardSession is one logged-in dashboard holding the fleet view's
// event stream open, reading (and dropping) what it sends.
type dashboardSession struct {
	cancel context.CancelFunc
	done   chan struct{}
	failed atomic.Value // error
}

func (d *dashboardSession) close() {
	d.cancel()
	<-d.done
}

// err is why the stream ended early, if it did.
func (d *dashboardSession) err() error {
	select {
	case <-d.done:
		if e, ok := d.failed.Load().(error); ok {
			return e
		}
		return errors.New("the stream ended")
	default:
		return nil
	}
}

// openDashboard logs in with a link of `kubestellar dashboard` and opens
// the fleet view's event stream, returning once it shows total SyncTargets.
func openDashboard(ctx context.Context, s *server, bin string, total int) (*dashboardSession, error) {
	link, err := s.cli(ctx, bin, "dashboard", "--no-browser")
	if err != nil {
		return nil, err
	}
	tlsConfig, err := rest.TLSConfigFor(s.config(""))
	if err != nil {
		return nil, err
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
	resp, err := client.Get(strings.TrimSpace(link))
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("logging in with the link: %s", resp.Status)
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/dashboard/api/events?view=fleet", s.port), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err = client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("the event stream: %s", resp.Status)
	}
	d := &dashboardSession{cancel: cancel, done: make(chan struct{})}
	full := make(chan struct{})
	go func() {
		defer close(d.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		seen := false
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || seen {
				continue
			}
			var u struct {
				Fleet *struct {
					Counts struct {
						Total int `json:"total"`
					} `json:"counts"`
				} `json:"fleet"`
			}
			if json.Unmarshal([]byte(data), &u) == nil && u.Fleet != nil && u.Fleet.Counts.Total == total {
				seen = true
				close(full)
			}
		}
		if err := sc.Err(); err != nil {
			d.failed.Store(err)
		}
	}()
	select {
	case <-full:
		return d, nil
	case <-d.done:
		return nil, fmt.Errorf("the event stream ended before it showed %d SyncTargets: %v", total, d.err())
	case <-time.After(5 * time.Minute):
		d.close()
		return nil, fmt.Errorf("the event stream did not show %d SyncTargets within 5 min", total)
	case <-ctx.Done():
		d.close()
		return nil, ctx.Err()
	}
}

// cpuOver counts the CPU time a process uses over window.
func cpuOver(ctx context.Context, pid int, window time.Duration) (time.Duration, error) {
	before, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	if err := sleep(ctx, window); err != nil {
		return 0, err
	}
	after, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	return after - before, nil
}

func percentOver(cpu, window time.Duration) string {
	return fmt.Sprintf("%.2f %% of a core", 100*cpu.Seconds()/window.Seconds())
}
