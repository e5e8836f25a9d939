// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is one run's figures: each section's rows as it finishes (printed
// at once, and saved with what came before, so that a section that fails
// late loses no earlier figure), with the machine and the commit measured.
type report struct {
	Commit   string          `json:"commit"`
	Started  time.Time       `json:"started"`
	Machine  machine         `json:"machine"`
	Args     []string        `json:"args"`
	Sections []reportSection `json:"sections"`

	// dir is where the report is written ("" for nowhere); base is its
	// file name without extension.
	dir, base string
	out       io.Writer
}

type machine struct {
	Cores     int    `json:"cores"`
	MemoryMiB int64  `json:"memoryMiB"`
	CPU       string `json:"cpu"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
}

type reportSection struct {
	Name  string      `json:"name"`
	Rows  []reportRow `json:"rows"`
	Error string      `json:"error,omitempty"`
}

type reportRow struct {
	Metric string `json:"metric"`
	Value  string `json:"value"`
	Note   string `json:"note,omitempty"`
}

// newReport starts a report that add writes under dir as
// bench-<time>-<commit>.json and .md (and latest.json, latest.md).
func newReport(dir string, out io.Writer) *report {
	r := &report{Commit: commit(), Started: time.Now().UTC(), Machine: thisMachine(), Args: os.Args[1:], dir: dir, out: out}
	r.base = fmt.Sprintf("bench-%s-%s", r.Started.Format("20060102-150405"), strings.TrimSuffix(r.Commit, "-dirty"))
	return r
}

// add records a section's rows (and its error, if it failed), prints the
// rows, and saves the report so far.
func (r *report) add(name string, rows []row, err error) error {
	s := reportSection{Name: name}
	for _, row := range rows {
		s.Rows = append(s.Rows, reportRow{Metric: row.metric, Value: row.value, Note: row.note})
	}
	if err != nil {
		s.Error = err.Error()
	}
	r.Sections = append(r.Sections, s)
	if len(s.Rows) > 0 {
		fmt.Fprintf(r.out, "\n== %s\n", name)
		printRows(r.out, s.Rows)
	}
	return r.save()
}

// save writes the report as JSON and Markdown, and as latest.*.
func (r *report) save() error {
	if r.dir == "" {
		return nil
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("the report's directory: %w", err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	md := r.markdown()
	for _, f := range []struct {
		name string
		data []byte
	}{{r.base + ".json", data}, {r.base + ".md", md}, {"latest.json", data}, {"latest.md", md}} {
		if err := os.WriteFile(filepath.Join(r.dir, f.name), f.data, 0o644); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	return nil
}

func (r *report) markdown() []byte {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "# make bench, %s\n\n", r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "Commit `%s`; %d cores (%s), %d MiB, Linux %s, %s; `%s`\n", r.Commit, m.Cores, m.CPU, m.MemoryMiB, m.Kernel, m.Go, strings.Join(r.Args, " "))
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Name)
		if s.Error != "" {
			fmt.Fprintf(&b, "Failed: %s\n\n", strings.SplitN(s.Error, "\n", 2)[0])
		}
		if len(s.Rows) == 0 {
			continue
		}
		b.WriteString("| metric | value | note |\n| --- | --- | --- |\n")
		for _, row := range s.Rows {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(row.Metric), mdCell(row.Value), mdCell(row.Note))
		}
	}
	return []byte(b.String())
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// rows returns every section's rows, in order.
func (r *report) rows() []reportRow {
	var out []reportRow
	for _, s := range r.Sections {
		out = append(out, s.Rows...)
	}
	return out
}

func printRows(w io.Writer, rows []reportRow) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tVALUE\tNOTE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Metric, r.Value, r.Note)
	}
	_ = tw.Flush()
}

// commit is the commit of the working tree the bench runs in, "-dirty"
// when it has changes, "unknown" outside a git checkout.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	// The record and the doc a run writes do not make the next run's tree
	// dirty: what was measured is still the commit's code.
	status, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--",
		":/", ":(top,exclude)docs/performance.json", ":(top,exclude)docs/performance.md").Output()
	if err == nil && len(strings.TrimSpace(string(status))) > 0 {
		c += "-dirty"
	}
	return c
}

func thisMachine() machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemoryMiB = kb / 1024
			}
		}
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

// compareReports prints, for every metric in both reports, the old and new
// values and the ratio of each number in them (new ÷ old): `make
// bench-compare OLD=... NEW=...`.
func compareReports(w io.Writer, oldPath, newPath string) error {
	load := func(path string) (*report, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		r := &report{}
		if err := json.Unmarshal(data, r); err != nil {
			return nil, fmt.Errorf("%s is not a bench report: %w", path, err)
		}
		return r, nil
	}
	older, err := load(oldPath)
	if err != nil {
		return err
	}
	newer, err := load(newPath)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "old: %s, commit %s, %d cores\nnew: %s, commit %s, %d cores\n\n",
		older.Started.Format(time.RFC3339), older.Commit, older.Machine.Cores, newer.Started.Format(time.RFC3339), newer.Commit, newer.Machine.Cores)
	if older.Machine.Cores != newer.Machine.Cores || older.Machine.CPU != newer.Machine.CPU {
		fmt.Fprintln(w, "note: the two runs are from different machines; the ratios say less")
	}
	before := map[string]string{}
	for _, row := range older.rows() {
		before[row.Metric] = row.Value
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tOLD\tNEW\tNEW ÷ OLD")
	shown := 0
	for _, row := range newer.rows() {
		old, ok := before[row.Metric]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.Metric, old, row.Value, ratios(old, row.Value))
		shown++
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shown == 0 {
		return errors.New("the two reports have no metric in common")
	}
	return nil
}

var number = regexp.MustCompile(`-?\d+(\.\d+)?`)

// ratios divides each number of value by the number in the same place of
// old ("2.00 / 0.50" for "1 ms / 4 ms" then "2 ms / 2 ms"); "–" where they
// do not pair up.
func ratios(old, value string) string {
	parse := func(s string) []float64 {
		var out []float64
		for _, m := range number.FindAllString(strings.ReplaceAll(s, ",", ""), -1) {
			f, err := strconv.ParseFloat(m, 64)
			if err == nil {
				out = append(out, f)
			}
		}
		return out
	}
	a, b := parse(old), parse(value)
	if len(a) == 0 || len(a) != len(b) {
		return "–"
	}
	parts := make([]string, len(a))
	for i := range a {
		if a[i] == 0 {
			parts[i] = "–"
			continue
		}
		parts[i] = fmt.Sprintf("%.2f", b[i]/a[i])
	}
	return strings.Join(parts, " / ")
}
