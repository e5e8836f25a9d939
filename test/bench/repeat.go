// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"time"
)

// Some goals sit at this machine's noise: one run can meet them and the
// next miss them with nothing changed. With -repeat N the sections that
// judge such figures measure them N times, judge the goal on the median
// and show the min and max beside it, so that a reader sees how far the
// figure moves from run to run.

// spread is one figure over repeated runs.
type spread struct {
	median, min, max float64
	// runs is how many runs measured the figure (0: none did).
	runs int
	// of names what runs counts: "runs" when empty.
	of string
}

// spreadOf returns the spread of values. The median of an even number of
// values is the mean of the middle two.
func spreadOf(values []float64) spread {
	if len(values) == 0 {
		return spread{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	median := s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return spread{median: median, min: s[0], max: s[n-1], runs: n}
}

// durationSpread is spreadOf for durations, in nanoseconds: show them
// with asDuration.
func durationSpread(ds []time.Duration) spread {
	values := make([]float64, len(ds))
	for i, d := range ds {
		values[i] = float64(d)
	}
	return spreadOf(values)
}

// asDuration shows a durationSpread's values with format (ms, long).
func asDuration(format func(time.Duration) string) func(float64) string {
	return func(v float64) string { return format(time.Duration(v)) }
}

// show writes the median with format and, over more than one run, the
// min and max: "1.05× (0.98×–1.12× over 5 runs)". One run's figure reads
// as it did before -repeat.
func (s spread) show(format func(float64) string) string {
	if s.runs <= 1 {
		return format(s.median)
	}
	return fmt.Sprintf("%s (%s)", format(s.median), s.over(format))
}

// over writes the min and max: "0.98×–1.12× over 5 runs".
func (s spread) over(format func(float64) string) string {
	return fmt.Sprintf("%s–%s over %d %s", format(s.min), format(s.max), s.runs, s.unit())
}

// judged says, after a goal's verdict, that it was judged on the median:
// "" for one run.
func (s spread) judged() string {
	if s.runs <= 1 {
		return ""
	}
	return fmt.Sprintf(" on the median of %d %s", s.runs, s.unit())
}

func (s spread) unit() string {
	if s.of == "" {
		return "runs"
	}
	return s.of
}
