// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package browser

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// chromium returns the path of Debian's chromium, installing it first
// where the test runs as root (as `make test-deps` would); it skips the
// test, saying how to install it, only when it is missing and cannot be.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("apt-get"); err == nil {
			out, err := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "chromium").CombinedOutput()
			if err == nil {
				if p, err := exec.LookPath("chromium"); err == nil {
					return p
				}
			}
			t.Logf("installing chromium failed: %v\n%s", err, lastBytes(out, 2000))
		}
	}
	t.Skip("the dashboard test drives a real browser and needs Debian's chromium: run `make test-deps` as root, or `sudo apt-get install -y chromium`")
	return ""
}

func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// artifactsDir is where the test keeps its screenshots:
// $KUBESTELLAR_ARTIFACTS/dashboard when set, else _output/dashboard in the
// repository.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(harness.RepoRoot(), "_output", "dashboard")
	if env := os.Getenv("KUBESTELLAR_ARTIFACTS"); env != "" {
		dir = filepath.Join(env, "dashboard")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser starts a headless chromium with a fresh profile, at 1280x800.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		// The server's certificate is signed by its own CA, which this
		// fresh profile does not know.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)), "starting chromium")
	return ctx
}

// run runs browser actions, failing after timeout with what the page shows.
func run(t *testing.T, ctx context.Context, timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	_ = value(t, ctx, timeout, what, chromedp.Steps(actions...))
}

// value runs a browser action and returns its value, failing after timeout
// with what the page shows.
func value[T any](t *testing.T, ctx context.Context, timeout time.Duration, what string, action chromedp.Action[T]) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(tctx, action)
	if err != nil {
		url, _ := chromedp.Run(ctx, chromedp.Location())
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage %s shows:\n%s", what, err, url, text)
	}
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, 30*time.Second, "reading "+sel, chromedp.Text(chromedp.CSS(sel)))
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := value(t, ctx, 30*time.Second, "screenshot "+name, chromedp.FullScreenshot(100))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

// fetchStatus fetches path from the page, with its cookies, once the page
// has loaded, and returns the HTTP status. The page must be loaded: without
// a session, the API server closes each connection after one request, and
// the browser fails a request it queued on a connection that a request of
// the loading page opened (ERR_CONNECTION_CLOSED, "Failed to fetch").
func fetchStatus(t *testing.T, ctx context.Context, path string) int {
	t.Helper()
	run(t, ctx, 30*time.Second, "the page to load before fetching "+path,
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`, chromedp.WithPollingTimeout(30*time.Second)))
	return value(t, ctx, 30*time.Second, "fetching "+path, chromedp.Evaluate[int](
		fmt.Sprintf(`fetch(%q, {credentials: "same-origin"}).then(r => r.status)`, path), chromedp.EvalAwaitPromise))
}

// sessionConnections logs in through link with Go's HTTP/2 client, gets
// paths with the session it opened, and returns how many connections the
// client dialed for them. A browser sends a page's requests over one
// HTTP/2 connection: a server that closes it after each request (as the
// API server does for anonymous clients) fails the requests in flight on
// it, a script or the event stream of a page that then shows nothing.
func sessionConnections(t *testing.T, srv *harness.Process, link string, paths ...string) int {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig)
	require.NoError(t, err)
	tlsConfig, err := rest.TLSConfigFor(cfg)
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	transport := &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Jar: jar, Transport: transport, Timeout: 30 * time.Second}
	dials := 0
	get := func(url string) int {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
			if !c.Reused {
				dials++
			}
		}}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err, "GET %s", url)
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.Equal(t, "HTTP/2.0", resp.Proto, "GET %s", url)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(link), "logging in with the link")
	dials = 0
	for _, path := range paths {
		require.Equal(t, http.StatusOK, get(srv.BaseURL()+path), "GET %s with a session", path)
	}
	return dials
}

// TestDashboard: the dashboard in a real browser. Without a login link it
// shows only its login page and its data endpoints answer 401; the link
// `kubestellar dashboard` prints logs in; the fleet shows a SyncTarget,
// live, going connected when its syncer joins and disconnected when it
// stops; a misconfigured placement shows its reason; a placement's
// destination shows how many of its copies synced and which failed; a
// Deployment's workload view shows its pods at the edge, ready; a
// rollout is paused and resumed from its placement's row; logout ends
// the session. Screenshots go to _output/dashboard.
func TestDashboard(t *testing.T) {
	ctx := browser(t)
	dir := artifactsDir(t)
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")

	// No link, no data.
	run(t, ctx, time.Minute, "the login page without a session",
		chromedp.Navigate(srv.BaseURL()+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS("#login")))
	body := text(t, ctx, "body")
	require.Contains(t, body, "kubestellar dashboard")
	for _, path := range []string{"/dashboard/api/events?view=fleet", "/dashboard/api/whoami", "/dashboard/api/workload?space=wds1&resource=v1/configmaps&namespace=default&name=x"} {
		require.Equal(t, 401, fetchStatus(t, ctx, path), "%s without a session", path)
	}
	screenshot(t, ctx, dir, "01-login.png")

	// The link: a SyncTarget made before the syncer joins shows, never connected.
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "name=edge1")
	link := strings.TrimSpace(srv.CLIStdout(t, "dashboard", "--no-browser"))
	require.True(t, strings.HasPrefix(link, srv.BaseURL()+"/dashboard/login?code="), "the printed link: %q", link)
	edgeRow := `tr[data-edge="inv1/edge1"]`
	run(t, ctx, time.Minute, "logging in through the printed link",
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#fleet-table")),
		chromedp.WaitVisible(chromedp.CSS(edgeRow+`[data-state="new"]`)))
	require.Equal(t, "kubestellar-admin", text(t, ctx, "#user"))
	screenshot(t, ctx, dir, "02-fleet-new.png")

	// The link works once.
	ctx2 := browser(t)
	run(t, ctx2, time.Minute, "using the link a second time",
		chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#login-error")))
	require.Equal(t, 401, fetchStatus(t, ctx2, "/dashboard/api/events?view=fleet"))

	// A logged-in browser keeps its connection: the API server's closing of
	// anonymous clients' HTTP/2 connections after each request does not
	// apply to a dashboard session.
	require.Equal(t, 1, sessionConnections(t, srv, strings.TrimSpace(srv.CLIStdout(t, "dashboard", "--no-browser")),
		"/dashboard/", "/dashboard/static/style.css", "/dashboard/static/app.js", "/dashboard/api/whoami"),
		"connections dialed for four requests of one dashboard session")

	// A syncer joins: the row goes connected, without a reload.
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, "")
	run(t, ctx, 2*time.Minute, "the edge to show connected",
		chromedp.WaitVisible(chromedp.CSS(edgeRow+`[data-state="connected"]`)))
	require.Equal(t, "1/1", text(t, ctx, "#count-connected")+"/"+text(t, ctx, "#count-total"))
	screenshot(t, ctx, dir, "03-fleet-connected.png")

	// A workload placed on edge1: a Deployment, and a ConfigMap whose name
	// an object of the edge's own already has, which the syncer cannot
	// keep in step (a conflict); and a misconfigured placement.
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	ek.MustRun(t, "create", "namespace", "shop")
	ek.MustRun(t, "create", "configmap", "taken", "-n", "shop", "--from-literal=owner=edge-admin")
	k.MustRun(t, "--context", "inv1", "apply", "-f", writeManifest(t, "location.yaml", dashboardLocation))
	k.MustRun(t, "--context", "wds1", "apply", "-f", writeManifest(t, "shop.yaml", dashboardWorkload))
	k.MustRun(t, "--context", "wds1", "apply", "-f", writeManifest(t, "broken.yaml", brokenPlacement))
	poll(t, ek, "2", "the Deployment to be available at edge1",
		"get", "deployment", "web", "-n", "shop", "-o", "jsonpath={.status.availableReplicas}")
	poll(t, k, "True InvalidLocationSelector", "the placement to be Misconfigured", "--context", "wds1", "get", "edgeplacement", "broken",
		"-o", `jsonpath={.status.conditions[?(@.type=="Misconfigured")].status} {.status.conditions[?(@.type=="Misconfigured")].reason}`)
	run(t, ctx, time.Minute, "the misconfigured placement's reason",
		chromedp.Navigate(srv.BaseURL()+"/dashboard/#placements"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-placement="wds1/broken"]`)))
	run(t, ctx, time.Minute, "the placement's reason", chromedp.Poll[chromedp.Void](
		`(document.querySelector('tr[data-placement="wds1/broken"]') || {textContent: ""}).textContent.includes("InvalidLocationSelector")`,
		chromedp.WithPollingTimeout(time.Minute)))
	require.Contains(t, text(t, ctx, `tr[data-placement="wds1/broken"]`), "InvalidLocationSelector")

	// Per destination, its copies: all in the mailbox, the conflicting
	// one failed, the others synced.
	dest := `tr[data-placement="wds1/shop"] li[data-dest="inv1/edge1"]`
	run(t, ctx, 2*time.Minute, "edge1's copies of the shop placement, one failed",
		chromedp.WaitVisible(chromedp.CSS(dest+`[data-failed="1"]`)))
	copies := text(t, ctx, dest)
	require.Regexp(t, `: connected ([0-9]+)/([0-9]+) synced, 1 failed`, copies)
	m := regexp.MustCompile(`([0-9]+)/([0-9]+) synced`).FindStringSubmatch(copies)
	synced, _ := strconv.Atoi(m[1])
	expected, _ := strconv.Atoi(m[2])
	require.Equal(t, expected-1, synced, "every copy but the conflicting one synced: %s", copies)
	require.GreaterOrEqual(t, expected, 2, "the ConfigMap and the Deployment at least: %s", copies)
	require.Contains(t, copies, "configmaps/shop/taken: Conflict")
	require.Contains(t, text(t, ctx, `tr[data-placement="wds1/shop"]`), "all at once", "a placement with no rollout says so")
	screenshot(t, ctx, dir, "04-placements.png")

	// The Deployment's view: where it runs, its copy synced, its pods
	// running and ready at the edge, as the syncer reports them.
	run(t, ctx, time.Minute, "the workload view",
		chromedp.Navigate(srv.BaseURL()+"/dashboard/#workload"),
		chromedp.WaitVisible(chromedp.CSS("#workload-form")),
		chromedp.SetValue(chromedp.CSS("#wl-space"), "wds1"),
		chromedp.SetValue(chromedp.CSS("#wl-resource"), "apps/v1/deployments"),
		chromedp.SetValue(chromedp.CSS("#wl-namespace"), "shop"),
		chromedp.SetValue(chromedp.CSS("#wl-name"), "web"),
		chromedp.Click(chromedp.CSS(`#workload-form button[type="submit"]`)))
	// The view reads again every few seconds: the pods' report may come
	// after the first read.
	wlEdge := `#workload-edges tr[data-wl-edge="inv1/edge1"]`
	run(t, ctx, 2*time.Minute, "the Deployment's pods at edge1, ready",
		chromedp.WaitVisible(chromedp.CSS(wlEdge+`[data-copy="synced"][data-ready="2/2"]`)))
	row := text(t, ctx, wlEdge)
	require.Contains(t, row, "Running 2")
	require.Contains(t, row, "shop", "the placement that puts it there")
	screenshot(t, ctx, dir, "05-workload.png")

	// The syncer stops: the edge turns red, live.
	run(t, ctx, time.Minute, "back to the fleet",
		chromedp.Navigate(srv.BaseURL()+"/dashboard/#fleet"),
		chromedp.WaitVisible(chromedp.CSS(edgeRow+`[data-state="connected"]`)))
	syncer.Stop(t)
	run(t, ctx, 2*time.Minute, "the edge to show disconnected",
		chromedp.WaitVisible(chromedp.CSS(edgeRow+`[data-state="disconnected"]`)))
	screenshot(t, ctx, dir, "06-fleet-disconnected.png")

	// A Progressive placement's rollout, paused and resumed from its row
	// by a user who may patch it (the admin): with its edge disconnected,
	// the rollout waits, Progressing.
	k.MustRun(t, "--context", "wds1", "patch", "edgeplacement", "shop", "--type", "merge", "-p", `{"spec":{"rollout":{"strategy":"Progressive"}}}`)
	shopRollout := `tr[data-placement="wds1/shop"] td[data-rollout]`
	run(t, ctx, time.Minute, "the shop placement's rollout, with a pause button",
		chromedp.Navigate(srv.BaseURL()+"/dashboard/#placements"),
		chromedp.WaitVisible(chromedp.CSS(shopRollout+`[data-rollout="Progressing"] button[data-action="pause"]`)),
		chromedp.Click(chromedp.CSS(shopRollout+` button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(shopRollout+`[data-rollout="Paused"] button[data-action="resume"]`)))
	require.Equal(t, "true", k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath={.spec.rollout.paused}"))
	require.Contains(t, text(t, ctx, shopRollout), "paused by spec.rollout.paused")
	screenshot(t, ctx, dir, "07-rollout-paused.png")
	run(t, ctx, time.Minute, "resuming the rollout",
		chromedp.Click(chromedp.CSS(shopRollout+` button[data-action="resume"]`)),
		chromedp.WaitVisible(chromedp.CSS(shopRollout+`[data-rollout="Progressing"] button[data-action="pause"]`)))
	require.Equal(t, "false", k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath={.spec.rollout.paused}"))
	run(t, ctx, time.Minute, "back to the fleet", chromedp.Navigate(srv.BaseURL()+"/dashboard/#fleet"),
		chromedp.WaitVisible(chromedp.CSS(edgeRow+`[data-state="disconnected"]`)))

	// A phone's width: the page, loaded again, streams the fleet again.
	run(t, ctx, time.Minute, "a phone-width view",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(edgeRow+`[data-state="disconnected"]`)))
	screenshot(t, ctx, dir, "08-fleet-phone.png")
	run(t, ctx, 30*time.Second, "back to a desktop's width", chromedp.EmulateViewport(1280, 800))

	// Logout ends the session.
	run(t, ctx, time.Minute, "logging out",
		chromedp.Click(chromedp.CSS("#logout")),
		chromedp.WaitVisible(chromedp.CSS("#login")))
	require.Equal(t, 401, fetchStatus(t, ctx, "/dashboard/api/events?view=fleet"))
	run(t, ctx, time.Minute, "the dashboard after logout",
		chromedp.Navigate(srv.BaseURL()+"/dashboard/"), chromedp.WaitVisible(chromedp.CSS("#login")))
	t.Logf("screenshots in %s", dir)
}

// The dashboard test's inventory and workload: a Location for edge1, a
// Deployment and a ConfigMap placed there, and a placement whose location
// selector is invalid.
const (
	dashboardLocation = `apiVersion: edge.kubestellar.io/v2alpha1
kind: Location
metadata:
  name: edge1
  labels: {env: dash}
spec:
  resource: {group: edge.kubestellar.io, version: v2alpha1, resource: synctargets}
  instanceSelector:
    matchLabels: {name: edge1}
`
	dashboardWorkload = `apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: taken
  namespace: shop
data: {owner: kubestellar}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata:
  name: shop
spec:
  locationSelectors:
  - matchLabels: {env: dash}
  downsync:
  - apiGroup: ""
    resources: [namespaces]
    objectNames: [shop]
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [shop]
  - apiGroup: apps
    resources: [deployments]
    namespaces: [shop]
`
	brokenPlacement = `apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata:
  name: broken
spec:
  locationSelectors:
  - matchExpressions:
    - {key: env, operator: Bogus}
  downsync:
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [default]
`
)

// poll runs kubectl until its output is want, or fails after a minute
// with the last output (test/e2e's poll, for this test's two waits).
func poll(t *testing.T, k harness.Kubectl, want, what string, args ...string) {
	t.Helper()
	var last, lastErr string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, errOut, runErr := k.Run(ctx, args...)
		last, lastErr = out, errOut
		if runErr != nil && errOut == "" {
			lastErr = runErr.Error()
		}
		return runErr == nil && out == want, nil
	})
	require.NoError(t, err, "waiting for %s: kubectl %s\nlast output: %s\nlast error: %s", what, strings.Join(args, " "), last, lastErr)
}

// writeManifest writes a manifest into the test's temporary directory and
// returns its path.
func writeManifest(t *testing.T, name, manifest string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(manifest), 0o600))
	return path
}
