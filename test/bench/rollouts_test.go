// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRolloutRows(t *testing.T) {
	const n, m = 100, 2
	// result is one strategy's run: every edge has the update after
	// arrival, the canary's edge (the first) after canary.
	result := func(place, placeCPU, updateCPU time.Duration, canary, arrival time.Duration) *rolloutResult {
		r := &rolloutResult{place: place, update: arrival, placeCPU: placeCPU, updateCPU: updateCPU}
		for i := range n {
			if i == 0 {
				r.arrivals = append(r.arrivals, canary)
			} else {
				r.arrivals = append(r.arrivals, arrival)
			}
		}
		return r
	}
	stalled := func(r *rolloutResult) *rolloutResult {
		r.stalls = 1 // of 100 edges
		return r
	}
	value := func(rows []row, prefix string) row {
		for _, r := range rows {
			if strings.HasPrefix(r.metric, prefix) {
				return r
			}
		}
		t.Fatalf("no row %q in %v", prefix, rows)
		return row{}
	}

	for _, tt := range []struct {
		name                   string
		alls, progs            []*rolloutResult
		placeRatio, placeNote  string
		updateRatio, canary    string
		placeAll, allCPUOfCopy string
	}{
		{
			name:       "one run reads as before -repeat",
			alls:       []*rolloutResult{result(2*time.Second, 200*time.Millisecond, 100*time.Millisecond, 0, time.Second)},
			progs:      []*rolloutResult{result(4*time.Second, 210*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second)},
			placeRatio: "1.05×", placeNote: "target ≤ 1.10×",
			updateRatio: "1.50×", canary: "300.0 ms",
			placeAll: "2000.0 ms", allCPUOfCopy: "1000 µs server CPU per copy",
		},
		{
			name: "three runs: medians with min and max, All's CPU at rest left out",
			alls: []*rolloutResult{
				result(2*time.Second, 200*time.Millisecond, 100*time.Millisecond, 0, time.Second),
				result(3*time.Second, 100*time.Millisecond, 0, 0, time.Second),
				result(4*time.Second, 400*time.Millisecond, 100*time.Millisecond, 0, time.Second),
			},
			progs: []*rolloutResult{
				result(4*time.Second, 240*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
				result(4*time.Second, 100*time.Millisecond, 150*time.Millisecond, 500*time.Millisecond, 3*time.Second),
				result(4*time.Second, 400*time.Millisecond, 110*time.Millisecond, 400*time.Millisecond, 3*time.Second),
			},
			// The ratios are of the first pair (340 ÷ 300, 300 ÷ 100);
			// the third run has no pair.
			placeRatio: "1.13×", placeNote: "target ≤ 1.10×",
			updateRatio: "3.00×", canary: "400.0 ms (300.0 ms–500.0 ms over 3 runs)",
			placeAll: "3000.0 ms (2000.0 ms–4000.0 ms over 3 runs)", allCPUOfCopy: "1000 µs (500 µs–2000 µs over 3 runs) server CPU per copy",
		},
		{
			name: "four runs: the ratio per pair, medians with min and max, a pair with All's CPU at rest left out",
			alls: []*rolloutResult{
				// The first of a pair measured on an emptier fleet
				// than the second: the pair's sum evens it out.
				result(2*time.Second, 100*time.Millisecond, 100*time.Millisecond, 0, time.Second),
				result(2*time.Second, 300*time.Millisecond, 100*time.Millisecond, 0, time.Second),
				result(2*time.Second, 100*time.Millisecond, 0, 0, time.Second),
				result(2*time.Second, 300*time.Millisecond, 0, 0, time.Second),
			},
			progs: []*rolloutResult{
				result(4*time.Second, 300*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
				result(4*time.Second, 100*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
				result(4*time.Second, 300*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
				result(4*time.Second, 180*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
			},
			placeRatio: "1.10× (1.00×–1.20× over 2 pairs of runs)", placeNote: "target ≤ 1.10× on the median of 2 pairs of runs",
			updateRatio: "1.50×", canary: "300.0 ms (300.0 ms–300.0 ms over 4 runs)",
			placeAll: "2000.0 ms (2000.0 ms–2000.0 ms over 4 runs)", allCPUOfCopy: "1000 µs (500 µs–1500 µs over 4 runs) server CPU per copy",
		},
		{
			name: "four runs, the server stalled in the second pair: left out of the ratios and said",
			alls: []*rolloutResult{
				result(2*time.Second, 100*time.Millisecond, 100*time.Millisecond, 0, time.Second),
				result(2*time.Second, 300*time.Millisecond, 100*time.Millisecond, 0, time.Second),
				result(2*time.Second, 100*time.Millisecond, 100*time.Millisecond, 0, time.Second),
				stalled(result(9*time.Second, 900*time.Millisecond, 100*time.Millisecond, 0, time.Second)),
			},
			progs: []*rolloutResult{
				result(4*time.Second, 300*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
				result(4*time.Second, 100*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
				result(4*time.Second, 300*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
				result(4*time.Second, 200*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond, 3*time.Second),
			},
			placeRatio: "1.00×", placeNote: "target ≤ 1.10×; left out, the server stalled: 0.50×",
			updateRatio: "1.50×", canary: "300.0 ms (300.0 ms–300.0 ms over 4 runs)",
			placeAll: "2000.0 ms (2000.0 ms–9000.0 ms over 4 runs)", allCPUOfCopy: "1000 µs (500 µs–4500 µs over 4 runs) server CPU per copy",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := rolloutRows(n, m, tt.alls, tt.progs)
			require.NoError(t, err)
			require.Len(t, rows, 7)
			place := value(rows, "server CPU per copy placed, Progressive ÷ All")
			require.Equal(t, tt.placeRatio, place.value)
			require.Equal(t, tt.placeNote, place.note)
			require.Equal(t, tt.updateRatio, value(rows, "server CPU per edge for one update, Progressive ÷ All").value)
			require.Equal(t, tt.canary, value(rows, "one ConfigMap updated → canary wave (1 edges), Progressive, p50").value)
			all := value(rows, "place 2 ConfigMaps × 100 live edges, All")
			require.Equal(t, tt.placeAll, all.value)
			require.Contains(t, all.note, tt.allCPUOfCopy)
		})
	}

	require.False(t, (&rolloutResult{stalls: 9}).stalled(1000), "a queue's tail")
	require.True(t, (&rolloutResult{stalls: 10}).stalled(1000), "1 % of the edges")

	_, err := rolloutRows(50, m, []*rolloutResult{result(0, 0, 0, 0, 0)}, []*rolloutResult{{arrivals: make([]time.Duration, 50)}})
	require.ErrorContains(t, err, "no edge of 50 is in the canary wave")
}
