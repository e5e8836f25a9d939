// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubestellar/kubestellar/test/edgecluster"
)

// TestSideBySide runs the measurements against two fake clientsets: both
// servers get the same warm-up, creates, watch samples and LISTs.
func TestSideBySide(t *testing.T) {
	const n = 40
	fakes := [2]*fake.Clientset{fake.NewClientset(), fake.NewClientset()}
	// Each server's CPU clock advances by 1 ms (ours) or 2 ms at every
	// read, its datastore's by 10 times that.
	var clocks [2]time.Duration
	cpu := [2]func() (map[string]time.Duration, error){}
	for i := range cpu {
		cpu[i] = func() (map[string]time.Duration, error) {
			clocks[i] += time.Duration(i+1) * time.Millisecond
			return map[string]time.Duration{"server": clocks[i], "datastore": 10 * clocks[i]}, nil
		}
	}
	f, err := sideBySide(t.Context(), [2]kubernetes.Interface{fakes[0], fakes[1]}, cpu, n, t.Logf)
	require.NoError(t, err)
	for i, c := range fakes {
		step := time.Duration(i+1) * time.Millisecond
		require.Equal(t, stockRounds*n, f[i].created, "server %d: the 32-client creates", i)
		require.Equal(t, map[string]time.Duration{"server": stockRounds * step, "datastore": 10 * stockRounds * step}, f[i].createCPU,
			"server %d: one step per 32-client run", i)
		require.Equal(t, stockLists*step, f[i].listCPU["server"], "server %d: one step per LIST", i)
		require.Positive(t, f[i].creates1, "server %d", i)
		require.Positive(t, f[i].creates32, "server %d", i)
		require.Len(t, f[i].watch, 10, "n/4, at least 10 samples")
		require.Len(t, f[i].list, stockLists)
		want := map[string]int{"warm-up": n, "warm-up-watch": 10, "watch": 10, "list": n}
		for round := range stockRounds {
			want[fmt.Sprintf("creates-1-%d", round)] = n / 4
			want[fmt.Sprintf("creates-32-%d", round)] = n
		}
		for ns, want := range want {
			list, err := c.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, list.Items, want, "server %d, namespace %s", i, ns)
		}
	}
}

func TestStockRows(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	b := stockBackend{name: "kine/SQLite", note: "how it runs"}
	tests := []struct {
		name                  string
		ours, stock           stockFigures
		createsGoal, listGoal string
	}{
		{
			name:        "both goals met",
			ours:        stockFigures{creates1: 100, creates32: 1200, watch: ms(1, 2), list: ms(4, 4, 5)},
			stock:       stockFigures{creates1: 100, creates32: 1000, watch: ms(1, 2), list: ms(4, 5, 5)},
			createsGoal: "goal ours ÷ stock ≥ 1.2×: met", listGoal: "goal ours ÷ stock ≤ 1.0×: met",
		},
		{
			name:        "neither met",
			ours:        stockFigures{creates1: 100, creates32: 1100, watch: ms(1, 2), list: ms(8, 8, 9)},
			stock:       stockFigures{creates1: 100, creates32: 1000, watch: ms(1, 2), list: ms(4, 4, 4)},
			createsGoal: "goal ours ÷ stock ≥ 1.2×: NOT met", listGoal: "goal ours ÷ stock ≤ 1.0×: NOT met",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := stockRows(b, 1000, [2]stockFigures{tt.ours, tt.stock})
			require.Len(t, rows, 9)
			for _, r := range rows {
				require.True(t, strings.HasPrefix(r.metric, "kine/SQLite: "), r.metric)
				require.True(t, strings.HasSuffix(r.metric, ", ours / stock"), r.metric)
			}
			require.Contains(t, rows[0].note, "how it runs")
			require.Contains(t, rows[0].note, "ours in space "+stockSpace)
			require.True(t, strings.HasPrefix(rows[1].note, tt.createsGoal), rows[1].note)
			require.True(t, strings.HasPrefix(rows[4].note, tt.listGoal), rows[4].note)
			require.Equal(t, "LIST of 1000 ConfigMaps in one namespace p50, ours / stock", strings.TrimPrefix(rows[4].metric, "kine/SQLite: "))
		})
	}
	rows := stockRows(b, 1000, [2]stockFigures{tests[1].ours, tests[1].stock})
	require.Equal(t, "1100 / 1000 (1.10×)", rows[1].value)
	require.Equal(t, "8.0 ms / 4.0 ms (2.00×)", rows[4].value)
	for _, r := range rows[6:] {
		require.Equal(t, "not measured", r.value, r.metric)
	}

	ours, stock := tests[1].ours, tests[1].stock
	ours.createCPU = map[string]time.Duration{"server": 900 * time.Millisecond, "datastore": 600 * time.Millisecond}
	ours.created, ours.listCPU = 3000, map[string]time.Duration{"server": 150 * time.Millisecond}
	stock.createCPU = map[string]time.Duration{"server": 1200 * time.Millisecond, "datastore": 750 * time.Millisecond}
	stock.created, stock.listCPU = 3000, map[string]time.Duration{"server": 100 * time.Millisecond}
	rows = stockRows(b, 1000, [2]stockFigures{ours, stock})
	require.Equal(t, "server CPU per create (32 clients), ours / stock", strings.TrimPrefix(rows[6].metric, "kine/SQLite: "))
	require.Equal(t, "0.300 ms / 0.400 ms (0.75×)", rows[6].value)
	require.Contains(t, rows[6].note, "the datastore's process apart")
	require.Equal(t, "datastore CPU per create (32 clients), ours / stock", strings.TrimPrefix(rows[7].metric, "kine/SQLite: "))
	require.Equal(t, "0.200 ms / 0.250 ms (0.80×)", rows[7].value)
	require.Equal(t, "50.000 ms / 33.333 ms (1.50×)", rows[8].value, "3 LISTs each")
	ours.createCPU = map[string]time.Duration{"server": 900 * time.Millisecond}
	embedded := stockRows(stockBackend{name: "embedded SQLite", embedded: true}, 1000, [2]stockFigures{ours, stock})
	require.Contains(t, embedded[6].note, "ours holds its datastore")
	require.Equal(t, "in ours' process / 0.250 ms", embedded[7].value)
}

// TestStockBackends checks the datastores of the side by side: ours on a
// datastore it is given but for the embedded row, where it runs on its
// default and the stock server on a standalone kine.
func TestStockBackends(t *testing.T) {
	backends := stockBackends(&edgecluster.KineBuild{Kine: "v0.0.0", SQLite: "v1.0.0"}, &edgecluster.Binaries{})
	var names []string
	for _, b := range backends {
		names = append(names, b.name)
		require.Equal(t, b.name == "embedded SQLite", b.embedded, b.name)
		require.NotNil(t, b.start, b.name)
	}
	require.Equal(t, []string{"kine/SQLite", "embedded SQLite", "etcd"}, names)
	require.Contains(t, backends[1].note, "ours on its default datastore")
	require.Contains(t, backends[1].note, "standalone kine v0.0.0")
}

func TestGoalNote(t *testing.T) {
	for _, tt := range []struct {
		ratio, goal float64
		atLeast     bool
		want        string
	}{
		{1.2, 1.2, true, "goal ours ÷ stock ≥ 1.2×: met"},
		{1.19, 1.2, true, "goal ours ÷ stock ≥ 1.2×: NOT met"},
		{1.0, 1.0, false, "goal ours ÷ stock ≤ 1.0×: met"},
		{1.01, 1.0, false, "goal ours ÷ stock ≤ 1.0×: NOT met"},
	} {
		require.Equal(t, tt.want, goalNote(tt.ratio, tt.goal, tt.atLeast))
	}
}

// TestPrepareSQLite checks that the standalone kine's database is made as
// our server makes its own: incremental auto-vacuum, in WAL mode.
func TestPrepareSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	require.NoError(t, prepareSQLite(t.Context(), path))
	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	defer db.Close()
	var autoVacuum int
	require.NoError(t, db.QueryRow("PRAGMA auto_vacuum").Scan(&autoVacuum))
	require.Equal(t, 2, autoVacuum, "INCREMENTAL")
	var mode string
	require.NoError(t, db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
}

func TestSQLiteDurability(t *testing.T) {
	require.Equal(t, "journal_mode=WAL, synchronous=NORMAL", sqliteDurability())
}

// TestStockRowsOverRuns: over several runs each side's figure is its
// median, the ratio the median of the runs' ratios with their min and
// max, and the goals are judged on that median; a run that did not
// measure a CPU figure is left out of it.
func TestStockRowsOverRuns(t *testing.T) {
	b := stockBackend{name: "etcd", note: "how it runs"}
	run := func(ours32, stock32 float64, list int, ourCPU time.Duration) [2]stockFigures {
		ms := []time.Duration{time.Duration(list) * time.Millisecond}
		f := [2]stockFigures{
			{creates1: 100, creates32: ours32, watch: ms, list: ms},
			{creates1: 100, creates32: stock32, watch: ms, list: []time.Duration{4 * time.Millisecond}},
		}
		if ourCPU > 0 {
			f[0].createCPU, f[0].created = map[string]time.Duration{"server": ourCPU}, 1000
			f[1].createCPU, f[1].created = map[string]time.Duration{"server": time.Second}, 1000
		}
		return f
	}
	// Creates ours ÷ stock 1.10, 1.30 and 1.25: one run alone would miss
	// the goal; the median meets it. LIST 3, 5 and 4 ms against 4 ms.
	rows := stockRows(b, 1000, run(1100, 1000, 3, 0), run(1300, 1000, 5, 800*time.Millisecond), run(1250, 1000, 4, 1200*time.Millisecond))
	require.Len(t, rows, 9)
	require.Equal(t, "1250 / 1000 (1.25×, 1.10×–1.30× over 3 runs)", rows[1].value)
	require.True(t, strings.HasPrefix(rows[1].note, "goal ours ÷ stock ≥ 1.2×: met on the median of 3 runs; "), rows[1].note)
	require.Equal(t, "4.0 ms / 4.0 ms (1.00×, 0.75×–1.25× over 3 runs)", rows[4].value)
	require.True(t, strings.HasPrefix(rows[4].note, "goal ours ÷ stock ≤ 1.0×: met on the median of 3 runs; "), rows[4].note)
	require.Contains(t, rows[0].note, "3 runs, each on fresh servers and datastores")
	require.Equal(t, "1.000 ms / 1.000 ms (1.00×, 0.80×–1.20× over 2 runs)", rows[6].value, "the first run measured no CPU")
	require.Equal(t, "not measured", rows[8].value)
}
