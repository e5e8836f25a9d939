// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/internal/principal"
)

func TestParseEdgePath(t *testing.T) {
	for _, tc := range []struct {
		path, inv, st, rest string
		wantErr             bool
	}{
		{path: EdgesPrefix + "inv1/edge1/proxy/api/v1/pods", inv: "inv1", st: "edge1", rest: "/api/v1/pods"},
		{path: EdgesPrefix + "inv1/edge1/proxy", inv: "inv1", st: "edge1", rest: "/"},
		{path: EdgesPrefix + "inv1/edge1/proxy/", inv: "inv1", st: "edge1", rest: "/"},
		{path: EdgesPrefix + "inv1/edge1", wantErr: true},
		{path: EdgesPrefix + "inv1/edge1/other/api", wantErr: true},
		{path: EdgesPrefix + "Inv1/edge1/proxy/api", wantErr: true},
		{path: EdgesPrefix + "inv1/../proxy/api", wantErr: true},
		{path: "/api/v1/pods", wantErr: true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			inv, st, rest, err := parseEdgePath(tc.path)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{tc.inv, tc.st, tc.rest}, []string{inv, st, rest})
		})
	}
}

// FuzzParseEdgePath: nothing a client sends in the path crashes the
// server, and what is accepted names valid objects.
func FuzzParseEdgePath(f *testing.F) {
	for _, s := range []string{EdgesPrefix + "inv1/edge1/proxy/api", EdgesPrefix, EdgesPrefix + "a/b/proxy", EdgesPrefix + "//proxy/", "/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		inv, st, rest, err := parseEdgePath(path)
		if err != nil {
			return
		}
		if inv == "" || st == "" || strings.Contains(inv+st, "/") || !strings.HasPrefix(rest, "/") {
			t.Fatalf("accepted %q as %q %q %q", path, inv, st, rest)
		}
	})
}

// withUser stands in for the API server's authentication.
func withUser(h http.Handler, u user.Info) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u != nil {
			r = r.WithContext(request.WithUser(r.Context(), u))
		}
		h.ServeHTTP(w, r)
	})
}

// syncerUser is the identity the syncer of inv/st gets with token
// "token-"+st, bound to the SyncTarget's fixture UID.
func syncerUser(inv, st string) user.Info {
	return principal.SyncerTokenUser(inv, st, "token-"+st, fixtureUID(inv, st))
}

func fixtureUID(inv, st string) types.UID { return types.UID("uid-" + inv + "-" + st) }

// syncerOwner identifies tunnels as the server does (principal.TunnelOwner).
func syncerOwner(u user.Info) (Owner, error) {
	inv, st, uid, tokenID, err := principal.TunnelOwner(u)
	return Owner{InventorySpace: inv, SyncTarget: st, UID: uid, TokenID: tokenID}, err
}

// fixtureUIDs is a SyncTarget cache where each SyncTarget has its fixture UID.
func fixtureUIDs(inv, st string) (types.UID, bool) { return fixtureUID(inv, st), true }

func TestTunnelRefusals(t *testing.T) {
	s := NewServer(t.Context(), syncerOwner, nil, fixtureUIDs)
	for _, tc := range []struct {
		desc string
		user user.Info
		want int
	}{
		{desc: "no user", want: http.StatusForbidden},
		{desc: "not a syncer", user: &user.DefaultInfo{Name: "alice"}, want: http.StatusForbidden},
		{desc: "a syncer without a token bound to a UID", user: principal.SyncerUser("inv1", "edge1"), want: http.StatusForbidden},
		{desc: "a syncer without a WebSocket handshake", user: syncerUser("inv1", "edge1"), want: http.StatusBadRequest},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			rec := httptest.NewRecorder()
			withUser(s, tc.user).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
			require.Equal(t, tc.want, rec.Code)
			require.Contains(t, rec.Body.String(), `"kind":"Status"`)
		})
	}
	rec := httptest.NewRecorder()
	s.EdgeProxy().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, EdgesPrefix+"inv1/edge1/proxy/api", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "no tunnel open")
	require.Contains(t, rec.Body.String(), "inv1/edge1 has no tunnel open")
}

// TestTunnelRoundTrip runs a real client against a real server over TLS:
// requests to the edge proxy reach the client's edge handler, without the
// caller's credentials, and the tunnel comes back after it is cut.
func TestTunnelRoundTrip(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var changes []bool
	s := NewServer(ctx, syncerOwner, func(_ context.Context, inv, st string, connected bool) {
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, "inv1/edge1", inv+"/"+st)
		changes = append(changes, connected)
	}, fixtureUIDs)
	mux := http.NewServeMux()
	mux.Handle(Path, withUser(s, syncerUser("inv1", "edge1")))
	mux.Handle(EdgesPrefix, s.EdgeProxy())
	srv := httptest.NewUnstartedServer(mux)
	conns := &trackingListener{Listener: srv.Listener}
	srv.Listener = conns
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()

	edge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" auth="+r.Header.Get("Authorization"))
	})
	client := &Client{Servers: []string{srv.URL}, BearerToken: "t", Edge: edge,
		TLS: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, MinVersion: tls.VersionTLS12}}
	done := make(chan struct{})
	go func() { client.Run(ctx); close(done) }()

	get := func() (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+EdgesPrefix+"inv1/edge1/proxy/api/v1/pods?watch=true", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer center-admin")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitOpen := func() {
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return s.Connected("inv1", "edge1"), nil }))
	}
	waitOpen()
	code, body := get()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "GET /api/v1/pods?watch=true auth=", body, "the caller's token stays at the center")
	require.Equal(t, 1, s.Tunnels())

	// Cut every connection: the client comes back by itself.
	conns.closeAll()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(changes) >= 3, nil
	}))
	waitOpen()
	code, _ = get()
	require.Equal(t, http.StatusOK, code)
	mu.Lock()
	require.Equal(t, []bool{true, false, true}, changes[:3])
	mu.Unlock()
	cancel()
	<-done
}

func TestSilentConnectionIsDropped(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := newWatchedConn(a)
	dead := make(chan Silence, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	newSweeper(ctx, 100*time.Millisecond).watch(ctx, w, func(s Silence) { dead <- s })
	select {
	case s := <-dead:
		require.Greater(t, s.SinceRead, 100*time.Millisecond)
		require.Zero(t, s.WriteBlocked, "nothing was being written")
	case <-time.After(5 * time.Second):
		t.Fatal("a silent connection was not dropped")
	}
	_, err := w.Write([]byte("x"))
	require.Error(t, err, "the dropped connection is closed")
}

// TestSilenceSaysAWriteWasBlocked: a connection dropped while its write
// could not go out (the other side reads nothing: a pipe's write waits
// for its read) says so, and how long it waited.
func TestSilenceSaysAWriteWasBlocked(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := newWatchedConn(a)
	written := make(chan error, 1)
	go func() {
		_, err := w.Write([]byte("pong"))
		written <- err
	}()
	dead := make(chan Silence, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	newSweeper(ctx, 100*time.Millisecond).watch(ctx, w, func(s Silence) { dead <- s })
	select {
	case s := <-dead:
		require.Greater(t, s.WriteBlocked, 50*time.Millisecond, "the write under way since the start")
		require.Greater(t, s.SinceWrite, 100*time.Millisecond, "nothing was written")
		require.Contains(t, s.KeysAndValues(), "writeBlocked")
	case <-time.After(5 * time.Second):
		t.Fatal("a silent connection was not dropped")
	}
	select {
	case err := <-written:
		require.Error(t, err, "the drop ends the blocked write")
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked write did not end with the connection")
	}
}

// trackingListener can cut every connection it accepted, hijacked or not.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// failingTransport fails its first fails round trips, then answers 200.
type failingTransport struct {
	fails, calls int
}

func (f *failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, io.ErrUnexpectedEOF
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func TestRetryTransport(t *testing.T) {
	upgrade := func(r *http.Request) { r.Header.Set("Upgrade", "websocket") }
	for _, tc := range []struct {
		name      string
		method    string
		body      string
		change    func(*http.Request)
		fails     int
		wantCalls int
		wantOK    bool
	}{
		{name: "a GET lost once is sent again", method: http.MethodGet, fails: 1, wantCalls: 2, wantOK: true},
		{name: "a GET lost twice is sent a third time", method: http.MethodGet, fails: 2, wantCalls: 3, wantOK: true},
		{name: "three attempts at most", method: http.MethodGet, fails: 5, wantCalls: 3},
		{name: "a POST is never repeated", method: http.MethodPost, body: "{}", fails: 1, wantCalls: 1},
		{name: "a DELETE is never repeated", method: http.MethodDelete, fails: 1, wantCalls: 1},
		{name: "exec (an upgrade) is never repeated", method: http.MethodGet, change: upgrade, fails: 1, wantCalls: 1},
		{name: "a GET that answers is sent once", method: http.MethodGet, wantCalls: 1, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := httptest.NewRequest(tc.method, "http://edge/api", body)
			if tc.change != nil {
				tc.change(req)
			}
			fake := &failingTransport{fails: tc.fails}
			resp, err := retryTransport{rt: fake, attempts: 3}.RoundTrip(req)
			require.Equal(t, tc.wantCalls, fake.calls)
			if tc.wantOK {
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode)
			} else {
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			}
		})
	}
	t.Run("a cancelled request is not repeated", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		req := httptest.NewRequest(http.MethodGet, "http://edge/api", nil).WithContext(ctx)
		fake := &failingTransport{fails: 1}
		_, err := retryTransport{rt: fake, attempts: 3}.RoundTrip(req)
		require.Error(t, err)
		require.Equal(t, 1, fake.calls)
	})
}

// TestEdgeProxyForwardsToPeer: a server without the tunnel forwards an
// edge request once, as admin, to the server that holds it.
func TestEdgeProxyForwardsToPeer(t *testing.T) {
	type seen struct{ path, query, auth, forwardedBy, impersonate string }
	got := make(chan seen, 4)
	holder := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get(ForwardedHeader), r.Header.Get("Impersonate-User")}
		_, _ = io.WriteString(w, "from the holder")
	}))
	defer holder.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: holder.Certificate().Raw})
	const self = "https://127.0.0.1:1"
	holderURL := holder.URL
	peers, err := NewPeers(self, caPEM, "admin-token", func(_ context.Context, inv, st string) (string, error) {
		if inv == "inv1" && st == "edge1" {
			return holderURL, nil
		}
		return "", nil
	})
	require.NoError(t, err)
	s := NewServer(t.Context(), syncerOwner, nil, fixtureUIDs)
	s.SetPeers(peers)
	proxy := s.EdgeProxy()
	serve := func(path string, header http.Header) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		maps.Copy(req.Header, header)
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, req)
		return rec
	}

	rec := serve(EdgesPrefix+"inv1/edge1/proxy/api/v1/pods?watch=true", http.Header{"Impersonate-User": {"someone"}, "Authorization": {"Bearer user-token"}})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "from the holder", rec.Body.String())
	require.Equal(t, seen{EdgesPrefix + "inv1/edge1/proxy/api/v1/pods", "watch=true", "Bearer admin-token", self, ""}, <-got)

	rec = serve(EdgesPrefix+"inv1/edge1/proxy/api", http.Header{ForwardedHeader: {"https://127.0.0.1:2"}})
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a forwarded request is not forwarded again")
	rec = serve(EdgesPrefix+"inv1/edge2/proxy/api", nil)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "no server holds edge2's tunnel")
	holderURL = self
	rec = serve(EdgesPrefix+"inv1/edge1/proxy/api", nil)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "the SyncTarget names this server, which has no tunnel")
	holder.Close()
	holderURL = holder.URL
	rec = serve(EdgesPrefix+"inv1/edge1/proxy/api", nil)
	require.Equal(t, http.StatusBadGateway, rec.Code)
	require.Contains(t, rec.Body.String(), "reaching "+holder.URL+", the server holding its tunnel")
	require.Empty(t, got)
}
