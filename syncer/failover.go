// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// servers are the URLs of the servers of one cluster; the syncer uses one
// at a time and moves to the next when it cannot reach it. The servers
// share one datastore, so resource versions carry over: informers resume
// their watches on the next server without listing again.
type servers struct {
	urls    []*url.URL
	current atomic.Int32
	logger  klog.Logger
	// outage is the server's while it cannot be reached; nil while it
	// can. probeEvery (the first probe's wait) and waitAtMost are
	// reachProbe and reachWait.
	outage                 atomic.Pointer[outage]
	probeEvery, waitAtMost time.Duration
}

// While the only server cannot be reached (it is restarting), a request
// waits until the server is ready again (its /readyz, which anyone may
// read, says ok), for at most reachWait, rather than failing at once.
// client-go's caches back off after each failed attempt, doubling up to
// 30 s with as much again of jitter: after a restart of 20 s under 1,000
// live edges the last syncer's watches came back more than a minute after
// the server was ready (make bench, live edges). Waiting, a cache's
// attempt goes through as soon as the server is ready, and none meets a
// server that is up but not ready yet. With several servers the next one
// is used instead (failed).
//
// The probes back off too, from reachProbe doubling to reachProbeCap, each
// wait jittered between half and all of it: the whole fleet probes the
// one server that is starting. At a probe every 500 ms, 3,000 live edges
// sent the starting server 6,000 probes a second, most of them a TLS
// handshake on a connection the last probe had given up on, and it never
// became ready; at the cap, 10,000 edges send about 1,700 a second, on
// connections that stay open once it answers.
const (
	reachProbe    = 500 * time.Millisecond
	reachProbeCap = 8 * time.Second
	reachWait     = time.Minute
)

// outage is a time the server could not be reached; back is closed when
// it can again, or when the syncer stops waiting for it (reachWait).
type outage struct {
	back chan struct{}
}

func newServers(list []string, logger klog.Logger) (*servers, error) {
	s := &servers{logger: logger, probeEvery: reachProbe, waitAtMost: reachWait}
	for _, raw := range list {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, err
		}
		s.urls = append(s.urls, u)
	}
	return s, nil
}

// URL is the server in use.
func (s *servers) URL() string { return s.urls[s.current.Load()].String() }

// failed moves on from server i, unless another request already did.
func (s *servers) failed(i int32, err error) {
	if len(s.urls) < 2 {
		return
	}
	next := (i + 1) % int32(len(s.urls))
	if s.current.CompareAndSwap(i, next) {
		s.logger.Info("cannot reach the server; moving to the next", "from", s.urls[i].Host, "to", s.urls[next].Host, "err", err.Error())
	}
}

// wrap sends requests to the server in use (keeping their paths), and
// moves on when a request cannot reach it.
func (s *servers) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		s.await(req.Context())
		i := s.current.Load()
		u := s.urls[i]
		out := req.Clone(req.Context())
		out.URL.Scheme, out.URL.Host, out.Host = u.Scheme, u.Host, ""
		resp, err := rt.RoundTrip(out)
		if err != nil && req.Context().Err() == nil {
			if len(s.urls) == 1 && unreachable(err) {
				s.down(rt, u)
			}
			s.failed(i, err)
		}
		return resp, err
	})
}

// await waits, during an outage, until the server is back or ctx ends.
func (s *servers) await(ctx context.Context) {
	o := s.outage.Load()
	if o == nil {
		return
	}
	select {
	case <-o.back:
	case <-ctx.Done():
	}
}

// down notes that server u cannot be reached, and probes it (through rt)
// until it is ready again, for at most waitAtMost.
func (s *servers) down(rt http.RoundTripper, u *url.URL) {
	o := &outage{back: make(chan struct{})}
	if !s.outage.CompareAndSwap(nil, o) {
		return // noted already
	}
	s.logger.Info("the server cannot be reached: requests wait until it is ready again", "server", u.Host, "atMost", s.waitAtMost)
	go func() {
		defer func() {
			s.outage.CompareAndSwap(o, nil)
			close(o.back)
		}()
		deadline := time.Now().Add(s.waitAtMost)
		for every := s.probeEvery; time.Now().Before(deadline); every = min(2*every, max(s.probeEvery, reachProbeCap)) {
			time.Sleep(every/2 + rand.N(every/2+1))
			if ready(rt, u) {
				s.logger.Info("the server is ready again", "server", u.Host)
				return
			}
		}
	}()
}

// ready tells whether the server's /readyz says ok.
func ready(rt http.RoundTripper, u *url.URL) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	probe := *u
	probe.Path, probe.RawQuery = "/readyz", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe.String(), nil)
	if err != nil {
		return false
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK
}

// unreachable tells whether a request's error says the server is not
// there (not listening, or the connection broke), rather than refusing
// the syncer (TLS, a proxy's answer): only then is it worth waiting for.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &op) && op.Op == "dial"
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
