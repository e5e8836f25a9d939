// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReportKeepsEverySectionAsItEnds(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	r := newReport(dir, &out)
	require.NoError(t, r.add("one server", []row{{"idle RSS", "200.0 MiB", "right after ready"}}, nil))
	require.Contains(t, out.String(), "== one server")
	require.Contains(t, out.String(), "200.0 MiB", "a section's rows are printed when it ends")
	saved := func() report {
		data, err := os.ReadFile(filepath.Join(dir, "latest.json"))
		require.NoError(t, err)
		var got report
		require.NoError(t, json.Unmarshal(data, &got))
		return got
	}
	require.Len(t, saved().Sections, 1, "saved before the next section runs")

	// A section that fails late keeps what came before, and says why.
	require.NoError(t, r.add("datastores", nil, errors.New("datastores: mariadbd not found\nmore")))
	got := saved()
	require.Len(t, got.Sections, 2)
	require.Equal(t, "idle RSS", got.Sections[0].Rows[0].Metric)
	require.Contains(t, got.Sections[1].Error, "mariadbd not found")
	require.Positive(t, got.Machine.Cores)
	require.NotEmpty(t, got.Machine.Go)
	require.NotEmpty(t, got.Commit)
	for _, name := range []string{r.base + ".json", r.base + ".md", "latest.md"} {
		require.FileExists(t, filepath.Join(dir, name))
	}
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "| idle RSS | 200.0 MiB | right after ready |")
	require.Contains(t, string(md), "Failed: datastores: mariadbd not found\n")
}

func TestCompareReports(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rows ...row) string {
		r := newReport(dir, &bytes.Buffer{})
		r.base = name
		require.NoError(t, r.add("s", rows, nil))
		return filepath.Join(dir, name+".json")
	}
	older := write("old", row{"latency p50 / p99", "2.0 ms / 8.0 ms", ""}, row{"gone", "1", ""})
	newer := write("new", row{"latency p50 / p99", "1.0 ms / 10.0 ms", ""}, row{"creates/s", "1,200", ""})
	var out bytes.Buffer
	require.NoError(t, compareReports(&out, older, newer))
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "latency p50 / p99") {
			line = l
		}
	}
	require.Contains(t, line, "0.50 / 1.25", out.String())
	require.NotContains(t, out.String(), "gone", "only metrics of both runs")

	only := write("only", row{"something else", "3", ""})
	require.ErrorContains(t, compareReports(&bytes.Buffer{}, older, only), "no metric in common")
	require.Error(t, compareReports(&bytes.Buffer{}, older, filepath.Join(dir, "missing.json")))
}

func TestRatios(t *testing.T) {
	for _, c := range []struct{ old, new, want string }{
		{"1,000", "1,500", "1.50"},
		{"1.3 ms / 4.9 ms", "2.6 ms / 4.9 ms", "2.00 / 1.00"},
		{"0", "5", "–"},
		{"3 ms", "n/a", "–"},
		{"1 / 2", "1", "–"},
	} {
		require.Equal(t, c.want, ratios(c.old, c.new), "%s → %s", c.old, c.new)
	}
}
