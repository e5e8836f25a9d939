// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPacedConcurrent: every call runs once, calls overlap (a slow answer
// does not hold back the next start) up to the bound and never more, and
// the first error is returned.
func TestPacedConcurrent(t *testing.T) {
	const n, bound = 40, 4
	var mu sync.Mutex
	called := map[int]int{}
	running, most := 0, 0
	full := make(chan struct{})
	took, err := pacedConcurrent(context.Background(), n, 1000, bound, func(i int) error {
		mu.Lock()
		called[i]++
		running++
		most = max(most, running)
		if running == bound {
			select {
			case <-full:
			default:
				close(full)
			}
		}
		mu.Unlock()
		// The first calls wait until bound of them run at once: one at a
		// time, the first would wait for ever.
		select {
		case <-full:
		case <-time.After(10 * time.Second):
			t.Errorf("call %d: never %d running at once", i, bound)
		}
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, took)
	require.Len(t, called, n)
	for i, c := range called {
		require.Equal(t, 1, c, "call %d", i)
	}
	require.Equal(t, bound, most)

	_, err = pacedConcurrent(context.Background(), n, 1000, bound, func(i int) error {
		if i == 3 {
			return errors.New("refused")
		}
		return nil
	})
	require.EqualError(t, err, "refused")
}

// TestBurstRows: one burst's rows read as before -repeat; over several,
// each figure is the median with the min and max, and the goal is judged
// on the median.
func TestBurstRows(t *testing.T) {
	o := syncerOptions{burstObjects: 100, burstRate: 500}
	burst := func(took time.Duration, latency time.Duration, cpu time.Duration) burstRun {
		lat := make([]time.Duration, 100)
		for i := range lat {
			lat[i] = latency
		}
		return burstRun{took: took, edge: lat, center: lat, cpu: cpuPerOp{"server": cpu, "syncer": cpu}}
	}
	one := burstRows(o, []burstRun{burst(200*time.Millisecond, 300*time.Millisecond, time.Millisecond)})
	require.Len(t, one, 6)
	require.Equal(t, "syncer: WDS create → edge ADDED at 500 creates/s p99", one[1].metric)
	require.Equal(t, "300.0 ms", one[1].value)
	require.Equal(t, "target ≤ 1 s", one[1].note)
	require.Equal(t, "100 ConfigMaps created in 200ms (500/s achieved; up to 64 creates in flight), one edge cluster", one[0].note)
	require.Equal(t, "300.0 ms / 300.0 ms", one[3].value)
	require.Equal(t, "1.000 ms / 1.000 ms / 0.000 ms / 0.000 ms", one[4].value)
	require.Equal(t, "2.000 ms", one[5].value)

	three := burstRows(o, []burstRun{
		burst(200*time.Millisecond, 300*time.Millisecond, time.Millisecond),
		burst(200*time.Millisecond, 1200*time.Millisecond, 3*time.Millisecond),
		burst(200*time.Millisecond, 900*time.Millisecond, 2*time.Millisecond),
	})
	require.Equal(t, "900.0 ms (300.0 ms–1200.0 ms over 3 runs)", three[1].value)
	require.Equal(t, "target ≤ 1 s on the median of 3 runs", three[1].note)
	require.Equal(t, "2.000 ms / 2.000 ms / 0.000 ms / 0.000 ms", three[4].value, "medians")
	require.Contains(t, three[4].note, "medians of 3 runs")
	require.Equal(t, "4.000 ms (2.000 ms–6.000 ms over 3 runs)", three[5].value)
}
