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

// pollGrowing looks at once, then at growing intervals that stop growing
// at pollCeiling, and stops at the first done, error or end of ctx.
func TestPollGrowing(t *testing.T) {
	var at []time.Time
	start := time.Now()
	err := pollGrowing(context.Background(), 100*time.Millisecond, func() (bool, error) {
		at = append(at, time.Now())
		return len(at) == 8, nil
	})
	require.NoError(t, err)
	require.Len(t, at, 8)
	require.Less(t, at[0].Sub(start), 50*time.Millisecond, "the first look is at once")
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	// 100, 150, 225, 337, 506, 759, then the ceiling.
	require.GreaterOrEqual(t, gaps[0], 100*time.Millisecond)
	require.Greater(t, gaps[4], 2*gaps[0], "the waits grow")
	require.GreaterOrEqual(t, gaps[6], pollCeiling)
	require.Less(t, gaps[6], pollCeiling+500*time.Millisecond, "up to the ceiling, not past it")

	failed := errors.New("broken")
	require.ErrorIs(t, pollGrowing(context.Background(), time.Millisecond, func() (bool, error) { return false, failed }), failed)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, pollGrowing(ctx, time.Millisecond, func() (bool, error) { return false, nil }), context.DeadlineExceeded)
}
