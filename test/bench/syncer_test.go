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
