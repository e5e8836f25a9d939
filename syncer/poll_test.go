// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pollGrowing's waits grow by half each time and stop growing at
// pollCeiling.
func TestGrowingBackoff(t *testing.T) {
	next := growingBackoff(100 * time.Millisecond).DelayFunc()
	var got []time.Duration
	for range 9 {
		got = append(got, next())
	}
	require.Equal(t, []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 225 * time.Millisecond, 337500 * time.Microsecond,
		506250 * time.Microsecond, 759375 * time.Microsecond, pollCeiling, pollCeiling, pollCeiling}, got)
}

// pollGrowing looks at once, and stops at the first done, error or end of
// its context.
func TestPollGrowing(t *testing.T) {
	// A first wait of an hour: only a look at once returns within the
	// guard's 10 s.
	guard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	looks := 0
	require.NoError(t, pollGrowing(guard, time.Hour, func() (bool, error) { looks++; return true, nil }))
	require.Equal(t, 1, looks)

	failed := errors.New("broken")
	require.ErrorIs(t, pollGrowing(guard, time.Millisecond, func() (bool, error) { return false, failed }), failed)

	looks = 0
	require.NoError(t, pollGrowing(guard, time.Millisecond, func() (bool, error) { looks++; return looks == 5, nil }))
	require.Equal(t, 5, looks)

	ctx, stop := context.WithCancel(context.Background())
	stop()
	require.ErrorIs(t, pollGrowing(ctx, time.Hour, func() (bool, error) { return false, nil }), context.Canceled)
}
