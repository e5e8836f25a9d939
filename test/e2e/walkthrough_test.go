// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// The walkthrough the test runs: docs/getting-started/README.md, or the
// copy $WALKTHROUGH_DOC names (to see the test fail on a broken command
// without touching the doc).
const (
	walkthroughDoc    = "docs/getting-started/README.md"
	walkthroughDocEnv = "WALKTHROUGH_DOC"
)

// The walkthrough's shape. A block or command added or dropped fails the
// test until these are updated, so that nothing new goes unrun and nothing
// is silently run less.
const (
	walkthroughBlocks   = 12 // ```sh blocks
	walkthroughCommands = 33 // commands run, in the blocks not skipped
)

// walkthroughSkipped are the commands of the blocks after a
// <!-- walkthrough: skip (why) --> line, which the test does not run.
var walkthroughSkipped = []string{
	"kubestellar syncer join --server https://center:6443 --token-file /etc/kubestellar/edge1.token --sync-target edge1",
}

// walkthroughSkip marks, on the line before a block, a block the test does
// not run, with the reason in the doc's source for its readers to see.
var walkthroughSkip = regexp.MustCompile(`^<!-- walkthrough: skip \((.+)\) -->$`)

// walkthroughChanges is everything the test runs differently from a
// reader, and why. An entry with old replaces old by new in every command
// (and must be used at least once, so that none goes stale); the others
// describe the environment the test gives the commands.
var walkthroughChanges = []struct{ old, new, why string }{
	{why: "HOME is a directory of the test's: ~/.kubestellar, ~/.kube and kubectl's cache are the test's own, not the machine's"},
	{why: "the commands run in a directory of the test's where docs/ links to the checkout's, so the files they write (mailbox.kubeconfig, edge1.kubeconfig) do not land in the checkout"},
	{why: "app.yaml, which stands for the reader's manifests, is a ConfigMap, a Deployment and a Service the test writes there"},
	{why: "PATH starts with the binary under test (KUBESTELLAR_BIN), then kubectl's; DISPLAY and KUBECONFIG are unset, as on a fresh console without a desktop"},
	{why: "~/.kube/edge1.config is the kubeconfig of a real edge cluster (test/edgecluster) started for the test"},
	{
		old: "make run",
		new: `kubestellar server start --data-dir ~/.kubestellar --bind-address 127.0.0.1 --port "$WALKTHROUGH_PORT"`,
		why: "make run builds (the test has the binary) and runs `kubestellar server start` on port 6443 of every interface, with root's data dir /var/lib/kubestellar when run as root: the test's server takes a free loopback port and keeps its data in the test's ~/.kubestellar, where the doc's KUBECONFIG finds it",
	},
	{old: "https://center:6443", new: `"$JOIN_SERVER"`, why: "the center's placeholder address: the test uses the --server that `synctarget create` printed, as a reader copies it"},
	{old: "K10...::abcdef.0123456789abcdef", new: `"$JOIN_TOKEN"`, why: "the placeholder token: the test uses the --token that `synctarget create` printed"},
	{
		old: "--kubeconfig ~/.kube/edge1.config",
		new: "--kubeconfig ~/.kube/edge1.config --data-dir ~/kubestellar-syncer/edge1",
		why: "as root the syncer's data dir defaults to /var/lib/kubestellar-syncer/edge1, the machine's: the test gives one in its HOME",
	},
	{old: "logs -f", new: "logs", why: "-f follows until the reader presses Ctrl-C; the test reads the log once"},
	{old: "exec -it", new: "exec -i", why: "the test has no terminal: the shell's input is lines the test writes (the step's stdin), the last of them exit"},
}

// walkthroughStep is what the test does about one command of the doc,
// named by its text without its trailing comment: it runs in the
// background, waits, feeds stdin, checks what the reader sees.
type walkthroughStep struct {
	command string
	// retry runs the command again until it succeeds and want accepts its
	// output (within walkthroughDeadline): what it shows depends on a
	// controller or the edge, and a reader would look again.
	retry bool
	// check is a bash condition, in the command's shell after it ran, that
	// must hold too (a variable it set is not empty).
	check string
	stdin string
	// want checks the command's stdout.
	want func(out string) error
	// background runs it as a service, stopped when the test ends; ready
	// says when it is up (its output so far), and fails when it never is.
	background bool
	ready      func(w *walkthrough, log string) (bool, error)
	// then runs after the command succeeded, with its stdout.
	then func(w *walkthrough, out string)
}

const walkthroughDeadline = 2 * time.Minute

// walkthroughSteps are the commands the test does more about than run
// them once and require them to succeed, which is all it does with the
// others.
var walkthroughSteps = []walkthroughStep{
	{command: "make run", background: true, ready: func(w *walkthrough, _ string) (bool, error) {
		if _, err := os.Stat(filepath.Join(w.home, ".kubestellar", "admin.kubeconfig")); err != nil {
			return false, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return harness.WaitReady(ctx, w.port, time.Second) == nil, nil
	}},
	{command: "kubectl get ns", want: outputHas("default")},
	{command: "kubestellar space create wds1", want: outputHas("wds1")},
	{command: "kubectl --context wds1 get deploy,svc,cm -n demo", want: outputHas("deployment.apps/hello", "service/hello", "configmap/hello")},
	{command: "kubestellar space list", want: outputHas("wds1")},
	{command: "kubectl --context inv1 get synctargets,locations", want: outputHas("synctarget.edge.kubestellar.io/edge1", "synctarget.edge.kubestellar.io/edge2", "location.edge.kubestellar.io/edge1", "location.edge.kubestellar.io/edge2")},
	// "once the CRD is served", says the doc.
	{command: "kubectl --context wds1 apply -f docs/examples/placement/widget.yaml", retry: true},
	{command: "kubectl --context wds1 get edgeplacements", retry: true, want: tableColumn("READY", map[string]string{"common": "True", "special": "True"})},
	{command: "kubectl --context wds1 get singleplacementslices -o yaml", retry: true, want: outputHas("edge1", "edge2")},
	{command: "MB=$(kubectl --context inv1 get st edge1 -o jsonpath='{.status.mailboxSpace}')", retry: true, check: `test -n "$MB"`},
	{command: "kubectl --kubeconfig mailbox.kubeconfig get configmap settings -n common -o jsonpath='{.data}'", retry: true, want: outputIs(`{"region":"east","zone":"east-1a"}`)},
	{command: "kubestellar synctarget create edge1 --inventory-space inv1 --labels env=prod,region=east", then: (*walkthrough).takeJoinCommand},
	{
		command:    "kubestellar syncer join --server https://center:6443 --token K10...::abcdef.0123456789abcdef --sync-target edge1 --kubeconfig ~/.kube/edge1.config",
		background: true,
		ready:      (*walkthrough).syncerReady,
	},
	{command: "kubectl --context inv1 get synctarget edge1", retry: true, want: tableColumn("CONNECTED", map[string]string{"edge1": "True"})},
	// The common Deployment's two replicas (its Customizer's) at the edge.
	{command: "kubectl --kubeconfig edge1.kubeconfig get pods -A", retry: true, want: func(out string) error {
		if n := regexp.MustCompile(`(?m)^common\s+web-\S+\s+1/1\s+Running\s`).FindAllStringIndex(out, -1); len(n) != 2 {
			return fmt.Errorf("want the 2 pods of common/web Running, have %d", len(n))
		}
		return nil
	}},
	{command: "kubectl --kubeconfig edge1.kubeconfig logs -f -n common deploy/web", want: outputIs("edgecluster edge1: container started")},
	{command: "kubectl --kubeconfig edge1.kubeconfig exec -it -n common deploy/web -- sh", stdin: "echo \"shell at $EDGECLUSTER\"\nexit\n", want: outputIs("shell at edge1")},
	// edge1 reports its 2 available replicas and 2 running pods; edge2,
	// which the placement selects too, has not joined: counted among the
	// clusters, listed as not available.
	{command: "kubectl --context wds1 get combinedstatus -n common common.deployments.web -o yaml", retry: true, want: combinedStatus(map[string]string{"available": "[[2 2 2]]", "not-available": "[[edge2]]"})},
	{command: "kubectl --context wds1 get deploy special -n special --show-labels", retry: true, want: outputHas("kubestellar.io/executing-count=1")},
	{command: "kubestellar dashboard", want: dashboardLink},
	{command: "kubestellar dashboard --no-browser", want: dashboardLink, then: (*walkthrough).openDashboard},
}

// TestGettingStartedWalkthrough runs the getting-started walkthrough as a
// reader would: every command of its ```sh blocks, in order, with bash,
// against the built binary, the real kubectl and a real edge cluster that
// joins with the command `synctarget create` prints; then checks what the
// doc says the reader sees. walkthroughChanges lists what it does
// differently, walkthroughSteps what it checks.
func TestGettingStartedWalkthrough(t *testing.T) {
	doc := os.Getenv(walkthroughDocEnv)
	if doc == "" {
		doc = filepath.Join(harness.RepoRoot(), walkthroughDoc)
	}
	content, err := os.ReadFile(doc)
	require.NoError(t, err)
	blocks := parseWalkthrough(string(content))

	// Its shape, before running anything.
	var skipped []string
	var commands []walkthroughCommand
	for _, b := range blocks {
		if b.skip != "" {
			for _, c := range b.commands {
				skipped = append(skipped, c.bare())
			}
			t.Logf("skipped as the doc says, at line %d: %s", b.line, b.skip)
			continue
		}
		commands = append(commands, b.commands...)
	}
	shape := fmt.Sprintf("%s changed shape: update the counts at the top of walkthrough_test.go, and walkthroughSteps for the new commands", doc)
	require.Len(t, blocks, walkthroughBlocks, "```sh blocks; %s", shape)
	require.Equal(t, walkthroughSkipped, skipped, "the commands of the blocks marked skip; %s", shape)
	require.Len(t, commands, walkthroughCommands, "commands to run; %s", shape)
	steps := map[string]*walkthroughStep{}
	for i := range walkthroughSteps {
		s := &walkthroughSteps[i]
		n := 0
		for _, c := range commands {
			if c.bare() == s.command {
				n++
			}
		}
		require.Equal(t, 1, n, "walkthroughSteps names %q, which is %d commands of %s, not one", s.command, n, doc)
		steps[s.command] = s
	}

	// What the test runs for each command, and no substitution stale.
	texts := make([]string, len(commands))
	used := make([]int, len(walkthroughChanges))
	for j, c := range commands {
		texts[j] = c.text
		for i, ch := range walkthroughChanges {
			if ch.old != "" && strings.Contains(texts[j], ch.old) {
				texts[j] = strings.ReplaceAll(texts[j], ch.old, ch.new)
				used[i]++
			}
		}
	}
	for i, ch := range walkthroughChanges {
		if ch.old != "" {
			require.NotZero(t, used[i], "walkthroughChanges replaces %q, which no command of %s has any more", ch.old, doc)
		}
	}

	w := newWalkthrough(t)
	if rel, err := filepath.Rel(harness.RepoRoot(), doc); err == nil && !strings.HasPrefix(rel, "..") {
		w.doc = rel
	} else {
		w.doc = doc
	}
	start := time.Now()
	for j, c := range commands {
		step := steps[c.bare()]
		if step == nil {
			step = &walkthroughStep{}
		}
		began := time.Now()
		w.run(c, texts[j], step)
		t.Logf("%s:%d ok (%s): %s", w.doc, c.line, time.Since(began).Round(10*time.Millisecond), c.bare())
	}
	t.Logf("ran the %d commands of %s in %s", len(commands), doc, time.Since(start).Round(time.Second))
}

// walkthroughBlock is one ```sh block of the doc.
type walkthroughBlock struct {
	line     int
	skip     string // why the test does not run it, if it does not
	commands []walkthroughCommand
}

// walkthroughCommand is one command of a block: continuation lines joined,
// its trailing comment kept (bash ignores it).
type walkthroughCommand struct {
	line int
	text string
}

// bare is the command without its trailing comment or repeated spaces.
func (c walkthroughCommand) bare() string {
	text := c.text
	if i := strings.Index(text, " #"); i >= 0 {
		text = text[:i]
	}
	return strings.Join(strings.Fields(text), " ")
}

// parseWalkthrough returns the doc's ```sh blocks and their commands,
// leaving out blank lines and lines that are only a comment (the output
// the doc shows).
func parseWalkthrough(doc string) []walkthroughBlock {
	var blocks []walkthroughBlock
	var cur *walkthroughBlock
	var pending *walkthroughCommand
	prev := ""
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```sh":
			blocks = append(blocks, walkthroughBlock{line: i + 1})
			cur = &blocks[len(blocks)-1]
			if m := walkthroughSkip.FindStringSubmatch(prev); m != nil {
				cur.skip = m[1]
			}
		case cur != nil && strings.HasPrefix(trimmed, "```"):
			cur = nil
		case cur != nil && pending != nil:
			pending.text += " " + strings.TrimSuffix(trimmed, `\`)
			if !strings.HasSuffix(trimmed, `\`) {
				cur.commands = append(cur.commands, *pending)
				pending = nil
			}
		case cur != nil && (trimmed == "" || strings.HasPrefix(trimmed, "#")):
		case cur != nil && strings.HasSuffix(trimmed, `\`):
			pending = &walkthroughCommand{line: i + 1, text: strings.TrimSpace(strings.TrimSuffix(trimmed, `\`))}
		case cur != nil:
			cur.commands = append(cur.commands, walkthroughCommand{line: i + 1, text: trimmed})
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	return blocks
}

// walkthrough runs the doc's commands one bash each, in dir, carrying the
// variables they set (exported: `set -a`) from one to the next in a file.
type walkthrough struct {
	t     *testing.T
	doc   string // as the messages name it
	home  string
	dir   string
	state string
	env   []string
	port  int
}

func newWalkthrough(t *testing.T) *walkthrough {
	root := t.TempDir()
	w := &walkthrough{t: t, home: filepath.Join(root, "home"), dir: filepath.Join(root, "work"),
		state: filepath.Join(root, "state.sh"), port: harness.FreePort(t)}
	bin := filepath.Join(root, "bin")
	for _, d := range []string{w.home, filepath.Join(w.home, ".kube"), w.dir, bin} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	require.NoError(t, os.Symlink(harness.Binary(t), filepath.Join(bin, "kubestellar")))
	require.NoError(t, os.Symlink(filepath.Join(harness.RepoRoot(), "docs"), filepath.Join(w.dir, "docs")))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "app.yaml"), []byte(walkthroughApp), 0o600))
	require.NoError(t, os.WriteFile(w.state, nil, 0o600))

	edge := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	kubeconfig, err := os.ReadFile(edge.KubeconfigPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(w.home, ".kube", "edge1.config"), kubeconfig, 0o600))

	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "HOME", "PATH", "KUBECONFIG", "DISPLAY", "WAYLAND_DISPLAY", "KUBECACHEDIR", "KUBESTELLAR_TOKEN":
			continue
		}
		w.env = append(w.env, kv)
	}
	w.env = append(w.env, "HOME="+w.home, "PATH="+bin+":/usr/local/bin:/usr/bin:/bin",
		"WALKTHROUGH_PORT="+strconv.Itoa(w.port))
	return w
}

// walkthroughDiagnosis is what the test shows of the center when it
// failed (each command may fail too: the server may not be up).
var walkthroughDiagnosis = []string{
	"kubectl --context inv1 get synctargets,locations -o yaml --show-managed-fields",
	"kubectl --context wds1 get edgeplacements -o yaml",
}

func (w *walkthrough) diagnose() {
	for _, text := range walkthroughDiagnosis {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -a\nsource "+shellQuote(w.state)+"\n"+text+" 2>&1")
		cmd.Dir, cmd.Env = w.dir, w.env
		out, _ := cmd.Output()
		cancel()
		w.t.Logf("for diagnosis, %s:\n%s", text, tailString(string(out), 8000))
	}
}

// walkthroughApp stands for the reader's app.yaml.
const walkthroughApp = `apiVersion: v1
kind: ConfigMap
metadata: {name: hello}
data: {greeting: hello}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello}
spec:
  replicas: 1
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec:
      containers: [{name: hello, image: nginx:1.27}]
---
apiVersion: v1
kind: Service
metadata: {name: hello}
spec:
  selector: {app: hello}
  ports: [{port: 80}]
`

// script is the bash that runs one command: the variables of the commands
// before it, the command, the step's check, then what it set for the next.
func (w *walkthrough) script(text, check string) string {
	s := "set -euo pipefail\nset -a\nsource " + shellQuote(w.state) + "\n" + text + "\n"
	if check != "" {
		s += check + "\n"
	}
	return s + "export -p > " + shellQuote(w.state) + "\n"
}

// setVar sets a variable for the commands after this one.
func (w *walkthrough) setVar(name, value string) {
	f, err := os.OpenFile(w.state, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(w.t, err)
	defer f.Close()
	_, err = fmt.Fprintf(f, "export %s=%s\n", name, shellQuote(value))
	require.NoError(w.t, err)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// run runs one command of the doc (text, after walkthroughChanges) as step
// says, failing the test with the doc's line, the command and its output.
func (w *walkthrough) run(c walkthroughCommand, text string, step *walkthroughStep) {
	t := w.t
	t.Helper()
	where := fmt.Sprintf("%s:%d: %s", w.doc, c.line, c.bare())
	if text != c.text {
		where += "\n  run as: " + text
	}
	if step.background {
		w.startBackground(where, text, step)
		return
	}
	var out, errOut string
	var runErr error
	attempts := 0
	once := func() bool {
		attempts++
		ctx, cancel := context.WithTimeout(context.Background(), walkthroughDeadline)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", w.script(text, step.check))
		cmd.Dir, cmd.Env = w.dir, w.env
		if step.stdin != "" {
			cmd.Stdin = strings.NewReader(step.stdin)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 5 * time.Second
		runErr = cmd.Run()
		out, errOut = stdout.String(), stderr.String()
		if runErr == nil && step.want != nil {
			runErr = step.want(strings.TrimSpace(out))
		}
		return runErr == nil
	}
	if step.retry {
		_ = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, walkthroughDeadline, true,
			func(context.Context) (bool, error) { return once(), nil })
	} else {
		once()
	}
	if runErr != nil {
		w.diagnose()
	}
	require.NoError(t, runErr, "the walkthrough's command failed (tried %d times):\n  %s\nstdout:\n%s\nstderr:\n%s", attempts, where, out, errOut)
	if step.then != nil {
		step.then(w, out)
	}
}

// startBackground starts a command that runs until stopped (a server, a
// syncer) and waits until step.ready says it is up; it is stopped when the
// test ends, and its output shown if the test failed.
func (w *walkthrough) startBackground(where, text string, step *walkthroughStep) {
	t := w.t
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "background.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command("bash", "-c", "set -euo pipefail\nset -a\nsource "+shellQuote(w.state)+"\nexec "+text)
	cmd.Dir, cmd.Env = w.dir, w.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	readLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Errorf("%s did not stop within 30s of SIGTERM", where)
		}
		if t.Failed() {
			t.Logf("the end of the output of %s:\n%s", where, tailString(readLog(), 8000))
		}
	})
	var readyErr error
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, walkthroughDeadline, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("it exited: %v", cmd.ProcessState)
		default:
		}
		ok, err := step.ready(w, readLog())
		readyErr = err
		return ok, nil
	})
	if err == nil {
		return
	}
	if readyErr != nil {
		err = fmt.Errorf("%w (last: %v)", err, readyErr)
	}
	w.diagnose()
	t.Fatalf("the walkthrough's command never became ready: %v\n  %s\nits output:\n%s", err, where, tailString(readLog(), 6000))
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// takeJoinCommand keeps the --server and --token of the join command that
// `synctarget create` printed, for the `syncer join` the reader copies it
// into.
func (w *walkthrough) takeJoinCommand(out string) {
	fields := strings.Fields(strings.TrimSpace(out))
	require.GreaterOrEqual(w.t, len(fields), 3, "synctarget create printed %q", out)
	require.Equal(w.t, []string{"kubestellar", "syncer", "join"}, fields[:3], "synctarget create printed %q", out)
	server, token := flagValue(w.t, fields, "--server"), flagValue(w.t, fields, "--token")
	require.Equal(w.t, fmt.Sprintf("https://127.0.0.1:%d", w.port), server, "the join command's --server: %q", out)
	require.Regexp(w.t, `^K10[0-9a-f]{64}::[a-z0-9]{6}\.[a-z0-9]{16}$`, token, "the join command's --token: %q", out)
	require.Equal(w.t, "edge1", flagValue(w.t, fields, "--sync-target"), "the join command's --sync-target: %q", out)
	w.setVar("JOIN_SERVER", server)
	w.setVar("JOIN_TOKEN", token)
}

// syncerReady says whether the syncer printed what the doc shows: connected
// to the server as edge1, its mailbox found, edge1's objects synced with no
// problem.
func (w *walkthrough) syncerReady(log string) (bool, error) {
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^connected to ` + regexp.QuoteMeta(fmt.Sprintf("https://127.0.0.1:%d", w.port)) + ` as SyncTarget inv1/edge1$`),
		regexp.MustCompile(`(?m)^mailbox inv1-mb-\S+ found$`),
		// common's namespace, ConfigMap and Deployment.
		regexp.MustCompile(`(?m)^3 objects synced to the edge cluster \(0 with problems\)$`),
	}
	for _, re := range want {
		if !re.MatchString(log) {
			return false, fmt.Errorf("no line matching %s", re)
		}
	}
	return true, nil
}

// dashboardLink checks that the dashboard command printed a login link of
// the server.
func dashboardLink(out string) error {
	if !regexp.MustCompile(`^https://127\.0\.0\.1:\d+/dashboard/login\?code=\S+$`).MatchString(out) {
		return fmt.Errorf("want a login link, have %q", out)
	}
	return nil
}

// openDashboard opens the printed link as the reader's browser would:
// once, with the server's CA (from the admin kubeconfig), and no other
// credential: it logs in, and the dashboard's page follows.
func (w *walkthrough) openDashboard(out string) {
	t := w.t
	link := strings.TrimSpace(out)
	cfg := harness.AdminConfig(t, filepath.Join(w.home, ".kubestellar", "admin.kubeconfig"), "")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(cfg.CAData), "the admin kubeconfig's CA")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(url string) (int, string) {
		resp, err := browser.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := get(link)
	require.Equal(t, http.StatusOK, status, "opening the dashboard's link %s: %s", link, body)
	base, _, _ := strings.Cut(link, "/dashboard/")
	status, body = get(base + "/dashboard/")
	require.Equal(t, http.StatusOK, status, "the dashboard after logging in: %s", body)
	status, _ = get(link)
	require.Equal(t, http.StatusUnauthorized, status, "the link works once")
}

// outputHas checks that the output holds each of want.
func outputHas(want ...string) func(string) error {
	return func(out string) error {
		for _, s := range want {
			if !strings.Contains(out, s) {
				return fmt.Errorf("want %q in the output", s)
			}
		}
		return nil
	}
}

// outputIs checks that the output is want.
func outputIs(want string) func(string) error {
	return func(out string) error {
		if out != want {
			return fmt.Errorf("want %q, have %q", want, out)
		}
		return nil
	}
}

// combinedStatus checks a CombinedStatus in YAML: the rows of each
// collector's result, formatted with %v.
func combinedStatus(want map[string]string) func(string) error {
	return func(out string) error {
		var cs struct {
			Results []struct {
				Name string `json:"name"`
				Rows []struct {
					Columns []any `json:"columns"`
				} `json:"rows"`
			} `json:"results"`
		}
		if err := yaml.Unmarshal([]byte(out), &cs); err != nil {
			return err
		}
		have := map[string]string{}
		for _, r := range cs.Results {
			var rows [][]any
			for _, row := range r.Rows {
				rows = append(rows, row.Columns)
			}
			have[r.Name] = fmt.Sprint(rows)
		}
		var errs []error
		for name, rows := range want {
			if have[name] != rows {
				errs = append(errs, fmt.Errorf("the rows of %s: want %s, have %q", name, rows, have[name]))
			}
		}
		return errors.Join(errs...)
	}
}

// tableColumn checks kubectl's table: the column named column of the row
// of each name holds its value. Columns are cut where the header's start
// (a cell may be empty).
func tableColumn(column string, want map[string]string) func(string) error {
	return func(out string) error {
		lines := strings.Split(out, "\n")
		starts := regexp.MustCompile(`\S+`).FindAllStringIndex(lines[0], -1)
		cell := func(line string, i int) string {
			from, to := starts[i][0], len(line)
			if i+1 < len(starts) {
				to = min(starts[i+1][0], len(line))
			}
			if from >= len(line) {
				return ""
			}
			return strings.TrimSpace(line[from:to])
		}
		col := -1
		for i := range starts {
			if cell(lines[0], i) == column {
				col = i
			}
		}
		if col < 0 {
			return fmt.Errorf("no column %s in %q", column, lines[0])
		}
		have := map[string]string{}
		for _, l := range lines[1:] {
			have[cell(l, 0)] = cell(l, col)
		}
		var errs []error
		for name, value := range want {
			if have[name] != value {
				errs = append(errs, fmt.Errorf("%s of %s: want %q, have %q", column, name, value, have[name]))
			}
		}
		return errors.Join(errs...)
	}
}

// TestParseWalkthrough checks the parser on what the doc's blocks hold: a
// skip marker, continuation lines, output shown as comments, other fences.
func TestParseWalkthrough(t *testing.T) {
	doc := "intro\n\n```sh\nmake run   # starts it\n\n# output\n```\n" +
		"<!-- walkthrough: skip (interactive) -->\n```sh\nvi x\n```\n" +
		"```yaml\nkind: X\n```\n" +
		"```sh\nkubestellar syncer join --server S \\\n    --sync-target e   # c\n# printed\nkubectl get x\n```\n"
	blocks := parseWalkthrough(doc)
	require.Len(t, blocks, 3)
	require.Equal(t, walkthroughBlock{line: 3, commands: []walkthroughCommand{{line: 4, text: "make run   # starts it"}}}, blocks[0])
	require.Equal(t, "interactive", blocks[1].skip)
	require.Equal(t, []walkthroughCommand{{line: 10, text: "vi x"}}, blocks[1].commands)
	require.Equal(t, []walkthroughCommand{{line: 16, text: "kubestellar syncer join --server S --sync-target e   # c"}, {line: 19, text: "kubectl get x"}}, blocks[2].commands)
	require.Equal(t, "kubestellar syncer join --server S --sync-target e", blocks[2].commands[0].bare())
}
