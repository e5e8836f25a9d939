// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/internal/principal"
)

// frameHeader is the header of a client frame (masked) with a payload of
// length bytes.
func frameHeader(fin bool, opcode byte, length uint64) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	var h []byte
	switch {
	case length < 126:
		h = []byte{b0, 0x80 | byte(length)}
	case length <= 0xffff:
		h = []byte{b0, 0x80 | 126, 0, 0}
		binary.BigEndian.PutUint16(h[2:], uint16(length))
	default:
		h = []byte{b0, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(h[2:], length)
	}
	return append(h, 1, 2, 3, 4) // masking key
}

// clientFrame is a whole client frame with a payload of zeros.
func clientFrame(fin bool, opcode byte, length int) []byte {
	return append(frameHeader(fin, opcode, uint64(length)), make([]byte, length)...)
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestFrameMeter(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		desc    string
		stream  []byte
		wantErr string
	}{
		{desc: "small messages", stream: concat(clientFrame(true, 2, 10), clientFrame(true, 2, 1000), clientFrame(true, 1, 0))},
		{desc: "a message at the limit in fragments", stream: concat(clientFrame(false, 2, 500), clientFrame(false, 0, 400), clientFrame(true, 0, 100))},
		{desc: "control frames between fragments do not count", stream: concat(clientFrame(false, 2, 900), clientFrame(true, 9, 125), clientFrame(true, 10, 125), clientFrame(true, 0, 100))},
		{desc: "messages do not add up", stream: concat(clientFrame(true, 2, 900), clientFrame(true, 2, 900))},
		{desc: "one frame over the limit", stream: clientFrame(true, 2, 1001), wantErr: "at least 1001 bytes"},
		{desc: "fragments over the limit", stream: concat(clientFrame(false, 2, 600), clientFrame(true, 0, 401)), wantErr: "at least 1001 bytes"},
		{desc: "a 768 MiB header alone", stream: frameHeader(true, 2, 768<<20), wantErr: "at least 805306368 bytes"},
		{desc: "a 64-bit length with the top bit set", stream: frameHeader(true, 2, 1<<63), wantErr: "most significant bit"},
		{desc: "a long control frame", stream: clientFrame(true, 9, 126), wantErr: "control frame of 126 bytes"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			// Whole, and byte by byte: the same answer.
			for _, chunk := range []int{len(tc.stream), 1, 7} {
				m := frameMeter{limit: limit}
				var err error
				for p := tc.stream; len(p) > 0 && err == nil; {
					n := min(chunk, len(p))
					err = m.feed(p[:n])
					p = p[n:]
				}
				if tc.wantErr == "" {
					require.NoError(t, err, "chunks of %d", chunk)
					require.Zero(t, m.payload, "the stream ends between frames")
					continue
				}
				require.ErrorContains(t, err, tc.wantErr, "chunks of %d", chunk)
				require.Error(t, m.feed([]byte{0}), "it keeps failing")
			}
		})
	}
	var tooLarge ErrMessageTooLarge
	require.ErrorAs(t, (&frameMeter{limit: 1}).feed(clientFrame(true, 2, 2)), &tooLarge)
}

// referenceMessageSizes parses a whole stream of client frames at once and
// returns the largest data message it announces, and whether the stream
// is well-formed so far (what a frameMeter must agree with).
func referenceMessageSizes(stream []byte) (largest int64, ok bool) {
	var message int64
	for len(stream) > 0 {
		if len(stream) < 2 {
			return largest, true // a header cut short: nothing announced yet
		}
		n := 2
		length := int64(stream[1] & 0x7f)
		switch length {
		case 126:
			n += 2
		case 127:
			n += 8
		}
		if stream[1]&0x80 != 0 {
			n += 4
		}
		if len(stream) < n {
			return largest, true
		}
		switch length {
		case 126:
			length = int64(binary.BigEndian.Uint16(stream[2:]))
		case 127:
			l := binary.BigEndian.Uint64(stream[2:])
			if l > 1<<62 {
				return largest, false
			}
			length = int64(l)
		}
		switch opcode := stream[0] & 0x0f; {
		case opcode >= 8:
			if length > 125 {
				return largest, false
			}
		case opcode == 0:
			message += length
		default:
			message = length
		}
		largest = max(largest, message)
		stream = stream[n:]
		if int64(len(stream)) < length {
			return largest, true
		}
		stream = stream[length:]
	}
	return largest, true
}

// FuzzFrameMeter: whatever a client sends, in whatever pieces it arrives,
// the meter does not crash, answers the same, and lets no message past the
// limit (checked against a plain parse of the whole stream).
func FuzzFrameMeter(f *testing.F) {
	f.Add(concat(clientFrame(true, 2, 10), clientFrame(false, 2, 60), clientFrame(true, 0, 60)), uint16(3), uint16(100))
	f.Add(frameHeader(true, 2, 768<<20), uint16(1), uint16(100))
	f.Add(concat(clientFrame(false, 1, 50), clientFrame(true, 9, 4), clientFrame(true, 0, 49)), uint16(5), uint16(100))
	f.Add(clientFrame(true, 2, 300), uint16(2), uint16(200))
	f.Add([]byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}, uint16(1), uint16(100))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint16, limit uint16) {
		whole := frameMeter{limit: int64(limit)}
		wholeErr := whole.feed(stream)
		pieces := frameMeter{limit: int64(limit)}
		step := int(chunk)%17 + 1
		var piecesErr error
		for p := stream; len(p) > 0 && piecesErr == nil; {
			n := min(step, len(p))
			piecesErr = pieces.feed(p[:n])
			p = p[n:]
		}
		if (wholeErr == nil) != (piecesErr == nil) || (wholeErr != nil && wholeErr.Error() != piecesErr.Error()) {
			t.Fatalf("whole: %v; in pieces of %d: %v", wholeErr, step, piecesErr)
		}
		largest, ok := referenceMessageSizes(stream)
		if wholeErr == nil && (!ok || largest > int64(limit)) {
			t.Fatalf("accepted a stream with a message of %d bytes (limit %d), well-formed: %t", largest, limit, ok)
		}
		if wholeErr != nil && ok && largest <= int64(limit) {
			t.Fatalf("refused a stream whose largest message is %d bytes (limit %d): %v", largest, limit, wholeErr)
		}
	})
}

// tunnelTestServer serves s at Path, as the user its bearer token names
// (the API server's authentication stands in), and can end the requests
// of a user as the API server's Revoker does.
type tunnelTestServer struct {
	*httptest.Server
	mu      sync.Mutex
	users   map[string]user.Info
	cancels map[string][]context.CancelCauseFunc
}

func newTunnelTestServer(t testing.TB, s *Server, users map[string]user.Info) *tunnelTestServer {
	ts := &tunnelTestServer{users: users, cancels: map[string][]context.CancelCauseFunc{}}
	mux := http.NewServeMux()
	mux.Handle(Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		ts.mu.Lock()
		u := ts.users[name]
		ts.mu.Unlock()
		ctx, cancel := context.WithCancelCause(request.WithUser(r.Context(), u))
		defer cancel(nil)
		ts.mu.Lock()
		ts.cancels[name] = append(ts.cancels[name], cancel)
		ts.mu.Unlock()
		s.ServeHTTP(w, r.WithContext(ctx))
	}))
	mux.Handle(EdgesPrefix, s.EdgeProxy())
	ts.Server = httptest.NewUnstartedServer(mux)
	ts.EnableHTTP2 = false
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// revoke ends the requests of a user, with cause.
func (ts *tunnelTestServer) revoke(name string, cause error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, cancel := range ts.cancels[name] {
		cancel(cause)
	}
}

func (ts *tunnelTestServer) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, MinVersion: tls.VersionTLS12}
}

// rawTunnel opens a tunnel as user name with a plain WebSocket client, and
// returns it with its TLS connection (to write what no client would).
func (ts *tunnelTestServer) rawTunnel(ctx context.Context, name string) (*websocket.Conn, *tls.Conn, *http.Response, error) {
	var raw *tls.Conn
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second,
		NetDialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&tls.Dialer{Config: ts.tlsConfig()}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			raw = c.(*tls.Conn)
			return raw, nil
		}}
	ws, resp, err := dialer.DialContext(ctx, "wss://"+strings.TrimPrefix(ts.URL, "https://")+Path, http.Header{"Authorization": {"Bearer " + name}})
	return ws, raw, resp, err
}

// runClient runs a real tunnel client as user name, serving edge, until
// ctx is done.
func (ts *tunnelTestServer) runClient(ctx context.Context, name string, edge http.Handler) <-chan struct{} {
	client := &Client{Servers: []string{ts.URL}, BearerToken: name, Edge: edge, TLS: ts.tlsConfig()}
	done := make(chan struct{})
	go func() { client.Run(ctx); close(done) }()
	return done
}

// edgeGet asks the edge proxy for inv/st's edge.
func (ts *tunnelTestServer) edgeGet(t *testing.T, inv, st string) (int, string) {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + EdgesPrefix + inv + "/" + st + "/proxy/api")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	require.NoError(t, err, "waiting for %s", what)
}

// connectionChanges records onChange.
type connectionChanges struct {
	mu      sync.Mutex
	changes []string
}

func (c *connectionChanges) record(_ context.Context, inv, st string, connected bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes = append(c.changes, fmt.Sprintf("%s/%s=%t", inv, st, connected))
}

func (c *connectionChanges) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.changes...)
}

// TestHeldIsWhatOnChangeSays: when onChange hears a SyncTarget's first
// tunnel open (before the tunnel carries requests) or its last one close,
// Held already says so; a writer of the SyncTarget's condition reads it.
func TestHeldIsWhatOnChangeSays(t *testing.T) {
	var s *Server
	var mu sync.Mutex
	var seen []string
	onChange := func(_ context.Context, inv, st string, connected bool) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s/%s=%t held=%t", inv, st, connected, s.Held(inv, st)))
	}
	s = NewServer(t.Context(), syncerOwner, onChange, fixtureUIDs)
	ts := newTunnelTestServer(t, s, map[string]user.Info{"edge1": syncerUser("inv1", "edge1")})
	ws, _, _, err := ts.rawTunnel(t.Context(), "edge1")
	require.NoError(t, err)
	waitFor(t, "the tunnel to open", func() bool { return s.Tunnels() == 1 })
	require.True(t, s.Held("inv1", "edge1"))
	require.False(t, s.Held("inv1", "edge2"))
	ws.Close()
	waitFor(t, "the tunnel to close", func() bool { return s.Tunnels() == 0 })
	waitFor(t, "both changes heard", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2 })
	require.Equal(t, []string{"inv1/edge1=true held=true", "inv1/edge1=false held=false"}, seen)
}

// TestOversizeMessageClosesTunnel: a syncer that sends a message over
// MaxMessageBytes (here a list of its connections, which the tunnel library
// reads whole into memory) has its tunnel closed, and the server's heap
// does not grow by what it sends.
func TestOversizeMessageClosesTunnel(t *testing.T) {
	// remotedialer's message header: id, connection id, type 8
	// (SyncConnections), then the list.
	header := binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(nil, 1), 0), 8)
	for _, tc := range []struct {
		desc string
		send func(ws *websocket.Conn, raw *tls.Conn) (int64, error)
	}{
		{desc: "one frame announcing 768 MiB", send: func(_ *websocket.Conn, raw *tls.Conn) (int64, error) {
			// Written under the WebSocket library, which would not.
			if _, err := raw.Write(append(frameHeader(true, 2, 768<<20), header...)); err != nil {
				return 0, err
			}
			return writeZeros(raw, 64<<20)
		}},
		{desc: "small frames adding up", send: func(ws *websocket.Conn, _ *tls.Conn) (int64, error) {
			w, err := ws.NextWriter(websocket.BinaryMessage)
			if err != nil {
				return 0, err
			}
			if _, err := w.Write(header); err != nil {
				return 0, err
			}
			return writeZeros(w, 64<<20)
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			changes := &connectionChanges{}
			s := NewServer(t.Context(), syncerOwner, changes.record, fixtureUIDs)
			ts := newTunnelTestServer(t, s, map[string]user.Info{"edge1": syncerUser("inv1", "edge1")})
			ws, raw, _, err := ts.rawTunnel(t.Context(), "edge1")
			require.NoError(t, err)
			defer ws.Close()
			waitFor(t, "the tunnel to open", func() bool { return s.Tunnels() == 1 })

			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			sent, err := tc.send(ws, raw)
			t.Logf("sent %d MiB before the server closed the tunnel (%v)", sent>>20, err)
			require.Error(t, err, "the server closed the connection before 64 MiB were sent")

			waitFor(t, "the tunnel to close", func() bool { return s.Tunnels() == 0 })
			waitFor(t, "the SyncTarget to be said disconnected", func() bool { return len(changes.get()) == 2 })
			require.Equal(t, []string{"inv1/edge1=true", "inv1/edge1=false"}, changes.get())

			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			t.Logf("heap in use: %d KiB before, %d KiB after", before.HeapAlloc>>10, after.HeapAlloc>>10)
			require.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(8<<20), "the server kept what it was sent")
		})
	}
}

// writeZeros writes up to n zeros to w, until it fails.
func writeZeros(w io.Writer, n int64) (int64, error) {
	chunk := make([]byte, 256<<10)
	var sent int64
	for sent < n {
		k, err := w.Write(chunk)
		sent += int64(k)
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// TestTunnelsPerToken: one token holds MaxTunnelsPerToken tunnels at most;
// the next gets 429, saying why; another token is not affected.
func TestTunnelsPerToken(t *testing.T) {
	s := NewServer(t.Context(), syncerOwner, nil, fixtureUIDs)
	ts := newTunnelTestServer(t, s, map[string]user.Info{"edge1": syncerUser("inv1", "edge1"), "edge2": syncerUser("inv1", "edge2")})
	var open []*websocket.Conn
	defer func() {
		for _, ws := range open {
			ws.Close()
		}
	}()
	for range MaxTunnelsPerToken {
		ws, _, _, err := ts.rawTunnel(t.Context(), "edge1")
		require.NoError(t, err)
		open = append(open, ws)
	}
	_, _, resp, err := ts.rawTunnel(t.Context(), "edge1")
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), "token token-edge1 already holds 3 tunnels")
	require.Contains(t, string(body), `"reason":"TooManyRequests"`)

	ws, _, _, err := ts.rawTunnel(t.Context(), "edge2")
	require.NoError(t, err, "another token")
	open = append(open, ws)

	// One closes: room for another.
	open[0].Close()
	waitFor(t, "room for a tunnel of edge1's token", func() bool {
		ws, _, _, err := ts.rawTunnel(t.Context(), "edge1")
		if err != nil {
			return false
		}
		open = append(open, ws)
		return true
	})
}

// TestTunnelBoundToSyncTargetUID: the edge proxy uses only a tunnel of the
// SyncTarget's current UID; the tunnel ends with its request (as the API
// server ends it when the token stops authenticating), and the SyncTarget
// is then said disconnected.
func TestTunnelBoundToSyncTargetUID(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	current := types.UID("uid-old")
	uidOf := func(inv, st string) (types.UID, bool) {
		mu.Lock()
		defer mu.Unlock()
		return current, current != ""
	}
	changes := &connectionChanges{}
	s := NewServer(ctx, syncerOwner, changes.record, uidOf)
	ts := newTunnelTestServer(t, s, map[string]user.Info{
		"old": principal.SyncerTokenUser("inv1", "edge3", "oldtok", "uid-old"),
		"new": principal.SyncerTokenUser("inv1", "edge3", "newtok", "uid-new"),
	})
	edge := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the "+name+" edge3") })
	}
	oldDone := ts.runClient(ctx, "old", edge("old"))
	waitFor(t, "the old syncer's tunnel", func() bool { return s.Connected("inv1", "edge3") })
	code, body := ts.edgeGet(t, "inv1", "edge3")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "the old edge3", body)

	// edge3 deleted and made again: the old tunnel serves nothing.
	mu.Lock()
	current = "uid-new"
	mu.Unlock()
	require.False(t, s.Connected("inv1", "edge3"))
	code, body = ts.edgeGet(t, "inv1", "edge3")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "SyncTarget inv1/edge3 has no tunnel open")

	newCtx, stopNew := context.WithCancel(ctx)
	newDone := ts.runClient(newCtx, "new", edge("new"))
	waitFor(t, "the new syncer's tunnel", func() bool { return s.Connected("inv1", "edge3") })
	code, body = ts.edgeGet(t, "inv1", "edge3")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "the new edge3", body)
	require.Equal(t, 2, s.Tunnels())

	// The old token is revoked: its tunnel ends with its request.
	ts.revoke("old", errors.New("syncer token oldtok was revoked"))
	waitFor(t, "the old tunnel to close", func() bool { return s.Tunnels() == 1 })
	require.Equal(t, []string{"inv1/edge3=true"}, changes.get(), "the new tunnel keeps edge3 connected")
	stopNew()
	<-newDone
	waitFor(t, "edge3 to be said disconnected", func() bool { return len(changes.get()) == 2 })
	require.Equal(t, []string{"inv1/edge3=true", "inv1/edge3=false"}, changes.get())
	cancel()
	<-oldDone
}

// clientMessage is a client frame carrying payload, masked as clients do.
func clientMessage(fin bool, opcode byte, payload []byte) []byte {
	h := frameHeader(fin, opcode, uint64(len(payload)))
	mask := h[len(h)-4:]
	out := append([]byte(nil), h...)
	for i, b := range payload {
		out = append(out, b^mask[i%4])
	}
	return out
}

// rdMessage is the start of a remotedialer message of type t.
func rdMessage(t int64, body ...byte) []byte {
	m := binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(nil, 12345), 7), t)
	if t == rdData {
		m = binary.AppendVarint(m, 15000) // the deadline field data messages carry
	}
	return append(m, body...)
}

func TestFrameMeterMessageTypes(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		stream  []byte
		wantErr string
	}{
		{desc: "what a syncer sends", stream: concat(clientMessage(true, 2, rdMessage(rdData, 'h', 'i')), clientMessage(true, 2, rdMessage(rdError, 'E', 'O', 'F')),
			clientMessage(true, 2, rdMessage(rdPause)), clientMessage(true, 2, rdMessage(rdResume)), clientMessage(true, 2, rdMessage(rdSyncConnections, 1, 0, 0, 0, 0, 0, 0, 0)))},
		{desc: "a header split over fragments, a ping between", stream: concat(clientMessage(false, 2, rdMessage(rdData)[:2]), clientMessage(true, 9, []byte("ping")),
			clientMessage(true, 0, rdMessage(rdData)[2:]))},
		{desc: "connect", stream: clientMessage(true, 2, rdMessage(2, []byte("tcp/10.0.0.1:22")...)), wantErr: "type 2, which a syncer never sends"},
		{desc: "add client", stream: clientMessage(true, 2, rdMessage(4, []byte("other/1")...)), wantErr: "type 4"},
		{desc: "remove client, after fragments", stream: concat(clientMessage(false, 2, rdMessage(5)[:1]), clientMessage(true, 0, rdMessage(5)[1:])), wantErr: "type 5"},
		{desc: "unknown type", stream: clientMessage(true, 2, rdMessage(99)), wantErr: "type 99"},
		{desc: "a malformed varint", stream: clientMessage(true, 2, bytes.Repeat([]byte{0xff}, 40)), wantErr: "malformed header"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, chunk := range []int{len(tc.stream), 1, 3} {
				m := frameMeter{limit: MaxMessageBytes, checkType: syncerMessageType}
				var err error
				for p := tc.stream; len(p) > 0 && err == nil; {
					n := min(chunk, len(p))
					err = m.feed(p[:n])
					p = p[n:]
				}
				if tc.wantErr == "" {
					require.NoError(t, err, "chunks of %d", chunk)
					continue
				}
				require.ErrorContains(t, err, tc.wantErr, "chunks of %d", chunk)
			}
		})
	}
}

// FuzzTunnelMessages sends what the fuzzer makes, as one WebSocket message
// of a syncer, into a real tunnel server: the server does not crash, and
// either keeps the tunnel (and answers a ping on it) or closes it; a
// message over MaxMessageBytes always closes it. `go test` runs the seeds
// (testdata/fuzz/FuzzTunnelMessages and those below); `go test -fuzz
// FuzzTunnelMessages -fuzztime 1m ./tunnel` explores further.
func FuzzTunnelMessages(f *testing.F) {
	for _, seed := range [][]byte{
		rdMessage(rdData, []byte("GET / HTTP/1.1\r\n\r\n")...),
		rdMessage(rdError, []byte("EOF")...),
		rdMessage(rdPause), rdMessage(rdResume),
		rdMessage(rdSyncConnections, 1, 0, 0, 0, 0, 0, 0, 0),
		rdMessage(rdSyncConnections, 1, 2, 3), // not a multiple of 8
		rdMessage(2, []byte("tcp/127.0.0.1:22")...),
		rdMessage(4, []byte("peer/1")...),
		{}, {0x80},
	} {
		f.Add(seed)
	}
	s := NewServer(f.Context(), syncerOwner, nil, fixtureUIDs)
	ts := newTunnelTestServer(f, s, map[string]user.Info{"edge1": syncerUser("inv1", "edge1")})
	f.Fuzz(func(t *testing.T, message []byte) {
		ws, _, _, err := ts.rawTunnel(t.Context(), "edge1")
		require.NoError(t, err)
		defer ws.Close()
		if len(message) > MaxMessageBytes {
			message = message[:MaxMessageBytes+1]
		}
		// The pong ends the wait (handlers run in the reading goroutine).
		gotPong := false
		ws.SetPongHandler(func(string) error {
			gotPong = true
			return ws.SetReadDeadline(time.Now())
		})
		if err := ws.WriteMessage(websocket.BinaryMessage, message); err != nil {
			return // closed already
		}
		_ = ws.WriteControl(websocket.PingMessage, []byte("after"), time.Now().Add(5*time.Second))
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			// Answers (an error for an unknown connection) may come before
			// the pong; a closed tunnel ends the read.
			_, _, err := ws.ReadMessage()
			if err == nil {
				continue
			}
			if gotPong {
				if len(message) > MaxMessageBytes {
					t.Fatalf("the tunnel stayed open after a message of %d bytes", len(message))
				}
				return
			}
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				t.Fatalf("the server neither answered a ping nor closed the tunnel after a message of %d bytes", len(message))
			}
			return
		}
	})
}

// TestDrainThenClose: a draining server keeps the tunnels it has, refuses
// new ones with 503 and Retry-After, and Close ends the ones it has.
func TestDrainThenClose(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	changes := &connectionChanges{}
	s := NewServer(ctx, syncerOwner, changes.record, fixtureUIDs)
	ts := newTunnelTestServer(t, s, map[string]user.Info{
		"a": principal.SyncerTokenUser("inv1", "edge1", "tok1", fixtureUID("inv1", "edge1")),
		"b": principal.SyncerTokenUser("inv1", "edge2", "tok2", fixtureUID("inv1", "edge2")),
	})
	edge := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "edge1") })
	done := ts.runClient(ctx, "a", edge)
	waitFor(t, "edge1's tunnel", func() bool { return s.Connected("inv1", "edge1") })

	require.Equal(t, []string{"inv1/edge1"}, s.Drain())
	code, body := ts.edgeGet(t, "inv1", "edge1")
	require.Equal(t, http.StatusOK, code, "a draining server still serves the tunnels it has")
	require.Equal(t, "edge1", body)
	_, _, resp, err := ts.rawTunnel(ctx, "b")
	require.Error(t, err, "a new tunnel while draining")
	require.NotNil(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Equal(t, []string{"inv1/edge1=true"}, changes.get(), "a refused tunnel is not recorded")

	s.Close()
	waitFor(t, "Close to end edge1's tunnel", func() bool { return len(changes.get()) == 2 })
	require.Equal(t, []string{"inv1/edge1=true", "inv1/edge1=false"}, changes.get())
	require.False(t, s.Connected("inv1", "edge1"))
	cancel()
	<-done
}
