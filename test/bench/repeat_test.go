// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSpread(t *testing.T) {
	for _, tt := range []struct {
		name          string
		values        []float64
		want          spread
		shown, judged string
	}{
		{name: "no run", want: spread{}, shown: "0.00×"},
		{name: "one run reads as before -repeat", values: []float64{1.05}, want: spread{median: 1.05, min: 1.05, max: 1.05, runs: 1}, shown: "1.05×"},
		{name: "two runs: the mean of both", values: []float64{1.3, 1.1}, want: spread{median: 1.2, min: 1.1, max: 1.3, runs: 2},
			shown: "1.20× (1.10×–1.30× over 2 runs)", judged: " on the median of 2 runs"},
		{name: "odd runs, unsorted: the middle one", values: []float64{1.12, 0.98, 1.05, 1.40, 1.01}, want: spread{median: 1.05, min: 0.98, max: 1.40, runs: 5},
			shown: "1.05× (0.98×–1.40× over 5 runs)", judged: " on the median of 5 runs"},
		{name: "even runs: the mean of the middle two", values: []float64{4, 1, 3, 2}, want: spread{median: 2.5, min: 1, max: 4, runs: 4},
			shown: "2.50× (1.00×–4.00× over 4 runs)", judged: " on the median of 4 runs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.values...)
			got := spreadOf(tt.values)
			require.InDelta(t, tt.want.median, got.median, 1e-9)
			require.Equal(t, tt.want.min, got.min)
			require.Equal(t, tt.want.max, got.max)
			require.Equal(t, tt.want.runs, got.runs)
			require.Equal(t, tt.shown, got.show(times))
			require.Equal(t, tt.judged, got.judged())
			require.Equal(t, in, tt.values, "the caller's values keep their order")
		})
	}
}

func TestDurationSpread(t *testing.T) {
	s := durationSpread([]time.Duration{3 * time.Second, 12 * time.Second, 2 * time.Second})
	require.Equal(t, "3000.0 ms (2000.0 ms–12.0 s over 3 runs)", s.show(asDuration(long)))
	require.Equal(t, "1.5 ms", durationSpread([]time.Duration{1500 * time.Microsecond}).show(asDuration(ms)))
}
