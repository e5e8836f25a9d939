// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"crypto/tls"
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

	servers := c.Servers
	headers := http.Header{"Authorization": []string{"Bearer " + c.BearerToken}}
	backoff := newBackoff()
	lastErr := ""
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
				go watched.watch(ctx, DeadAfter, func() { logger.Info("tunnel silent too long: dropping it", "after", DeadAfter) })
				return watched, nil
			},
		}
		err := remotedialer.ConnectToProxyWithDialer(ctx, wsURL, headers,
			func(proto, address string) bool { return proto == "tcp" && address == EdgeAPIAddress },
			dialer, edge.dial,
			func(context.Context, *remotedialer.Session) error {
				lastErr = ""
				logger.Info("tunnel open", "server", server)
				if c.OnChange != nil {
					c.OnChange(true)
				}
				return nil
			})
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
