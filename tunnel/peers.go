// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// ForwardedHeader marks an edge request one server forwarded to another;
// the other does not forward it again.
const ForwardedHeader = "X-Kubestellar-Forwarded-By"

// Peers lets a server that does not hold a SyncTarget's tunnel forward
// edge requests to the server of the same cluster that does (several
// servers on one datastore; a syncer holds one tunnel, to one of them).
type Peers struct {
	// Self is this server's advertised URL.
	Self string
	// Holder returns the URL of the server holding the tunnel of
	// inventory/syncTarget, "" when none is known.
	Holder func(ctx context.Context, inventorySpace, syncTarget string) (string, error)
	// Token is the cluster's admin token, which every server accepts. The
	// edge proxy serves admins only, and this server has authorized the
	// caller before forwarding.
	Token string

	transport http.RoundTripper
}

// NewPeers returns Peers whose connections verify the other servers'
// certificates with the cluster's CA (caPEM).
func NewPeers(self string, caPEM []byte, token string, holder func(ctx context.Context, inventorySpace, syncTarget string) (string, error)) (*Peers, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no certificate in the cluster CA")
	}
	return &Peers{Self: self, Holder: holder, Token: token, transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		// HTTP/1.1 only: exec and port-forward may upgrade over SPDY,
		// which HTTP/2 cannot carry.
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}}, nil
}

// forward sends an edge request on to the server holding the tunnel. It
// returns false, having written nothing, when there is none to send to.
// buffers lends the proxy its copy buffer.
func (p *Peers) forward(w http.ResponseWriter, req *http.Request, inv, st string, buffers httputil.BufferPool) bool {
	if req.Header.Get(ForwardedHeader) != "" {
		return false // one hop only
	}
	holder, err := p.Holder(req.Context(), inv, st)
	if err != nil || holder == "" || holder == p.Self {
		return false
	}
	target, err := url.Parse(holder)
	if err != nil || target.Scheme != "https" || target.Host == "" {
		return false
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.Host = target.Host
			for h := range pr.Out.Header {
				if strings.HasPrefix(h, "Impersonate-") {
					pr.Out.Header.Del(h)
				}
			}
			pr.Out.Header.Set("Authorization", "Bearer "+p.Token)
			pr.Out.Header.Set(ForwardedHeader, p.Self)
		},
		Transport:     p.transport,
		BufferPool:    buffers,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeStatus(w, http.StatusBadGateway, fmt.Sprintf("SyncTarget %s/%s: reaching %s, the server holding its tunnel: %v", inv, st, holder, err))
		},
	}
	proxy.ServeHTTP(w, req)
	return true
}
