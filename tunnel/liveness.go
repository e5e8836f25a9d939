// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// watchedConn records when it last received anything.
type watchedConn struct {
	net.Conn
	lastRead  atomic.Int64
	closed    chan struct{}
	closeOnce sync.Once
}

func newWatchedConn(c net.Conn) *watchedConn {
	w := &watchedConn{Conn: c, closed: make(chan struct{})}
	w.lastRead.Store(time.Now().UnixNano())
	return w
}

func (c *watchedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// watch closes the connection once nothing has arrived for deadAfter (the
// other side pings every few seconds), or when ctx is done: a server that
// shuts down, or a syncer that stops, drops its tunnels.
func (c *watchedConn) watch(ctx context.Context, deadAfter time.Duration, onDead func()) {
	ticker := time.NewTicker(deadAfter / 5)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			c.Close()
			return
		case <-c.closed:
			return
		case <-ticker.C:
			if time.Since(time.Unix(0, c.lastRead.Load())) > deadAfter {
				if onDead != nil {
					onDead()
				}
				c.Close()
				return
			}
		}
	}
}

// watchingWriter hands the WebSocket upgrader a connection that is watched
// and, with readLimit set, whose messages are bounded (see frameMeter).
type watchingWriter struct {
	http.ResponseWriter
	ctx       context.Context
	deadAfter time.Duration
	onDead    func()
	// readLimit bounds each WebSocket message read (0: no bound);
	// onReadFailed hears why a read failed the bound, before the
	// connection closes.
	readLimit    int64
	onReadFailed func(error)
}

// Hijack implements http.Hijacker.
func (w *watchingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw != nil && brw.Reader.Buffered() > 0 {
		conn.Close()
		return nil, nil, errors.New("the client sent data before the handshake completed")
	}
	if w.readLimit > 0 {
		conn = newMeteredConn(conn, w.readLimit, w.onReadFailed)
	}
	watched := newWatchedConn(conn)
	go watched.watch(w.ctx, w.deadAfter, w.onDead)
	return watched, bufio.NewReadWriter(bufio.NewReader(watched), bufio.NewWriter(watched)), nil
}
