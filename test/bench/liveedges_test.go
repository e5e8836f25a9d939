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
	for _, metric := range []string{"4 syncers started → all connected", "fan-out: 5 ConfigMaps × 4 live edges", "one update → all 4 live edges, max",
		"status: every edge reports its 5 objects once → every CombinedStatus final"} {
		if v := got[metric]; v == "" || strings.HasPrefix(v, "-") {
			t.Errorf("%s: %q, want a duration (rows: %v)", metric, v, rows)
		}
	}
}

// TestConnectLimit: a fleet has 10 minutes to connect, a larger one 100 ms
// an edge, and a slow start 5 minutes after its last syncer started.
func TestConnectLimit(t *testing.T) {
	require.Equal(t, 10*time.Minute, connectLimit(1000, 0))
	require.Equal(t, 10*time.Minute, connectLimit(6000, 0))
	require.Equal(t, 16*time.Minute+40*time.Second, connectLimit(10000, 0))
	require.Equal(t, 16*time.Minute+40*time.Second, connectLimit(10000, 100))
	require.Equal(t, 21*time.Minute+40*time.Second, connectLimit(10000, 10))
}

// TestStartPacing: the simulators together start the fleet at the rate
// asked, each starting its own share in turn.
func TestStartPacing(t *testing.T) {
	require.Zero(t, startEvery(0, 4), "0: all at once")
	// 4 simulators at 200 a second: each starts one every 20 ms.
	every := startEvery(200, 4)
	require.Equal(t, 20*time.Millisecond, every)
	require.Zero(t, startDelay(0, every))
	// A simulator's 2,500th edge starts 50 s in: 10,000 in 50 s, 200 a second.
	require.Equal(t, 49980*time.Millisecond, startDelay(2499, every))
	require.Equal(t, time.Second, startEvery(1, 1))

	// The connect rows say the pace, and nothing when all start at once.
	require.Empty(t, liveOptions{}.startedNote(10000))
	require.Equal(t, ", started 15 a second (the last 666.6 s after the first)", liveOptions{startRate: 15}.startedNote(10000))
}

func TestMarkedLines(t *testing.T) {
	log := `I1206 19:01:02.000000 1 handler.go:1] "Request" verb="GET"
E1206 19:01:03.000000 1 timeout.go:142] post-timeout activity - time-elapsed: 31s, PUT "/spaces/x" result: <nil>
E1206 19:01:03.100000 1 wrap.go:53] "Post-timeout activity" timeElapsed="31.2s" method="PUT"
I1206 19:01:04.000000 1 maintenance.go:130] "datastore maintenance round was slow; writes wait while it holds the database" took="34s"
I1206 19:01:05.000000 1 other.go:1] "nothing to see"
`
	n, first := markedLines(strings.NewReader(log), stallMarks, 1)
	require.Equal(t, 1, n)
	require.Equal(t, []string{`E1206 19:01:03.100000 1 wrap.go:53] "Post-timeout activity" timeElapsed="31.2s" method="PUT"`}, first)
	n, _ = markedLines(strings.NewReader(log), maintenanceMarks, 3)
	require.Equal(t, 1, n)
	n, first = markedLines(strings.NewReader("a quiet log\n"), stallMarks, 3)
	require.Zero(t, n)
	require.Empty(t, first)
}

// TestLagProbe: a tick that ran late is noted, the next is due a tick
// after it ran, and take returns the worst since the last take.
func TestLagProbe(t *testing.T) {
	var p lagProbe
	t0 := time.Unix(1000, 0)
	next := p.tick(t0, t0.Add(3*time.Second))
	require.Equal(t, t0.Add(3*time.Second+lagTick), next)
	next = p.tick(next, next.Add(time.Millisecond))
	p.tick(next, next.Add(-time.Millisecond)) // early: not late at all
	require.Equal(t, 3*time.Second, p.take())
	require.Zero(t, p.take())
	p.tick(next, next.Add(time.Second))
	require.Equal(t, time.Second, p.take())
}

// The simulators run at nice 0 while the fleet takes at most two of
// them, at 10 beyond, and at what -sim-nice says when it is given.
func TestNiceFor(t *testing.T) {
	auto := liveOptions{nice: -1}
	for edges, want := range map[int]int{1: 0, 1000: 0, 2 * simEdgesPerProcess: 0, 2*simEdgesPerProcess + 1: 10, 10000: 10} {
		if got := auto.niceFor(edges); got != want {
			t.Errorf("niceFor(%d) = %d, want %d", edges, got, want)
		}
	}
	for _, given := range []int{0, 5, 19} {
		if got := (liveOptions{nice: given}).niceFor(10000); got != given {
			t.Errorf("-sim-nice %d: niceFor(10000) = %d", given, got)
		}
	}
}
