// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServerListSpreadsTheFleet(t *testing.T) {
	servers := []*server{{port: 1}, {port: 2}, {port: 3}}
	require.Equal(t, "https://127.0.0.1:1,https://127.0.0.1:2,https://127.0.0.1:3", serverList(servers, 0))
	require.Equal(t, "https://127.0.0.1:2,https://127.0.0.1:3,https://127.0.0.1:1", serverList(servers, 1))
	require.Equal(t, "https://127.0.0.1:3,https://127.0.0.1:1,https://127.0.0.1:2", serverList(servers, 5))
	first := map[string]int{}
	for i := range 300 {
		first[serverList(servers, i)[:len("https://127.0.0.1:1")]]++
	}
	require.Equal(t, map[string]int{"https://127.0.0.1:1": 100, "https://127.0.0.1:2": 100, "https://127.0.0.1:3": 100}, first)
}

func TestSplitLeaderMatchesTheWholePort(t *testing.T) {
	a, b, c := &server{port: 1234}, &server{port: 12345}, &server{port: 4321}
	servers := []*server{a, b, c}
	// The holder identity is the host, the server's URL and a suffix,
	// joined by "_": port 1234 must not match a holder on 12345.
	leader, others := splitLeader("edge-host_https://127.0.0.1:12345_x7k2q9", servers)
	require.Same(t, b, leader)
	require.Equal(t, []*server{a, c}, others)
	require.Equal(t, []*server{a, b, c}, servers, "splitLeader changed its argument")
	leader, others = splitLeader("edge-host_https://127.0.0.1:9999_x7k2q9", servers)
	require.Nil(t, leader)
	require.Len(t, others, 3)
}

// TestPauseKeepsPollsToAThird: the HA section's polls wait a second, or
// twice what the poll took, so that a poll of a busy server takes a third
// of the time at most.
func TestPauseKeepsPollsToAThird(t *testing.T) {
	for took, want := range map[time.Duration]time.Duration{
		0: time.Second, 300 * time.Millisecond: time.Second, 2 * time.Second: 4 * time.Second, 7 * time.Second: 14 * time.Second,
	} {
		require.Equal(t, want, pause(took), "after a poll of %s", took)
	}
}
