// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/jointoken"
)

func TestFailover(t *testing.T) {
	answer := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name+" "+r.URL.Path)
		}))
	}
	a, b := answer("a"), answer("b")
	defer b.Close()
	s, err := newServers([]string{a.URL, b.URL}, klog.Background())
	require.NoError(t, err)
	client := &http.Client{Transport: s.wrap(http.DefaultTransport)}
	get := func() (string, error) {
		// The request names the first server; the wrapper sends it to the one in use.
		resp, err := client.Get(a.URL + "/spaces/mb/api")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body), nil
	}
	got, err := get()
	require.NoError(t, err)
	require.Equal(t, "a /spaces/mb/api", got)

	a.Close()
	_, err = get()
	require.Error(t, err, "the request in flight fails")
	require.Equal(t, b.URL, s.URL(), "and the syncer moves to the next server")
	got, err = get()
	require.NoError(t, err)
	require.Equal(t, "b /spaces/mb/api", got, "keeping the path")

	one, err := newServers([]string{b.URL}, klog.Background())
	require.NoError(t, err)
	one.failed(0, io.EOF)
	require.Equal(t, b.URL, one.URL(), "with one server there is nowhere to go")
}

// Requests to the center are bounded in time; the caches' lists and
// watches are not, or every watch would end with the bound and start
// again.
func TestCachesWatchWithoutTheRequestTimeout(t *testing.T) {
	srv, err := newServers([]string{"https://center.example:6443"}, klog.Background())
	require.NoError(t, err)
	base := baseConfig(&Options{}, jointoken.Token{}, nil, srv)
	require.Equal(t, 30*time.Second, base.Timeout, "a request gives up after 30 s")
	mailbox := spaceConfig(base, "inv1-mb-1")
	caches := watchConfig(mailbox)
	require.Zero(t, caches.Timeout, "a cache's watch lasts until the server ends it")
	require.Equal(t, mailbox.Host, caches.Host)
	require.Equal(t, 30*time.Second, mailbox.Timeout, "the config it is made from is unchanged")
}

// TestRequestsWaitForARestartingServer: once the only server cannot be
// reached, a request waits until its /readyz says ok again (not failing at
// once, as client-go's caches would then back off for up to a minute), and
// gives up waiting with its context or after waitAtMost.
func TestRequestsWaitForARestartingServer(t *testing.T) {
	var up, isReady atomic.Bool
	var served atomic.Int64
	rt := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if !up.Load() {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		code := http.StatusOK
		if req.URL.Path == "/readyz" && !isReady.Load() {
			code = http.StatusInternalServerError
		} else if req.URL.Path != "/readyz" {
			served.Add(1)
		}
		return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
	})
	s, err := newServers([]string{"https://center.example:6443"}, klog.Background())
	require.NoError(t, err)
	s.probeEvery, s.waitAtMost = 10*time.Millisecond, time.Minute
	client := &http.Client{Transport: s.wrap(rt)}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://center.example:6443/api", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.Error(t, get(context.Background()), "the request that finds the server gone fails")

	done := make(chan error, 1)
	go func() { done <- get(context.Background()) }()
	up.Store(true) // listening, not ready
	select {
	case err := <-done:
		t.Fatalf("a request went through before the server was ready: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.Zero(t, served.Load())
	isReady.Store(true)
	select {
	case err := <-done:
		require.NoError(t, err, "it goes through once the server is ready")
	case <-time.After(10 * time.Second):
		t.Fatal("the request still waits after the server is ready")
	}
	require.Nil(t, s.outage.Load(), "the outage is over")

	// Down again: a request's context bounds its wait, and so does
	// waitAtMost.
	up.Store(false)
	s.waitAtMost = 300 * time.Millisecond
	require.Error(t, get(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began := time.Now()
	require.Error(t, get(ctx))
	require.Less(t, time.Since(began), 250*time.Millisecond, "the context's deadline, not the outage's")
	began = time.Now()
	require.Error(t, get(context.Background()), "the server never came back")
	require.Less(t, time.Since(began), 5*time.Second, "waitAtMost bounds the wait")
}

// TestProbesBackOff: a fleet probes the one server that is starting, so
// each syncer's probes back off (doubling, jittered) rather than coming
// every probeEvery: 10,000 syncers must not keep a starting server from
// becoming ready.
func TestProbesBackOff(t *testing.T) {
	var probes atomic.Int64
	var isReady atomic.Bool
	rt := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Path != "/readyz" {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		probes.Add(1)
		code := http.StatusServiceUnavailable
		if isReady.Load() {
			code = http.StatusOK
		}
		return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	})
	s, err := newServers([]string{"https://center.example:6443"}, klog.Background())
	require.NoError(t, err)
	s.probeEvery, s.waitAtMost = 10*time.Millisecond, time.Minute
	u, _ := url.Parse("https://center.example:6443")
	s.down(rt, u)
	time.Sleep(1500 * time.Millisecond) // the outage, as long as it lasts
	// Every 10 ms that would be 150 probes; doubling from 10 ms (each wait
	// at least half its step), at most 9.
	require.LessOrEqual(t, probes.Load(), int64(10), "the probes back off")
	require.GreaterOrEqual(t, probes.Load(), int64(3), "the server is probed")
	isReady.Store(true)
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return s.outage.Load() == nil, nil }), "the outage ends once the server is ready")
}
