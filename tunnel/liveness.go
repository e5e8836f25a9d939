// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// watchedConn records when it last received anything, and when it last
// wrote and whether a write is under way, for what a drop says.
type watchedConn struct {
	net.Conn
	lastRead  atomic.Int64
	lastWrite atomic.Int64
	// writing is when the write under way began (0: none is).
	writing   atomic.Int64
	closed    chan struct{}
	closeOnce sync.Once
	// onClose, when set, is called once, at the first close (the
	// sweeper's forgetting it). Set before the connection is shared.
	onClose func()
}

func newWatchedConn(c net.Conn) *watchedConn {
	w := &watchedConn{Conn: c, closed: make(chan struct{})}
	now := time.Now().UnixNano()
	w.lastRead.Store(now)
	w.lastWrite.Store(now)
	return w
}

// Silence is what a connection dropped for silence had last done: how
// long since it last read and wrote, and for how long a write had been
// under way (0: none was). A write under way that long says the way out
// was congested rather than the other side gone: on a tunnel, the pong
// to a ping is written from the loop that reads, so a stalled write
// stops the reads too.
type Silence struct {
	SinceRead, SinceWrite, WriteBlocked time.Duration
}

// KeysAndValues are s as structured log fields.
func (s Silence) KeysAndValues() []any {
	return []any{"sinceRead", s.SinceRead.Round(time.Millisecond), "sinceWrite", s.SinceWrite.Round(time.Millisecond),
		"writeBlocked", s.WriteBlocked.Round(time.Millisecond)}
}

// logDrop returns what logs a tunnel's drop for silence, with fields.
func logDrop(logger klog.Logger, fields ...any) func(Silence) {
	return func(s Silence) {
		logger.Info("tunnel silent too long: dropping it", slices.Concat(fields, []any{"after", DeadAfter}, s.KeysAndValues())...)
	}
}

func (c *watchedConn) silence(now time.Time) Silence {
	s := Silence{SinceRead: now.Sub(time.Unix(0, c.lastRead.Load())), SinceWrite: now.Sub(time.Unix(0, c.lastWrite.Load()))}
	if began := c.writing.Load(); began != 0 {
		s.WriteBlocked = now.Sub(time.Unix(0, began))
	}
	return s
}

func (c *watchedConn) Write(p []byte) (int, error) {
	c.writing.Store(time.Now().UnixNano())
	n, err := c.Conn.Write(p)
	c.writing.Store(0)
	if n > 0 {
		c.lastWrite.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.onClose != nil {
			c.onClose()
		}
	})
	return c.Conn.Close()
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// sweeper drops the connections it watches once nothing has arrived on
// one for deadAfter (the other side pings every few seconds), from one
// goroutine for them all. A server holds a tunnel per edge: a goroutine
// and a ticker per tunnel were 10,000 goroutines at 10,000 edges, woken
// 3,300 times a second between them, to read one clock each.
type sweeper struct {
	deadAfter time.Duration

	mu    sync.Mutex
	conns map[*watchedConn]func(Silence)
}

// newSweeper starts a sweeper, which sweeps until ctx is done.
func newSweeper(ctx context.Context, deadAfter time.Duration) *sweeper {
	s := &sweeper{deadAfter: deadAfter, conns: map[*watchedConn]func(Silence){}}
	go s.run(ctx)
	return s
}

// watch has c closed once it is silent for deadAfter, onDead hearing of
// it first, or when ctx is done: a server that shuts down, or a syncer
// that stops, drops its tunnels. c leaves the sweeper when it closes.
func (s *sweeper) watch(ctx context.Context, c *watchedConn, onDead func(Silence)) {
	var stop atomic.Pointer[func() bool]
	c.onClose = func() {
		if f := stop.Load(); f != nil {
			(*f)()
		}
		s.forget(c)
	}
	s.mu.Lock()
	s.conns[c] = onDead
	s.mu.Unlock()
	f := context.AfterFunc(ctx, func() { _ = c.Close() })
	stop.Store(&f)
	select {
	case <-c.closed:
		f() // closed before stop was stored
	default:
	}
}

func (s *sweeper) forget(c *watchedConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *sweeper) run(ctx context.Context) {
	ticker := time.NewTicker(s.deadAfter / 5)
	defer ticker.Stop()
	type drop struct {
		c      *watchedConn
		onDead func(Silence)
		s      Silence
	}
	var drops []drop
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			s.mu.Lock()
			for c, onDead := range s.conns {
				if silence := c.silence(now); silence.SinceRead > s.deadAfter {
					drops = append(drops, drop{c, onDead, silence})
					delete(s.conns, c)
				}
			}
			s.mu.Unlock()
			// Closed outside the lock: a close can wait on its write.
			for i, d := range drops {
				if d.onDead != nil {
					d.onDead(d.s)
				}
				_ = d.c.Close()
				drops[i] = drop{}
			}
			drops = drops[:0]
		}
	}
}

// watchingWriter hands the WebSocket upgrader a connection that is watched
// and, with readLimit set, whose messages are bounded (see frameMeter).
type watchingWriter struct {
	http.ResponseWriter
	ctx     context.Context
	sweeper *sweeper
	onDead  func(Silence)
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
	w.sweeper.watch(w.ctx, watched, w.onDead)
	return watched, bufio.NewReadWriter(bufio.NewReader(watched), bufio.NewWriter(watched)), nil
}
