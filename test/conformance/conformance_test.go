// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package conformance runs Kubernetes' own end-to-end specs (sig-api-machinery
// and sig-cli, built from k8s.io/kubernetes by test/conformance/suite)
// against a space and against a stock kube-apiserver with
// kube-controller-manager and no nodes, and prints both results side by
// side. `make conformance` runs it; `make test` skips it.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// Environment variables that make conformance sets.
const (
	envRun      = "KUBESTELLAR_CONFORMANCE"
	envFocus    = "KUBESTELLAR_CONFORMANCE_FOCUS"
	envSkip     = "KUBESTELLAR_CONFORMANCE_SKIP"
	envParallel = "KUBESTELLAR_CONFORMANCE_PARALLEL"
	envOut      = "KUBESTELLAR_CONFORMANCE_OUT"
	// envReports keeps each spec's report and output there, by server.
	envReports = "KUBESTELLAR_CONFORMANCE_REPORTS"
)

const (
	// defaultFocus selects the specs of the two SIGs whose specs need no
	// running pod to be meaningful against a space.
	defaultFocus = `\[sig-api-machinery\]|\[sig-cli\]`
	// defaultSkip leaves out what Kubernetes' own conformance runs leave
	// out, and what may not run beside other specs.
	defaultSkip = `\[Serial\]|\[Disruptive\]|\[Slow\]|\[Flaky\]|\[Feature:|\[Alpha\]|\[Beta\]|\[FeatureGate:`
	// specTimeout bounds one spec's process: a spec that waits for a pod
	// to run waits 5 minutes by Kubernetes' own timeout where none can.
	specTimeout = 8 * time.Minute
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// TestConformance runs the specs the focus and skip select: all of them
// against the stock server, then those it passes against a space. The
// table (spec, stock result, space result, the space's failure) is printed
// and, with KUBESTELLAR_CONFORMANCE_OUT, written there as Markdown.
func TestConformance(t *testing.T) {
	if os.Getenv(envRun) == "" {
		t.Skipf("set %s=1 (make conformance) to run Kubernetes' e2e specs: it builds e2e.test (about 15 minutes once per machine) and runs for an hour or more", envRun)
	}
	ctx := t.Context()
	parallel, err := strconv.Atoi(envOr(envParallel, "8"))
	require.NoError(t, err, "%s", envParallel)

	suite, err := edgecluster.BuildOptions{Logf: t.Logf}.EnsureConformanceSuite(ctx)
	require.NoError(t, err)
	specs := listSpecs(t, suite, envOr(envFocus, defaultFocus), envOr(envSkip, defaultSkip))
	require.NotEmpty(t, specs, "no spec selected")
	t.Logf("conformance: %d specs selected", len(specs))

	stock := edgecluster.Start(t, edgecluster.Options{Name: "stock"})
	removeNodes(t, stock)
	srv := harness.StartBinary(t, "")
	srv.CLI(t, "space", "create", "conformance")
	spaceKubeconfig := filepath.Join(t.TempDir(), "space.kubeconfig")
	require.NoError(t, os.WriteFile(spaceKubeconfig, []byte(srv.CLIStdout(t, "kubeconfig", "--space", "conformance")), 0o600))

	reports := os.Getenv(envReports)
	if reports == "" {
		reports = t.TempDir()
	}
	t.Logf("conformance: each spec's report and output are in %s", reports)
	started := time.Now()
	onStock := runSpecs(ctx, t, suite, stock.KubeconfigPath, filepath.Join(reports, "stock"), specs, parallel)
	t.Logf("conformance: stock server done in %s", time.Since(started).Round(time.Second))
	var selected []string
	for _, s := range specs {
		if onStock[s].passed() {
			selected = append(selected, s)
		}
	}
	started = time.Now()
	inSpace := runSpecs(ctx, t, suite, spaceKubeconfig, filepath.Join(reports, "space"), selected, parallel)
	t.Logf("conformance: space done in %s", time.Since(started).Round(time.Second))

	header := fmt.Sprintf("# Conformance: Kubernetes' own e2e specs against a space\n\n"+
		"Written by `make conformance` on %s, %s, e2e.test of Kubernetes %s, against a space and against kube-apiserver "+
		"with kube-controller-manager and no nodes (test/edgecluster). Focus `%s`, skip `%s`: every spec the stock server passes "+
		"is run against the space. The differences that stay, and why, are in docs/concepts/spaces.md (Where a space differs from a cluster), summed up in the README.\n\n",
		time.Now().UTC().Format("2006-01-02"), strings.Join(strings.Fields(srv.CLIStdout(t, "version")), " "), suiteVersion(t, suite),
		envOr(envFocus, defaultFocus), envOr(envSkip, defaultSkip))
	table := header + render(selected, onStock, inSpace, len(specs))
	fmt.Println(table)
	if out := os.Getenv(envOut); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(table), 0o644))
	}
}

// suiteVersion is the Kubernetes version e2e.test was built from.
func suiteVersion(t *testing.T, suite string) string {
	out, err := exec.CommandContext(t.Context(), suite, "--version").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// removeNodes deletes the stock cluster's fake nodes: the comparison is
// with a control plane that runs no pod, as the center runs none.
func removeNodes(t *testing.T, c *edgecluster.Cluster) {
	client, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	for _, name := range c.NodeNames {
		require.NoError(t, client.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
}

// specReport is what a ginkgo JSON report says of one spec.
type specReport struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	RunTime                 time.Duration
	Failure                 struct{ Message string }
}

func (r specReport) name() string {
	return strings.Join(append(slices.Clone(r.ContainerHierarchyTexts), r.LeafNodeText), " ")
}

type suiteReport struct{ SpecReports []specReport }

// result is one spec's outcome on one server.
type result struct {
	state  string // passed, failed, timedout, panicked, skipped, error
	reason string
}

func (r result) passed() bool { return r.state == "passed" }

// listSpecs returns the names of the specs focus and skip select, from a
// dry run of the suite.
func listSpecs(t *testing.T, suite, focus, skip string) []string {
	report := filepath.Join(t.TempDir(), "list.json")
	cmd := exec.CommandContext(t.Context(), suite, "--ginkgo.dry-run", "--ginkgo.focus="+focus, "--ginkgo.skip="+skip,
		"--ginkgo.json-report="+report, "--ginkgo.no-color", "--provider=skeleton")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "listing the specs: %s", tail(out))
	reports := readReport(t, report)
	var names []string
	for _, r := range reports {
		if r.LeafNodeType == "It" && r.State != "skipped" && r.State != "pending" {
			names = append(names, r.name())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func readReport(t *testing.T, path string) []specReport {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var suites []suiteReport
	require.NoError(t, json.Unmarshal(data, &suites))
	var out []specReport
	for _, s := range suites {
		out = append(out, s.SpecReports...)
	}
	return out
}

// runSpecs runs each spec in a process of its own, parallel at a time,
// against the server of kubeconfig, and returns their results by name.
func runSpecs(ctx context.Context, t *testing.T, suite, kubeconfig, dir string, specs []string, parallel int) map[string]result {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	results := map[string]result{}
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r := runSpec(ctx, suite, kubeconfig, filepath.Join(dir, strconv.Itoa(i)), specs[i])
				mu.Lock()
				results[specs[i]] = r
				done := len(results)
				mu.Unlock()
				if done%10 == 0 || done == len(specs) {
					t.Logf("conformance: %d of %d specs run on %s", done, len(specs), filepath.Base(dir))
				}
			}
		}()
	}
	for i := range specs {
		work <- i
	}
	close(work)
	wg.Wait()
	return results
}

func runSpec(ctx context.Context, suite, kubeconfig, dir, spec string) result {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{state: "error", reason: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, specTimeout+time.Minute)
	defer cancel()
	report := filepath.Join(dir, "report.json")
	// The spec's full text, to its end: ginkgo matches the focus against
	// the texts of its containers and its own, after a space.
	cmd := exec.CommandContext(ctx, suite,
		"--kubeconfig="+kubeconfig, "--provider=skeleton", "--num-nodes=0", "--allowed-not-ready-nodes=-1",
		"--report-dir="+dir, "--ginkgo.focus=(^|\\s)"+regexp.QuoteMeta(spec)+"$", "--ginkgo.json-report="+report,
		"--ginkgo.no-color", "--ginkgo.timeout="+specTimeout.String())
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	_ = os.WriteFile(filepath.Join(dir, "output.log"), out.Bytes(), 0o644)
	data, err := os.ReadFile(report)
	if err != nil {
		return result{state: "error", reason: fmt.Sprintf("no report (%v): %s", runErr, lastLine(out.Bytes()))}
	}
	var suites []suiteReport
	if err := json.Unmarshal(data, &suites); err != nil {
		return result{state: "error", reason: "unreadable report: " + err.Error()}
	}
	for _, s := range suites {
		for _, r := range s.SpecReports {
			if r.LeafNodeType == "It" && r.name() == spec {
				return result{state: r.State, reason: firstLine(r.Failure.Message)}
			}
		}
		// A failed suite setup fails before any spec.
		for _, r := range s.SpecReports {
			if r.State != "passed" && r.State != "skipped" {
				return result{state: "error", reason: "suite setup: " + firstLine(r.Failure.Message)}
			}
		}
	}
	return result{state: "error", reason: "the spec did not run: " + lastLine(out.Bytes())}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return firstLine(lines[len(lines)-1])
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// render makes the Markdown table of the selected specs, with counts.
func render(selected []string, stock, space map[string]result, listed int) string {
	var b strings.Builder
	conformance := func(s string) bool { return strings.Contains(s, "[Conformance]") }
	count := func(results map[string]result, only func(string) bool) (n int) {
		for _, s := range selected {
			if results[s].passed() && only(s) {
				n++
			}
		}
		return n
	}
	all := func(string) bool { return true }
	nConf := 0
	for _, s := range selected {
		if conformance(s) {
			nConf++
		}
	}
	fmt.Fprintf(&b, "Of %d specs selected, the stock server passes %d (%d of them [Conformance]); a space passes %d of those (%d [Conformance]).\n\n",
		listed, len(selected), nConf, count(space, all), count(space, conformance))
	b.WriteString("| spec | stock | space | why, in the space |\n| --- | --- | --- | --- |\n")
	escape := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, s := range selected {
		r := space[s]
		reason := ""
		if !r.passed() {
			reason = r.reason
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", escape.Replace(s), stock[s].state, r.state, escape.Replace(reason))
	}
	return b.String()
}
