// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// tenantOptions size the tenants section: fair shares between spaces
// (API Priority and Fairness) and what RBAC costs a writer.
type tenantOptions struct {
	// samples is the quiet client's creates, alone and then beside the
	// noisy space's writers (0 skips the section).
	samples int
	// noisyWriters write in another space meanwhile.
	noisyWriters int
	// throughputN is the creates of the RBAC-versus-admin comparison.
	throughputN int
}

// tenantsBench measures, with two spaces and a user in each (bound to
// edit in its space's default namespace, nothing more):
//   - the noisy neighbour: one client creating ConfigMaps one after
//     another in the quiet space, alone, and while the noisy space's user
//     runs noisyWriters concurrent writers from another process; the
//     ratio of the medians. The two are taken in alternate rounds, the
//     writers paused (their requests all answered) for the rounds alone,
//     so that both see the same server: the same datastore and caches,
//     grown by the noisy space's writes, on the same machine at the same
//     time. Twice: the writers' process on the same cores as everything
//     else, and again at the lowest CPU priority (nice 19), which stands
//     for writers on another machine: what is left is what the server
//     itself lets the noisy space take from the quiet one;
//   - an authorization decision, with 1,000 spaces of RBAC (a Go
//     benchmark of the authorizer);
//   - the cost of RBAC: ConfigMap creates/s by 32 clients as that user
//     and as the admin (system:masters, whom RBAC and APF let through
//     unchecked), alternately, on a server whose APF seats outnumber the
//     clients, so that the ratio is what RBAC costs; and the same on the
//     default seats, where a lone tenant's share is its priority level's.
func tenantsBench(ctx context.Context, bin string, o tenantOptions, progress func(string, ...any)) ([]row, error) {
	s, err := start(ctx, bin, "", unlimitedSpaces...)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(s.dataDir)
	defer s.stop()
	progress("tenants: two spaces, a user with edit in each")
	quiet, err := tenantClient(ctx, bin, s, "quiet")
	if err != nil {
		return nil, err
	}
	noisy, err := tenantClient(ctx, bin, s, "noisy")
	if err != nil {
		return nil, err
	}

	var rows []row
	for _, nice := range []bool{false, true} {
		where := "on the same cores"
		if nice {
			where = "at nice 19 (as from another machine)"
		}
		progress("tenants: %d creates by one client in the quiet space, alone and beside %d writers in the noisy space %s, in %d alternate rounds",
			2*o.samples, o.noisyWriters, where, noisyRounds)
		alone, loaded, noisyRate, err := noisyNeighbour(ctx, s, quiet.client, noisy.token, o, nice)
		if err != nil {
			return nil, err
		}
		a50, l50 := percentile(alone, 50), percentile(loaded, 50)
		rows = append(rows,
			row{"quiet space: create latency alone (writers " + where + " paused), p50 / p99", ms(a50) + " / " + ms(percentile(alone, 99)),
				fmt.Sprintf("%d creates by one client, a user with edit", len(alone))},
			row{fmt.Sprintf("quiet space: create latency beside %d writers %s, p50 / p99", o.noisyWriters, where), ms(l50) + " / " + ms(percentile(loaded, 99)),
				fmt.Sprintf("the noisy space meanwhile: %.0f creates/s", noisyRate)},
			row{"noisy neighbour, writers " + where + ": quiet p50 beside ÷ alone", fmt.Sprintf("%.2f", float64(l50)/float64(a50)),
				"goal ≤ 2 (API Priority and Fairness, a flow per user per space)"})
	}

	progress("tenants: authorization decisions, 1,000 spaces of RBAC (go test -bench BenchmarkAuthorizeDecision ./server/rbac)")
	p50, p99, err := authorizeDecision(ctx)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"authorization decision p50 / p99", p50 + " / " + p99, "20,000 decisions, allowed and denied, 1,000 spaces with their own RBAC (Go benchmark)"})

	if o.throughputN > 0 {
		progress("tenants: %d creates by 32 clients, as a user and as the admin, twice each, on the default seats", o.throughputN)
		asUser, asAdmin, err := userVersusAdmin(ctx, s, quiet.client, o.throughputN)
		if err != nil {
			return nil, err
		}
		wide, err := start(ctx, bin, "", append([]string{"--max-requests-inflight", "64", "--max-mutating-requests-inflight", "32"}, unlimitedSpaces...)...)
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(wide.dataDir)
		defer wide.stop()
		progress("tenants: the same on a server with 96 seats, more than the clients")
		wideUser, err := tenantClient(ctx, bin, wide, "quiet")
		if err != nil {
			return nil, err
		}
		wideAsUser, wideAsAdmin, err := userVersusAdmin(ctx, wide, wideUser.client, o.throughputN)
		if err != nil {
			return nil, err
		}
		rows = append(rows,
			row{"ConfigMap creates/s, 32 clients, user / admin, 96 seats", fmt.Sprintf("%.0f / %.0f", wideAsUser, wideAsAdmin), fmt.Sprintf("best of 2 runs of %d creates each; APF does not bind", o.throughputN)},
			row{"RBAC on ÷ admin, write throughput", fmt.Sprintf("%.2f", wideAsUser/wideAsAdmin), "goal ≥ 0.9"},
			row{"ConfigMap creates/s, 32 clients, user / admin, default seats", fmt.Sprintf("%.0f / %.0f (%.2f)", asUser, asAdmin, asUser/asAdmin),
				"a lone tenant gets its priority level's seats, the admin is exempt"},
		)
	}
	return rows, nil
}

// unlimitedSpaces are the server flags that lift the tenant spaces'
// limits: the tenants section measures fair shares and RBAC with more
// creates in one space than its default limits allow (the flood section
// measures those).
var unlimitedSpaces = []string{"--space-object-limit", "0", "--space-byte-limit", "0", "--space-watch-limit", "0",
	"--space-synctarget-limit", "0", "--space-mailbox-object-limit", "0", "--space-mailbox-byte-limit", "0"}

// userVersusAdmin returns the ConfigMap creates/s of 32 clients acting as
// user and as the admin in the user's space, best of two alternate runs.
func userVersusAdmin(ctx context.Context, s *server, user kubernetes.Interface, n int) (asUser, asAdmin float64, err error) {
	admin := kubernetes.NewForConfigOrDie(s.config("quiet"))
	for round := range 2 {
		for _, who := range []struct {
			name   string
			client kubernetes.Interface
			best   *float64
		}{{"user", user, &asUser}, {"admin", admin, &asAdmin}} {
			prefix := fmt.Sprintf("tp-%s-%d", who.name, round)
			took, err := parallel(32, n, func(i int) error {
				_, err := who.client.CoreV1().ConfigMaps("default").Create(ctx, configMap(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{})
				return err
			})
			if err != nil {
				return 0, 0, fmt.Errorf("creates as the %s: %w", who.name, err)
			}
			*who.best = max(*who.best, float64(n)/took.Seconds())
		}
	}
	return asUser, asAdmin, nil
}

// tenant is a user in a space: its token, and a client acting as it there.
type tenant struct {
	token  string
	client kubernetes.Interface
}

// tenantClient makes a space, a user token and a RoleBinding of edit in
// the space's default namespace, with the CLI and the admin's client.
func tenantClient(ctx context.Context, bin string, s *server, space string) (*tenant, error) {
	kubeconfig := filepath.Join(s.dataDir, "admin.kubeconfig")
	if out, err := exec.CommandContext(ctx, bin, "space", "create", space, "--kubeconfig", kubeconfig, "--no-context").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kubestellar space create %s: %w: %s", space, err, out)
	}
	token, err := exec.CommandContext(ctx, bin, "token", "create", "--user", space+"-user", "--kubeconfig", kubeconfig).Output()
	if err != nil {
		return nil, fmt.Errorf("kubestellar token create --user %s-user: %w", space, err)
	}
	admin := kubernetes.NewForConfigOrDie(s.config(space))
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: space + "-user-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: space + "-user"}},
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("binding %s-user to edit: %w", space, err)
	}
	t := &tenant{token: strings.TrimSpace(string(token))}
	t.client = kubernetes.NewForConfigOrDie(userConfig(s.config(space), t.token))
	if err := untilListable(ctx, t.client, 30*time.Second, space+"-user", space); err != nil {
		return nil, err
	}
	return t, nil
}

// untilListable waits until client may list ConfigMaps in the default
// namespace: RBAC reaches the authorizer through a cache, and a space's
// owner is bound as the space is set up.
func untilListable(ctx context.Context, client kubernetes.Interface, within time.Duration, who, space string) error {
	deadline := time.Now().Add(within)
	for {
		_, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still cannot list ConfigMaps in %s: %w", who, space, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noisyRounds is how many times the quiet client's creates alternate
// between alone and beside the noisy space's writers.
const noisyRounds = 6

// noisyNeighbour starts the noisy tenant's writers and takes the quiet
// client's creates in alternate rounds: alone, the writers paused, then
// beside them. It returns both sets of latencies and the writers' rate
// while they wrote.
func noisyNeighbour(ctx context.Context, s *server, quiet kubernetes.Interface, noisyToken string, o tenantOptions, nice bool) (alone, loaded []time.Duration, rate float64, err error) {
	noise, err := startNoise(ctx, s, "noisy", noisyToken, o.noisyWriters, nice)
	if err != nil {
		return nil, nil, 0, err
	}
	defer func() {
		r, stopErr := noise.stop()
		if err == nil && stopErr != nil {
			err = fmt.Errorf("the noisy space's writers: %w", stopErr)
		}
		rate = r
	}()
	per := max(1, o.samples/noisyRounds)
	for round := range noisyRounds {
		if err := noise.command("pause"); err != nil {
			return nil, nil, 0, err
		}
		a, err := sequentialCreates(ctx, quiet, fmt.Sprintf("alone-%t-%d", nice, round), per)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("the quiet space's creates alone: %w", err)
		}
		if err := noise.command("resume"); err != nil {
			return nil, nil, 0, err
		}
		l, err := sequentialCreates(ctx, quiet, fmt.Sprintf("loaded-%t-%d", nice, round), per)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("the quiet space's creates beside the noisy one: %w", err)
		}
		alone, loaded = append(alone, a...), append(loaded, l...)
	}
	return alone, loaded, 0, nil
}

// sequentialCreates creates n ConfigMaps one after another and returns
// each one's latency.
func sequentialCreates(ctx context.Context, client kubernetes.Interface, prefix string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := range n {
		began := time.Now()
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, configMap(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(began))
	}
	return out, nil
}

// userConfig is admin's configuration with a user's token instead.
func userConfig(admin *rest.Config, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

// The noisy tenant runs in a process of its own, with its own connection,
// as another tenant's client would: in the bench's process its writers
// would compete with the quiet client for the Go scheduler and share its
// HTTP/2 connection, which no two tenants do.
const (
	noiseTokenEnv = "KUBESTELLAR_BENCH_NOISE_TOKEN"
	noiseReady    = "noise: writing"
	noisePaused   = "noise: paused"
)

type noiseOptions struct {
	kubeconfig, space string
	writers           int
}

type noiseProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	// stderr is shown only when the process fails (client-go logs each
	// request that stop cuts short).
	stderr *bytes.Buffer
}

// startNoise starts the bench again as the noisy tenant and returns once
// its writers are writing.
func startNoise(ctx context.Context, s *server, space, token string, writers int, nice bool) (*noiseProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{self, "-noise-kubeconfig", filepath.Join(s.dataDir, "admin.kubeconfig"), "-noise-space", space, "-noise-writers", strconv.Itoa(writers)}
	if nice {
		args = append([]string{"nice", "-n", "19"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), noiseTokenEnv+"="+token)
	p := &noiseProcess{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.stdin, p.stdout = stdin, bufio.NewReader(stdout)
	line, err := p.stdout.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != noiseReady {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the noisy tenant's process did not start writing (%q): %v\n%s", line, err, p.stderr)
	}
	return p, nil
}

// command tells the noisy tenant to pause (it answers once every request
// of its writers has been answered) or to resume (once they write again).
func (p *noiseProcess) command(c string) error {
	if _, err := fmt.Fprintln(p.stdin, c); err != nil {
		return fmt.Errorf("telling the noisy tenant's process to %s: %w\n%s", c, err, p.stderr)
	}
	line, err := p.stdout.ReadString('\n')
	if want := noiseAnswer[c]; err != nil || strings.TrimSpace(line) != want {
		return fmt.Errorf("the noisy tenant's process answered %s with %q, not %q: %v\n%s", c, line, want, err, p.stderr)
	}
	return nil
}

var noiseAnswer = map[string]string{"pause": noisePaused, "resume": noiseReady}

// stop ends the noisy tenant and returns its creates per second while it
// was writing.
func (p *noiseProcess) stop() (float64, error) {
	_ = p.stdin.Close()
	line, _ := p.stdout.ReadString('\n')
	if err := p.cmd.Wait(); err != nil {
		return 0, fmt.Errorf("the noisy tenant's process: %w\n%s", err, p.stderr)
	}
	var rate float64
	if _, err := fmt.Sscanf(line, "noise: %f creates/s", &rate); err != nil {
		return 0, fmt.Errorf("the noisy tenant's process said %q: %w", line, err)
	}
	return rate, nil
}

// runNoise is the noisy tenant's process: writers create ConfigMaps in the
// space's default namespace, as fast as they are let, until stdin closes.
// A line "pause" on stdin stops them (it is answered once none has a
// request in flight), "resume" starts them again; the rate it prints at
// the end counts the time they were writing.
func runNoise(ctx context.Context, o noiseOptions) error {
	admin, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	admin.Host += spaces.URLPath(o.space)
	client := kubernetes.NewForConfigOrDie(userConfig(admin, os.Getenv(noiseTokenEnv)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := newGate()
	var done atomic.Int64
	errs := make(chan error, o.writers)
	var wg sync.WaitGroup
	for w := range o.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; g.enter(ctx); i++ {
				_, err := client.CoreV1().ConfigMaps("default").Create(ctx, configMap(fmt.Sprintf("noise-%d-%d-%d", os.Getpid(), w, i)), metav1.CreateOptions{})
				g.leave()
				if err != nil && ctx.Err() == nil {
					errs <- err
					cancel()
					return
				}
				done.Add(1)
			}
		}()
	}
	// Say so once every writer has had a few requests served.
	for done.Load() < int64(4*o.writers) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println(noiseReady)
	var writing time.Duration
	var n int64
	from, began := done.Load(), time.Now()
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() && ctx.Err() == nil {
		switch lines.Text() {
		case "pause":
			g.pause(ctx)
			n, writing = n+done.Load()-from, writing+time.Since(began)
			fmt.Println(noisePaused)
		case "resume":
			from, began = done.Load(), time.Now()
			g.resume()
			fmt.Println(noiseReady)
		}
	}
	if !g.paused() {
		n, writing = n+done.Load()-from, writing+time.Since(began)
	}
	cancel()
	g.resume()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	fmt.Printf("noise: %.1f creates/s\n", float64(n)/writing.Seconds())
	return nil
}

// gate lets the noisy writers in, one request each at a time, unless
// paused; pause waits until none is inside.
type gate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	stopped  bool
	inFlight int
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// enter waits while the gate is paused; false once ctx is done.
func (g *gate) enter(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.stopped && ctx.Err() == nil {
		g.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	g.inFlight++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
	g.cond.Broadcast()
}

// pause closes the gate and returns once no request is in flight.
func (g *gate) pause(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	for g.inFlight > 0 && ctx.Err() == nil {
		g.cond.Wait()
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	g.stopped = false
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *gate) paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped
}

// authorizeDecision runs the authorizer's Go benchmark (in server/rbac,
// in the main module at the repository's root) and returns its p50 and p99.
func authorizeDecision(ctx context.Context) (p50, p99 string, err error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkAuthorizeDecision$", "-benchtime", "20000x", "./server/rbac")
	cmd.Dir = harness.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("go test -bench BenchmarkAuthorizeDecision ./server/rbac in %s: %w\n%s", cmd.Dir, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "BenchmarkAuthorizeDecision") {
			continue
		}
		for i := 1; i+1 < len(f); i++ {
			ns, perr := strconv.ParseFloat(f[i], 64)
			if perr != nil {
				continue
			}
			switch f[i+1] {
			case "p50-ns":
				p50 = fmt.Sprintf("%.1f µs", ns/1000)
			case "p99-ns":
				p99 = fmt.Sprintf("%.1f µs", ns/1000)
			}
		}
	}
	if p50 == "" || p99 == "" {
		return "", "", fmt.Errorf("no p50-ns and p99-ns in the benchmark's output:\n%s", out)
	}
	return p50, p99, nil
}
