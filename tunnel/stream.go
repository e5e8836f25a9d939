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
func serverStream(w http.ResponseWriter, req *http.Request) (http.ResponseWriter, *http.Request, error) {
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
	br := bufio.NewReader(conn)
	inner, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	inner = inner.WithContext(req.Context())
	inner.RemoteAddr = req.RemoteAddr
	return &streamWriter{conn: conn, br: br, header: http.Header{}}, inner, nil
}

// streamWriter is the ResponseWriter of the handshake inside a stream: the
// upgrader takes the stream over (Hijack) and writes its answer itself.
type streamWriter struct {
	conn   *streamConn
	br     *bufio.Reader
	header http.Header
	status int
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

// clientStream opens the client's side of a stream tunnel through rt (the
// syncer's API transport, which authenticates the request): a POST to
// url whose body is the returned conn's writes. It fails with errNotHTTP2
// where the connection is not HTTP/2.
func clientStream(ctx context.Context, rt http.RoundTripper, url string) (net.Conn, error) {
	// Over HTTP/1.1 a POST whose body never ends would wait for its
	// response as long as the server waits for the body: a GET first says
	// which protocol the connection speaks (the server answers a GET of
	// the path with this header with 204, at once).
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
	// HTTP/2 to the server itself: a load balancer may speak HTTP/2 to
	// the syncer and HTTP/1.1 to the server.
	if presp.ProtoMajor != 2 || presp.Header.Get(StreamHeader) != ProbeHTTP2 {
		return nil, errNotHTTP2
	}
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return nil, err
	}
	req.Header.Set(StreamHeader, StreamValue)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		pw.Close()
		return nil, err
	}
	if resp.ProtoMajor != 2 {
		resp.Body.Close()
		pw.Close()
		return nil, errNotHTTP2
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		pw.Close()
		return nil, fmt.Errorf("opening the tunnel stream: %s: %s", resp.Status, msg)
	}
	return &streamConn{r: resp.Body, w: pw, closeW: pw.Close, closed: make(chan struct{})}, nil
}
