// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One sweeper watches many connections from one goroutine: of 200, the
// silent half is dropped and the half that hears something stays; a
// connection closed by its owner leaves the sweeper; the end of a
// connection's context closes it.
func TestSweeperWatchesManyConnections(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const deadAfter = 300 * time.Millisecond
	before := runtime.NumGoroutine()
	s := newSweeper(ctx, deadAfter)

	const n = 100
	dead := make(chan *watchedConn, 2*n)
	var silent, chatty []*watchedConn
	var others []net.Conn
	for range n {
		for _, list := range []*[]*watchedConn{&silent, &chatty} {
			a, b := net.Pipe()
			others = append(others, b)
			c := newWatchedConn(a)
			if list == &chatty {
				// It heard something last an hour from now: never silent
				// for the test's length.
				c.lastRead.Store(time.Now().Add(time.Hour).UnixNano())
			}
			s.watch(ctx, c, func(Silence) { dead <- c })
			*list = append(*list, c)
		}
	}
	defer func() {
		for _, b := range others {
			b.Close()
		}
	}()
	require.LessOrEqual(t, runtime.NumGoroutine()-before, 1, "one goroutine for every connection")

	deadline := time.After(30 * time.Second)
	for range n {
		select {
		case c := <-dead:
			require.Contains(t, silent, c, "only the silent are dropped")
			_, err := c.Write([]byte("x"))
			require.Error(t, err, "a dropped connection is closed")
		case <-deadline:
			t.Fatalf("not every silent connection was dropped")
		}
	}
	s.mu.Lock()
	require.Len(t, s.conns, n, "the dropped connections left the sweeper")
	s.mu.Unlock()

	// Closed by its owner: it leaves the sweeper at once.
	require.NoError(t, chatty[0].Close())
	s.mu.Lock()
	require.Len(t, s.conns, n-1)
	s.mu.Unlock()

	// Its context ends: closed, and gone from the sweeper.
	cctx, ccancel := context.WithCancel(ctx)
	a, b := net.Pipe()
	defer b.Close()
	c := newWatchedConn(a)
	s.watch(cctx, c, nil)
	ccancel()
	require.Eventually(t, func() bool {
		select {
		case <-c.closed:
			return true
		default:
			return false
		}
	}, 5*time.Second, 10*time.Millisecond, "the context's end closes the connection")
	s.mu.Lock()
	_, in := s.conns[c]
	s.mu.Unlock()
	require.False(t, in)
}
