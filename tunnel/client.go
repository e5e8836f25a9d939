// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rancher/remotedialer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Client keeps a syncer's tunnel open.
type Client struct {
	// Servers are the base URLs, https://HOST:PORT, of the servers of one
	// cluster (usually one), used in turn: the next one when the tunnel to
	// one cannot be opened or closes.
	Servers []string
	// BearerToken is the syncer's token.
	BearerToken string
	// TLS trusts the server's CA.
	TLS *tls.Config
	// Proxy picks the HTTP proxy for the connection (nil: none).
	Proxy func(*http.Request) (*url.URL, error)
	// Edge serves what the server asks of the edge cluster's API.
	Edge http.Handler
	// OnChange (may be nil) hears when the tunnel opens and closes.
	OnChange func(open bool)
	// Transport (may be nil) is the syncer's API transport, which
	// authenticates its requests: with it the tunnel is a stream of the
	// syncer's HTTP/2 connection rather than a connection of its own,
	// unless the connection turns out not to be HTTP/2 (stream.go).
	Transport http.RoundTripper
}

// Run keeps the tunnel open until ctx is done, reconnecting with backoff
// and jitter (short: a server restart should see every tunnel back within
// seconds).
func (c *Client) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	edge := newPipeListener()
	srv := &http.Server{Handler: c.Edge, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(edge) }()
	defer srv.Close()

	// One sweeper for the tunnels this run opens, one after another.
	sweeper := newSweeper(ctx, DeadAfter)
	servers := c.Servers
	headers := http.Header{"Authorization": []string{"Bearer " + c.BearerToken}}
	backoff := newBackoff()
	lastErr := ""
	streams := c.Transport != nil
	stalls := 0 // streams in a row whose handshake did not complete
	for attempt := 0; ctx.Err() == nil; attempt++ {
		server := servers[attempt%len(servers)]
		wsURL := "wss://" + strings.TrimPrefix(server, "https://") + Path
		started := time.Now()
		dialer := &websocket.Dialer{
			Proxy:            c.Proxy,
			TLSClientConfig:  c.TLS,
			HandshakeTimeout: 10 * time.Second,
			NetDialContext: func(dctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}).DialContext(dctx, network, addr)
				if err != nil {
					return nil, err
				}
				watched := newWatchedConn(conn)
				sweeper.watch(ctx, watched, logDrop(logger))
				return watched, nil
			},
		}
		auth := func(proto, address string) bool { return proto == "tcp" && address == EdgeAPIAddress }
		opened := false
		onConnect := func(context.Context, *remotedialer.Session) error {
			opened = true
			lastErr = ""
			logger.Info("tunnel open", "server", server, "stream", streams)
			if c.OnChange != nil {
				c.OnChange(true)
			}
			return nil
		}
		var err error
		if streams {
			err = c.runStream(ctx, sweeper, server, wsURL, auth, edge.dial, onConnect)
			switch {
			case opened:
				stalls = 0
			case errors.Is(err, errNotHTTP2):
				// Not HTTP/2 to the server: a WebSocket of its own from
				// now on.
				logger.Info("the tunnel cannot be a stream of the API connection: it is a WebSocket of its own", "server", server, "err", errString(err))
				streams = false
				attempt--
				continue
			case errors.Is(err, errStalled) || errors.Is(err, errHandshakeStalled):
				// A hop that holds request bodies back looks like this
				// every time; a busy server, now and then.
				if stalls++; stalls >= 3 {
					logger.Info("the tunnel's streams stall: it is a WebSocket of its own", "server", server, "err", errString(err))
					streams = false
					attempt--
					continue
				}
			}
		} else {
			err = remotedialer.ConnectToProxyWithDialer(ctx, wsURL, headers, auth, dialer, edge.dial, onConnect)
		}
		if time.Since(started) > DeadAfter {
			backoff = newBackoff() // it was up for a while: come back fast
			attempt--              // and to the same server first
		}
		if ctx.Err() != nil {
			break
		}
		if lastErr == "" && c.OnChange != nil {
			c.OnChange(false)
		}
		if msg := errString(err); msg != lastErr {
			logger.Info("tunnel closed; reconnecting", "err", msg)
			lastErr = msg
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff.Step()):
		}
	}
	edge.Close()
}

// errHandshakeStalled is a WebSocket handshake inside a stream that got no
// answer.
var errHandshakeStalled = errors.New("the handshake inside the tunnel stream got no answer")

// runStream holds one tunnel as a stream of the syncer's HTTP/2
// connection until it closes.
func (c *Client) runStream(ctx context.Context, sweeper *sweeper, server, wsURL string, auth remotedialer.ConnectAuthorizer,
	dial remotedialer.Dialer, onConnect func(context.Context, *remotedialer.Session) error) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := clientStream(ctx, c.Transport, server+Path)
	if err != nil {
		return err
	}
	watched := newWatchedConn(conn)
	sweeper.watch(ctx, watched, logDrop(logger))
	defer watched.Close()
	// The stream is already TLS (the connection's): the handshake inside
	// it is plain.
	u, err := url.Parse(wsURL)
	if err != nil {
		return err
	}
	u.Scheme = "ws"
	// The handshake is bounded: a hop that holds the stream's body back
	// never answers it, and the client then opens a WebSocket instead.
	inner := websocket.Dialer{HandshakeTimeout: 10 * time.Second,
		NetDialContext: func(context.Context, string, string) (net.Conn, error) { return watched, nil }}
	ws, resp, err := inner.DialContext(ctx, u.String(), nil)
	if err != nil {
		if resp != nil {
			// Refused inside the stream (429: the token holds its
			// tunnels; 503: the server drains): a failed attempt.
			resp.Body.Close()
			return fmt.Errorf("the tunnel's handshake: %s", resp.Status)
		}
		if ctx.Err() == nil {
			return fmt.Errorf("%w: %v", errHandshakeStalled, err)
		}
		return err
	}
	session := remotedialer.NewClientSessionWithDialer(auth, ws, dial)
	defer session.Close()
	if err := onConnect(ctx, session); err != nil {
		return err
	}
	_, err = session.Serve(ctx)
	return err
}

func newBackoff() wait.Backoff {
	// At most 1.5 s plus half of it as jitter: back within about 2 s of a
	// server's return.
	return wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 1500 * time.Millisecond}
}

func errString(err error) string {
	if err == nil {
		return "closed by the server"
	}
	return err.Error()
}

// pipeListener hands in-memory connections to an http.Server: what the
// server dials through the tunnel is served here.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return EdgeAPIAddress }

// EdgeHandler serves requests that come through the tunnel from the edge
// cluster's API, with the syncer's own credentials for it.
func EdgeHandler(edge *rest.Config) (http.Handler, error) {
	rt, err := rest.TransportFor(edge)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(edge.Host)
	if err != nil {
		return nil, err
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
		},
		Transport:     rt,
		BufferPool:    &bufferPool{},
		FlushInterval: -1,
	}, nil
}
