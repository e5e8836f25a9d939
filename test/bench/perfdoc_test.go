// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubestellar/kubestellar/test/harness"
	"github.com/stretchr/testify/require"
)

func runOf(commit string, day int, sections ...reportSection) *report {
	return &report{Commit: commit, Started: time.Date(2026, 12, day, 10, 0, 0, 0, time.UTC),
		Machine: machine{Cores: 2, MemoryMiB: 24 * 1024}, Sections: sections}
}

// TestRecordMerge: a run replaces the sections it measured and keeps the
// others as their own run left them; a failed or empty section replaces
// nothing.
func TestRecordMerge(t *testing.T) {
	rec := &record{}
	rec.merge(runOf("aaa", 1,
		reportSection{Name: "cold start", Rows: []reportRow{{Metric: "time to ready", Value: "1.2 s"}}},
		reportSection{Name: "fan-out", Rows: []reportRow{{Metric: "fan-out", Value: "34 s"}}}))
	rec.merge(runOf("bbb", 2,
		reportSection{Name: "fan-out", Rows: []reportRow{{Metric: "fan-out", Value: "30 s"}}},
		reportSection{Name: "cold start", Error: "cold start: boom", Rows: []reportRow{{Metric: "time to ready", Value: "9 s"}}},
		reportSection{Name: "flood"},
		reportSection{Name: "dashboard", Rows: []reportRow{{Metric: "first render", Value: "136 ms"}}}))
	var got []string
	for _, s := range rec.Sections {
		got = append(got, s.Name+"="+s.Rows[0].Value+"@"+s.Commit)
	}
	require.Equal(t, []string{"cold start=1.2 s@aaa", "fan-out=30 s@bbb", "dashboard=136 ms@bbb"}, got)

	// Written and read back, the same.
	path := filepath.Join(t.TempDir(), "performance.json")
	require.NoError(t, rec.write(path))
	back, err := loadRecord(path)
	require.NoError(t, err)
	require.Equal(t, rec, back)
	missing, err := loadRecord(filepath.Join(t.TempDir(), "none.json"))
	require.NoError(t, err)
	require.Empty(t, missing.Sections, "no record yet: an empty one")
}

// TestWithTable: the table between the markers is replaced, the prose
// around it kept; a doc without the markers is an error that says which.
func TestWithTable(t *testing.T) {
	rec := &record{}
	rec.merge(runOf("abc", 3, reportSection{Name: "one server", Rows: []reportRow{
		{Metric: "idle RSS", Value: "110.0 MiB", Note: "10 s at rest"},
		{Metric: "a | b", Value: "1"},
	}}))
	doc := []byte("# Performance\n\nProse before.\n\n" + tableBegin + "\nold table\n" + tableEnd + "\n\nProse after.\n")
	out, err := rec.withTable(doc)
	require.NoError(t, err)
	s := string(out)
	require.True(t, strings.HasPrefix(s, "# Performance\n\nProse before.\n\n"+tableBegin+"\n"))
	require.True(t, strings.HasSuffix(s, tableEnd+"\n\nProse after.\n"))
	require.NotContains(t, s, "old table")
	require.Contains(t, s, "| one server | idle RSS | 110.0 MiB (10 s at rest) | ")
	require.Contains(t, s, "| a \\| b |", "a cell's bar is escaped")
	require.Contains(t, s, "2026-12-03 at `abc`; 2 cores, 24 GiB")
	again, err := rec.withTable(out)
	require.NoError(t, err)
	require.Equal(t, out, again, "writing the table twice changes nothing")

	_, err = rec.withTable([]byte("# Performance\n"))
	require.ErrorContains(t, err, "no generated table")
}

// TestGoalOf: a row takes the goal of the longest metric prefix given for
// its section.
func TestGoalOf(t *testing.T) {
	saved := goals
	t.Cleanup(func() { goals = saved })
	goals = []goal{
		{section: "s", metric: "", goal: "section-wide", bound: "b0"},
		{section: "s", metric: "idle", goal: "idle", bound: "b1"},
		{section: "s", metric: "idle RSS", goal: "≤ 120 MiB", bound: "b2"},
	}
	for metric, want := range map[string]string{"idle RSS": "≤ 120 MiB", "idle CPU": "idle", "other": "section-wide"} {
		g, _ := goalOf("s", metric)
		require.Equal(t, want, g, metric)
	}
	g, b := goalOf("t", "idle RSS")
	require.Empty(t, g+b, "another section's goals are not this one's")
}

// TestDocsOnly: -docs writes the doc's table from the record, measuring
// nothing.
func TestDocsOnly(t *testing.T) {
	dir := t.TempDir()
	rec := &record{}
	rec.merge(runOf("abc", 3, reportSection{Name: "churn", Rows: []reportRow{{Metric: "state.db after idle", Value: "21 MiB"}}}))
	recPath, docPath := filepath.Join(dir, "performance.json"), filepath.Join(dir, "performance.md")
	require.NoError(t, rec.write(recPath))
	require.NoError(t, os.WriteFile(docPath, []byte(tableBegin+"\n"+tableEnd+"\n"), 0o644))
	require.NoError(t, docsOnly(options{record: recPath, doc: docPath}))
	data, err := os.ReadFile(docPath)
	require.NoError(t, err)
	require.Contains(t, string(data), "| churn | state.db after idle | 21 MiB |")
	require.Error(t, docsOnly(options{record: recPath}))
}

// TestMergeReport: -merge takes a saved run's sections into the record,
// those that finished, and writes the doc's table again.
func TestMergeReport(t *testing.T) {
	dir := t.TempDir()
	recPath, docPath, repPath := filepath.Join(dir, "performance.json"), filepath.Join(dir, "performance.md"), filepath.Join(dir, "bench.json")
	require.NoError(t, (&record{}).write(recPath))
	require.NoError(t, os.WriteFile(docPath, []byte(tableBegin+"\n"+tableEnd+"\n"), 0o644))
	run := runOf("abc", 3, reportSection{Name: "live edges, 10000 edges × 1 objects", Rows: []reportRow{{Metric: "10000 syncers started → all connected", Value: "5 min"}}},
		reportSection{Name: "rollouts", Error: "the fleet did not connect"})
	data, err := json.Marshal(run)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(repPath, data, 0o644))
	require.NoError(t, mergeReport(options{record: recPath, doc: docPath, merge: repPath}))
	doc, err := os.ReadFile(docPath)
	require.NoError(t, err)
	require.Contains(t, string(doc), "| live edges, 10000 edges × 1 objects | 10000 syncers started → all connected | 5 min |")
	require.NotContains(t, string(doc), "| rollouts |", "a section that failed is not recorded")
	require.Error(t, mergeReport(options{record: recPath, doc: docPath, merge: filepath.Join(dir, "absent.json")}))
}

// TestGoalsNameSections: every goal names a section the bench runs
// (runSections' names, and the soak's and chaos test's runs), so that none
// is silently never shown.
func TestGoalsNameSections(t *testing.T) {
	sections := map[string]bool{"cold start": true, "one server": true, "fan-out": true, "syncer": true, "tunnels": true, "forwarding": true,
		"tenants": true, "flood": true, "churn": true, "datastores": true, "stock kube-apiserver side by side": true, "dashboard": true, "live edges": true, "rollouts": true, "CRDs bound and per space": true,
		"soak": true, "chaos": true, haSection(liveOptions{edges: 1000, objects: 10}): true}
	for _, g := range goals {
		require.True(t, sections[g.section], "goal %q names section %q, which the bench does not run", g.metric, g.section)
		require.NotEmpty(t, g.goal+g.bound, "goal %q/%q says nothing", g.section, g.metric)
	}
}

// TestPerformanceDocIsGenerated: docs/performance.md's table is what
// docs/performance.json makes (make bench-docs writes it again).
func TestPerformanceDocIsGenerated(t *testing.T) {
	root := harness.RepoRoot()
	rec, err := loadRecord(filepath.Join(root, "docs", "performance.json"))
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "performance.md"))
	require.NoError(t, err)
	want, err := rec.withTable(doc)
	require.NoError(t, err)
	require.Equal(t, string(want), string(doc), "docs/performance.md's table is not performance.json's: run make bench-docs")
}

// TestRunAlone: a soak or chaos run whose checks fail is still recorded,
// with its verdict, and still fails; a run that broke before measuring
// records nothing.
func TestRunAlone(t *testing.T) {
	dir := t.TempDir()
	o := options{out: filepath.Join(dir, "out"), record: filepath.Join(dir, "performance.json"), doc: filepath.Join(dir, "performance.md")}
	require.NoError(t, os.WriteFile(o.doc, []byte(tableBegin+"\n"+tableEnd+"\n"), 0o644))

	failed := &verdictError{errors.New("soak failed: server RSS grew by 12 %")}
	err := runAlone(o, "soak", func() ([]row, error) {
		return []row{{"soak: server RSS", "1 → 2 → 3 MiB", ""}, {"soak: verdict", "failed", "RSS grew"}}, failed
	})
	require.ErrorIs(t, err, failed)
	rec, err := loadRecord(o.record)
	require.NoError(t, err)
	require.Len(t, rec.Sections, 1)
	require.Equal(t, "failed", rec.Sections[0].Rows[1].Value)

	err = runAlone(o, "chaos", func() ([]row, error) { return nil, errors.New("the server did not start") })
	require.ErrorContains(t, err, "did not start")
	rec, err = loadRecord(o.record)
	require.NoError(t, err)
	require.Len(t, rec.Sections, 1, "a run that broke records nothing")
	doc, err := os.ReadFile(o.doc)
	require.NoError(t, err)
	require.Contains(t, string(doc), "| soak | soak: server RSS | 1 → 2 → 3 MiB | grows ≤ 10 % after the warm-up |")
}

// TestSectionsWithOptions: a fan-out of other sizes is a section of its
// own in the record, with the fan-out's goals.
func TestSectionsWithOptions(t *testing.T) {
	o := options{fanTargets: 1000, fanObjects: 100}
	require.Equal(t, "fan-out", fanoutSection(o))
	o.fanTargets = 10000
	require.Equal(t, "fan-out, 10000 SyncTargets × 100 objects", fanoutSection(o))
	o.fanTargets, o.fanSyncerWatches = 1000, true
	big := fanoutSection(o)
	require.Equal(t, "fan-out, 1000 SyncTargets × 100 objects, a syncer's watch per mailbox", big)
	goal, _ := goalOf(big, "fan-out: 100 objects to 1000 mailboxes")
	require.Equal(t, "≤ 60 s for 1,000 SyncTargets; ≤ 15 min for 10,000", goal)
	goal, _ = goalOf("fan-outs", "fan-out: x")
	require.Empty(t, goal, "only the section's own name, or its name with options")
}

// TestDefaultWarmup: the soak measures growth only once the datastore's
// history has had time to fill.
func TestDefaultWarmup(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		30 * time.Minute: 5 * time.Minute,
		10 * time.Minute: 5 * time.Minute,
		60 * time.Minute: 10 * time.Minute,
		4 * time.Minute:  2 * time.Minute,
	} {
		require.Equal(t, want, defaultWarmup(d), "%s", d)
	}
}
