// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestMain lets the test binary be the live edges' simulator, as the
// bench's own binary is when the section starts it again.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "-simulate-edges" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err := runSimulatedEdges(ctx, os.Args[2])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "simulator:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLiveEdges runs the live edges section small against the built
// binary: real syncers (each its own token, tunnel and mailbox watch)
// against edge clusters in memory connect, stay connected at rest, get
// every placed copy and then an update, all through the server.
func TestLiveEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server and a simulator process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rows, err := liveEdgesBench(ctx, harness.Binary(t), liveOptions{edges: 4, objects: 5, rest: 6 * time.Second}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.metric] = r.value
	}
	if v := got["edges shown disconnected, 4 live edges at rest"]; v != "0" {
		t.Errorf("edges shown disconnected at rest: %q, want 0 (rows: %v)", v, rows)
	}
	for _, metric := range []string{"4 syncers started → all connected", "fan-out: 5 ConfigMaps × 4 live edges", "one update → all 4 live edges, max"} {
		if v := got[metric]; v == "" || strings.HasPrefix(v, "-") {
			t.Errorf("%s: %q, want a duration (rows: %v)", metric, v, rows)
		}
	}
}

// TestConnectLimit: a fleet has 10 minutes to connect, a larger one 100 ms
// an edge.
func TestConnectLimit(t *testing.T) {
	require.Equal(t, 10*time.Minute, connectLimit(1000))
	require.Equal(t, 10*time.Minute, connectLimit(6000))
	require.Equal(t, 16*time.Minute+40*time.Second, connectLimit(10000))
}
