// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The noisy writers' gate: pause returns only once no writer has a request
// in flight, and lets none in until resume.
func TestNoiseGatePausesOnlyWhenNothingIsInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGate()
	require.True(t, g.enter(ctx))

	paused := make(chan struct{})
	go func() { g.pause(ctx); close(paused) }()
	require.Never(t, func() bool {
		select {
		case <-paused:
			return true
		default:
			return false
		}
	}, 50*time.Millisecond, 5*time.Millisecond, "pause returned with a request in flight")
	g.leave()
	<-paused
	require.True(t, g.paused())

	var entered atomic.Bool
	go func() { entered.Store(g.enter(ctx)) }()
	require.Never(t, entered.Load, 50*time.Millisecond, 5*time.Millisecond, "a writer got in while paused")
	g.resume()
	require.Eventually(t, entered.Load, 5*time.Second, time.Millisecond, "resume lets the writer in")
	g.leave()

	// A writer waiting at a paused gate stops when the context is done.
	g.pause(ctx)
	stopped := make(chan bool)
	go func() { stopped <- g.enter(ctx) }()
	cancel()
	g.resume()
	require.False(t, <-stopped)
}
