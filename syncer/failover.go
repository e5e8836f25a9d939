// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"net/http"
	"net/url"
	"sync/atomic"

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
}

func newServers(list []string, logger klog.Logger) (*servers, error) {
	s := &servers{logger: logger}
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
		i := s.current.Load()
		u := s.urls[i]
		out := req.Clone(req.Context())
		out.URL.Scheme, out.URL.Host, out.Host = u.Scheme, u.Host, ""
		resp, err := rt.RoundTrip(out)
		if err != nil && req.Context().Err() == nil {
			s.failed(i, err)
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
