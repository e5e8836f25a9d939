// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

// A tunnel on the syncer's own HTTP/2 connection. A syncer holds one HTTP/2
// connection to the server for its API requests and watches; a WebSocket
// tunnel is a second TCP and TLS connection, so that a server of 10,000
// edges holds 20,000 sockets. Over HTTP/2 the tunnel is one more stream of
// the syncer's connection instead: a POST to Path whose request body
// carries what the syncer sends and whose response body what the server
// sends, full duplex (HTTP/2 streams are). Inside the stream the two ends
// speak the WebSocket protocol as over a connection of its own (the
// handshake, then frames), so that remotedialer, the frame meter and the
// liveness watch run unchanged.
//
// Where the connection is HTTP/1.1 (a proxy or load balancer that speaks
// no HTTP/2 to the server), a request body cannot stream beside its
// response: the syncer opens the WebSocket tunnel as before.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// StreamHeader marks a tunnel opened as an HTTP/2 stream (its value is
// StreamValue), which the server answers with 200 and then the WebSocket
// handshake inside the stream.
// A GET with StreamHeader: ProbeValue is answered 204, which tells the
// client the connection's protocol.
const (
	StreamHeader = "X-Kubestellar-Tunnel"
	StreamValue  = "stream"
	ProbeValue   = "probe"
	// ProbeHTTP2 is the probe's answer in StreamHeader where the server
	// got it over HTTP/2.
	ProbeHTTP2 = "http2"
)

// errNotHTTP2 says the connection to the server is not HTTP/2: the syncer
// falls back to a WebSocket of its own.
var errNotHTTP2 = errors.New("the connection to the server is not HTTP/2")

// streamConn is a net.Conn over an HTTP stream: reads come from r, writes
// go to w (flushed after each write), closing ends both.
type streamConn struct {
	r     io.ReadCloser
	w     io.Writer
	flush func() error
	// deadline sets the stream's deadlines (nil: they are not kept,
	// and the liveness watch ends a silent stream).
	deadline func(read, write time.Time) error
	closeW   func() error
	once     sync.Once
	closed   chan struct{}
	mu       sync.Mutex // serializes writes
}

func (c *streamConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *streamConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	n, err := c.w.Write(p)
	if err == nil && c.flush != nil {
		err = c.flush()
	}
	return n, err
}

func (c *streamConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		if c.closeW != nil {
			err = c.closeW()
		}
		if e := c.r.Close(); err == nil {
			err = e
		}
	})
	return err
}

func (c *streamConn) LocalAddr() net.Addr  { return streamAddr{} }
func (c *streamConn) RemoteAddr() net.Addr { return streamAddr{} }

func (c *streamConn) SetDeadline(t time.Time) error {
	if c.deadline == nil {
		return nil
	}
	return c.deadline(t, t)
}

func (c *streamConn) SetReadDeadline(t time.Time) error {
	if c.deadline == nil {
		return nil
	}
	return c.deadline(t, time.Time{})
}

func (c *streamConn) SetWriteDeadline(t time.Time) error {
	if c.deadline == nil {
		return nil
	}
	return c.deadline(time.Time{}, t)
}

type streamAddr struct{}

func (streamAddr) Network() string { return "http2-stream" }
func (streamAddr) String() string  { return "http2-stream" }

// serverStream makes the server's side of a stream tunnel: it answers the
// POST with 200 at once (the client waits for the response's headers
// before it sends the handshake), reads the WebSocket handshake inside the
// stream, and returns it as a request with req's context (whose user the
// server's authentication set) and a writer that hands the upgrader the
// stream as its connection.
func serverStream(w http.ResponseWriter, req *http.Request) (*streamWriter, *http.Request, error) {
	if req.ProtoMajor != 2 {
		return nil, nil, errors.New("a tunnel stream needs HTTP/2: open a WebSocket instead")
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, nil, err
	}
	// No deadlines: an HTTP/2 stream's write deadline resets the stream
	// when it passes, even with no write waiting (a WebSocket ping's
	// deadline would end the tunnel a minute later); the liveness watch
	// drops a silent tunnel instead.
	conn := &streamConn{r: req.Body, w: w, flush: rc.Flush, closed: make(chan struct{})}
	sw := &streamWriter{conn: conn, rc: rc, header: http.Header{}}
	// The handshake is read within handshakeTimeout and handshakeBytes:
	// MaxHeaderBytes does not bound what comes in a body.
	limited := &limitedReader{r: conn, n: handshakeBytes}
	sw.br = bufio.NewReader(limited)
	timer := time.AfterFunc(handshakeTimeout, func() { conn.Close() })
	inner, err := http.ReadRequest(sw.br)
	timer.Stop()
	if err != nil {
		return sw, nil, fmt.Errorf("reading the handshake inside the stream: %w", err)
	}
	limited.lift()
	inner = inner.WithContext(req.Context())
	inner.RemoteAddr = req.RemoteAddr
	return sw, inner, nil
}

// handshakeTimeout and handshakeBytes bound the handshake inside a
// stream (variables for tests).
var (
	handshakeTimeout       = 10 * time.Second
	handshakeBytes   int64 = 64 << 10
)

// limitedReader reads at most n bytes until lifted.
type limitedReader struct {
	r      io.Reader
	mu     sync.Mutex
	n      int64
	lifted bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	if !l.lifted {
		if l.n <= 0 {
			l.mu.Unlock()
			return 0, errors.New("the handshake is too large")
		}
		if int64(len(p)) > l.n {
			p = p[:l.n]
		}
	}
	l.mu.Unlock()
	n, err := l.r.Read(p)
	l.mu.Lock()
	if !l.lifted {
		l.n -= int64(n)
	}
	l.mu.Unlock()
	return n, err
}

func (l *limitedReader) lift() {
	l.mu.Lock()
	l.lifted = true
	l.mu.Unlock()
}

// streamWriter is the ResponseWriter of the handshake inside a stream: the
// upgrader takes the stream over (Hijack) and writes its answer itself.
type streamWriter struct {
	conn   *streamConn
	rc     *http.ResponseController
	br     *bufio.Reader
	header http.Header
	status int
}

// finish ends the stream before its handler returns: closed, its writes
// fail at once; a write blocked on flow control is freed by resetting the
// stream (a write deadline now), and one under way is waited for.
func (w *streamWriter) finish() {
	w.conn.Close()
	_ = w.rc.SetWriteDeadline(time.Now())
	w.conn.mu.Lock()
	w.conn.w, w.conn.flush = io.Discard, nil // nothing reaches the ResponseWriter again
	w.conn.mu.Unlock()
}

func (w *streamWriter) Header() http.Header { return w.header }

// Write and WriteHeader answer a handshake refused before the upgrade, as
// an HTTP/1.1 response inside the stream.
func (w *streamWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		resp := &http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Header: w.header, ContentLength: -1}
		_ = resp.Write(w.conn)
	}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.conn.Write(p)
}

// Hijack implements http.Hijacker.
func (w *streamWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.conn, bufio.NewReadWriter(w.br, bufio.NewWriter(w.conn)), nil
}

// errStalled is a stream whose handshake did not complete in time: a hop
// that holds request bodies back, or a server too busy to answer.
var errStalled = errors.New("the tunnel stream's handshake did not complete in time")

// clientStream opens the client's side of a stream tunnel through rt (the
// syncer's API transport, which authenticates the request): a POST to
// url whose body is the returned conn's writes. It fails with errNotHTTP2
// where the server says it did not get HTTP/2, and with errStalled where
// the response does not come in handshakeTimeout; other errors (refused,
// unauthorized, unavailable) are an attempt that failed.
func clientStream(ctx context.Context, rt http.RoundTripper, url string) (net.Conn, error) {
	// Over HTTP/1.1 a POST whose body never ends would wait for its
	// response as long as the server waits for the body: a GET first says
	// which protocol the server got (it answers a GET of the path with
	// this header with 204, at once).
	probe, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	probe.Header.Set(StreamHeader, ProbeValue)
	presp, err := rt.RoundTrip(probe)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(presp.Body, 4096))
	presp.Body.Close()
	if presp.StatusCode != http.StatusNoContent {
		return nil, fmt.Errorf("the tunnel's probe: %s", presp.Status)
	}
	// HTTP/2 to the server itself: a load balancer may speak HTTP/2 to
	// the syncer and HTTP/1.1 to the server.
	if presp.ProtoMajor != 2 || presp.Header.Get(StreamHeader) != ProbeHTTP2 {
		return nil, errNotHTTP2
	}
	sctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, url, pr)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set(StreamHeader, StreamValue)
	req.Header.Set("Content-Type", "application/octet-stream")
	stalled := time.AfterFunc(handshakeTimeout, cancel)
	resp, err := rt.RoundTrip(req)
	if !stalled.Stop() {
		err = errStalled
	}
	if err != nil {
		cancel()
		pw.Close()
		if resp != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		pw.Close()
		cancel()
		if resp.ProtoMajor != 2 {
			return nil, errNotHTTP2
		}
		return nil, fmt.Errorf("opening the tunnel stream: %s: %s", resp.Status, msg)
	}
	c := &streamConn{r: resp.Body, w: pw, closed: make(chan struct{})}
	c.closeW = func() error {
		cancel()
		return pw.Close()
	}
	// Only the handshake's deadline (SetDeadline, which the WebSocket
	// dialer sets and clears) is kept, by closing the stream when it
	// passes; reads' and writes' own deadlines are not (pings leave theirs
	// set: the liveness watch ends a silent tunnel instead).
	var mu sync.Mutex
	var timer *time.Timer
	c.deadline = func(read, write time.Time) error {
		if !read.Equal(write) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		if !read.IsZero() {
			timer = time.AfterFunc(time.Until(read), func() { c.Close() })
		}
		return nil
	}
	return c, nil
}
