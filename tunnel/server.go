// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rancher/remotedialer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
)

// Server holds the syncers' tunnels.
//
// A tunnel belongs to the token that opened it and to the SyncTarget, by
// UID, that the token is bound to: the edge proxy uses only a tunnel of the
// SyncTarget's current UID, so a SyncTarget deleted and made again under
// the same name is never served by the old one's syncer. (The API server
// ends the tunnels of a token that stops authenticating: see
// the server's auth.Revoker.)
type Server struct {
	// ctx ends every tunnel when it ends (Close).
	ctx   context.Context
	close context.CancelFunc
	rd    *remotedialer.Server
	// sweeper drops the tunnels gone silent.
	sweeper  *sweeper
	identify Identify
	onChange func(ctx context.Context, inventorySpace, syncTarget string, connected bool)
	// uidOf tells the UID of the SyncTarget of a name there is now.
	uidOf func(inventorySpace, syncTarget string) (types.UID, bool)

	// peers, when set, forward requests for tunnels held by other servers.
	peers *Peers
	// buffers are the edge proxy's, and its peers'.
	buffers bufferPool

	mu         sync.Mutex
	sessions   map[tunnelKey]int            // open tunnels per key
	targets    map[string]map[tunnelKey]int // the same, by "inventory/synctarget"
	tokens     map[string]int               // open tunnels per token id
	transports map[tunnelKey]*http.Transport
	// draining refuses new tunnels: the server is shutting down.
	draining bool
}

// tunnelKey names the tunnels of one token, for one SyncTarget (by UID).
type tunnelKey struct {
	inv, st string
	uid     types.UID
	tokenID string
}

// String is the key's name in remotedialer.
func (k tunnelKey) String() string { return k.inv + "/" + k.st + "/" + string(k.uid) + "/" + k.tokenID }

func (k tunnelKey) target() string { return k.inv + "/" + k.st }

// NewServer returns a tunnel server; identify tells whose tunnel a request
// opens; onChange (may be nil) hears when a SyncTarget's first tunnel opens
// and its last one closes; uidOf tells the UID of the SyncTarget of a name
// there is now.
func NewServer(ctx context.Context, identify Identify, onChange func(ctx context.Context, inventorySpace, syncTarget string, connected bool),
	uidOf func(inventorySpace, syncTarget string) (types.UID, bool)) *Server {
	s := &Server{identify: identify, onChange: onChange, uidOf: uidOf, sessions: map[tunnelKey]int{}, targets: map[string]map[tunnelKey]int{},
		tokens: map[string]int{}, transports: map[tunnelKey]*http.Transport{}}
	s.ctx, s.close = context.WithCancel(ctx)
	s.sweeper = newSweeper(s.ctx, DeadAfter)
	s.rd = remotedialer.New(s.clientKey, func(w http.ResponseWriter, _ *http.Request, code int, err error) {
		writeStatus(w, code, err.Error())
	})
	return s
}

// SetPeers makes the edge proxy forward requests for tunnels that other
// servers of the cluster hold. Call it before serving.
func (s *Server) SetPeers(p *Peers) { s.peers = p }

// Owner is whom a tunnel belongs to: the SyncTarget, by name and UID, and
// the token its syncer opened the tunnel with.
type Owner struct {
	InventorySpace, SyncTarget string
	UID                        types.UID
	TokenID                    string
}

// Identify tells whose tunnel a request may open, from the identity the
// server's authentication gave it (request.UserFrom), or why it may open
// none (the 403's message). The server injects it, as k3s gives its tunnel
// server an authorizer: this package knows nothing of how syncers
// authenticate.
type Identify func(u user.Info) (Owner, error)

// keyOf names the tunnel of a request after its token and SyncTarget.
func (s *Server) keyOf(req *http.Request) (tunnelKey, error) {
	u, _ := request.UserFrom(req.Context())
	o, err := s.identify(u)
	if err != nil {
		return tunnelKey{}, err
	}
	return tunnelKey{inv: o.InventorySpace, st: o.SyncTarget, uid: o.UID, tokenID: o.TokenID}, nil
}

// clientKey is remotedialer's authorizer.
func (s *Server) clientKey(req *http.Request) (string, bool, error) {
	key, err := s.keyOf(req)
	if err != nil {
		return "", false, nil
	}
	return key.String(), true, nil
}

// ServeHTTP opens a syncer's tunnel and holds it until it closes.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	logger := klog.FromContext(s.ctx)
	key, err := s.keyOf(req)
	if err != nil {
		logger.Info("refused a tunnel: not a syncer's token bound to its SyncTarget", "err", err.Error(), "remote", req.RemoteAddr)
		writeStatus(w, http.StatusForbidden, err.Error())
		return
	}
	if req.Method == http.MethodGet && req.Header.Get(StreamHeader) == ProbeValue {
		if req.ProtoMajor == 2 {
			w.Header().Set(StreamHeader, ProbeHTTP2)
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if req.Method == http.MethodPost && req.Header.Get(StreamHeader) == StreamValue {
		// A stream of the syncer's HTTP/2 connection: the answers from
		// here on (the handshake's, refusals included) go inside it.
		sw, inner, err := serverStream(w, req)
		if sw != nil {
			// Nothing writes to the stream once the handler returns
			// (its ResponseWriter is then another request's).
			defer sw.finish()
		}
		if err != nil {
			logger.Info("refused a tunnel stream", "syncTarget", key.target(), "err", err.Error(), "remote", req.RemoteAddr)
			if req.ProtoMajor != 2 {
				writeStatus(w, http.StatusBadRequest, err.Error())
			}
			return
		}
		w, req = sw, inner
	}
	if !websocket.IsWebSocketUpgrade(req) {
		logger.Info("refused a tunnel: not a WebSocket handshake", "syncTarget", key.target(), "remote", req.RemoteAddr)
		writeStatus(w, http.StatusBadRequest, "a tunnel is opened with a WebSocket handshake (HTTP/1.1 GET with Upgrade: websocket)")
		return
	}
	opened, draining := s.opened(key)
	if draining {
		logger.Info("refused a tunnel: the server is shutting down", "syncTarget", key.target(), "remote", req.RemoteAddr)
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusServiceUnavailable, "the server is shutting down: open the tunnel again in a moment")
		return
	}
	if !opened {
		logger.Info("refused a tunnel: too many for one token", "syncTarget", key.target(), "token", key.tokenID, "max", MaxTunnelsPerToken, "remote", req.RemoteAddr)
		w.Header().Set("Retry-After", strconv.Itoa(int(DeadAfter/time.Second)))
		writeStatus(w, http.StatusTooManyRequests, fmt.Sprintf("token %s already holds %d tunnels, the most one token may hold: "+
			"a syncer keeps one open, is another syncer running with the same token? Stop it (or revoke the token if it leaked); "+
			"a tunnel that was cut is dropped within %s", key.tokenID, MaxTunnelsPerToken, DeadAfter))
		return
	}
	defer s.closed(key)
	logger.Info("tunnel opened", "syncTarget", key.target(), "token", key.tokenID, "remote", req.RemoteAddr)
	// The tunnel ends with the request (which the API server ends when the
	// token stops authenticating) or with the server.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	var tooLarge atomic.Pointer[error]
	s.rd.ServeHTTP(&watchingWriter{ResponseWriter: w, ctx: ctx, sweeper: s.sweeper, readLimit: MaxMessageBytes,
		onDead:       logDrop(logger, "syncTarget", key.target(), "remote", req.RemoteAddr),
		onReadFailed: func(err error) { tooLarge.Store(&err) },
	}, req)
	reason := "closed"
	if err := tooLarge.Load(); err != nil {
		reason = (*err).Error()
	} else if cause := context.Cause(req.Context()); cause != nil && !errors.Is(cause, context.Canceled) {
		reason = cause.Error()
	}
	logger.Info("tunnel closed", "syncTarget", key.target(), "token", key.tokenID, "remote", req.RemoteAddr, "reason", reason)
}

// opened counts a tunnel in, unless its token holds the most it may or
// the server is draining.
func (s *Server) opened(key tunnelKey) (ok, draining bool) {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return false, true
	}
	if s.tokens[key.tokenID] >= MaxTunnelsPerToken {
		s.mu.Unlock()
		return false, false
	}
	s.tokens[key.tokenID]++
	s.sessions[key]++
	first := s.targets[key.target()] == nil
	if first {
		s.targets[key.target()] = map[tunnelKey]int{}
	}
	s.targets[key.target()][key]++
	s.mu.Unlock()
	if first && s.onChange != nil {
		s.onChange(s.ctx, key.inv, key.st, true)
	}
	return true, false
}

// closed counts a tunnel out.
func (s *Server) closed(key tunnelKey) {
	s.mu.Lock()
	decrement(s.tokens, key.tokenID)
	var idle *http.Transport
	if decrement(s.sessions, key) == 0 {
		idle = s.transports[key]
		delete(s.transports, key)
	}
	last := false
	if keys := s.targets[key.target()]; keys != nil {
		decrement(keys, key)
		if len(keys) == 0 {
			delete(s.targets, key.target())
			last = true
		}
	}
	s.mu.Unlock()
	if idle != nil {
		idle.CloseIdleConnections()
	}
	if last && s.onChange != nil {
		s.onChange(s.ctx, key.inv, key.st, false)
	}
}

func decrement[K comparable](m map[K]int, k K) int {
	m[k]--
	n := m[k]
	if n <= 0 {
		delete(m, k)
	}
	return n
}

// current returns the key of a tunnel of the SyncTarget inv/st as it is
// now (by UID), if one is open here.
func (s *Server) current(inv, st string) (tunnelKey, bool) {
	if s.uidOf == nil {
		return tunnelKey{}, false
	}
	uid, ok := s.uidOf(inv, st)
	if !ok {
		return tunnelKey{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var found tunnelKey
	ok = false
	for key := range s.targets[inv+"/"+st] {
		// Of several (tokens rotated), the same one each time.
		if key.uid == uid && (!ok || key.tokenID < found.tokenID) {
			found, ok = key, true
		}
	}
	return found, ok && s.rd.HasSession(found.String())
}

// Connected reports whether a SyncTarget, as it is now, has a tunnel open.
func (s *Server) Connected(inventorySpace, syncTarget string) bool {
	_, ok := s.current(inventorySpace, syncTarget)
	return ok
}

// Held reports whether this server counts a tunnel of the SyncTarget open:
// the state onChange reports, true from before a new tunnel carries
// requests (Connected) to after it stopped.
func (s *Server) Held(inventorySpace, syncTarget string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.targets[inventorySpace+"/"+syncTarget] != nil
}

// Open lists the SyncTargets ("inventory/name") with a tunnel open.
func (s *Server) Open() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.targets))
	for target := range s.targets {
		out = append(out, target)
	}
	return out
}

// Drain refuses every new tunnel from now on (503 and Retry-After: the
// syncer tries again, at another server or at this one restarted) and
// lists the SyncTargets ("inventory/name") with a tunnel open, which stay
// open until Close. A server that is stopping drains, records that those
// tunnels are closing while it still serves, then closes them: no tunnel
// opens in between to be recorded as open on a server that is going.
func (s *Server) Drain() []string {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	return s.Open()
}

// Close ends every tunnel.
func (s *Server) Close() { s.close() }

// Tunnels counts the tokens with a tunnel open.
func (s *Server) Tunnels() int {
	return len(s.rd.ListClients())
}

// DialEdge opens a connection to a SyncTarget's edge API, through its
// tunnel (of the SyncTarget as it is now).
func (s *Server) DialEdge(ctx context.Context, inventorySpace, syncTarget string) (net.Conn, error) {
	key, ok := s.current(inventorySpace, syncTarget)
	if !ok {
		return nil, fmt.Errorf("SyncTarget %s/%s has no tunnel open", inventorySpace, syncTarget)
	}
	return s.dial(ctx, key)
}

func (s *Server) dial(ctx context.Context, key tunnelKey) (net.Conn, error) {
	return s.rd.Dialer(key.String())(ctx, "tcp", EdgeAPIAddress)
}

// EdgeProxy serves EdgesPrefix + INVENTORY/SYNCTARGET/proxy/PATH from that
// SyncTarget's edge cluster, through its tunnel. The caller's credentials
// stay at the center: the syncer calls its edge with its own.
func (s *Server) EdgeProxy() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		inv, st, rest, err := parseEdgePath(req.URL.Path)
		if err != nil {
			writeStatus(w, http.StatusNotFound, err.Error())
			return
		}
		target := inv + "/" + st
		key, ok := s.current(inv, st)
		if !ok {
			if s.peers != nil && s.peers.forward(w, req, inv, st, &s.buffers) {
				return
			}
			writeStatus(w, http.StatusServiceUnavailable, fmt.Sprintf("SyncTarget %s has no tunnel open: its syncer is not connected", target))
			return
		}
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme = "http"
				pr.Out.URL.Host = EdgeAPIAddress
				pr.Out.URL.Path = rest
				pr.Out.URL.RawPath = ""
				pr.Out.Host = EdgeAPIAddress
				for h := range pr.Out.Header {
					if h == "Authorization" || strings.HasPrefix(h, "Impersonate-") {
						pr.Out.Header.Del(h)
					}
				}
			},
			Transport:     retryTransport{rt: s.transport(key), attempts: 3},
			BufferPool:    &s.buffers,
			FlushInterval: -1, // watches and logs stream
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				writeStatus(w, http.StatusBadGateway, fmt.Sprintf("reaching the edge cluster of SyncTarget %s: %v", target, err))
			},
		}
		// Requests through a tunnel (watches, logs) end with the server.
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		defer context.AfterFunc(s.ctx, cancel)()
		proxy.ServeHTTP(w, req.WithContext(ctx))
	})
}

// maxEdgeHeaderBytes bounds the response headers an edge sends back.
const maxEdgeHeaderBytes = 1 << 20

func (s *Server) transport(key tunnelKey) *http.Transport {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.transports[key]
	if !ok {
		t = &http.Transport{
			DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return s.dial(ctx, key) },
			ForceAttemptHTTP2:      false,
			MaxResponseHeaderBytes: maxEdgeHeaderBytes,
			// Keep connections through the tunnel for reuse: each new one
			// costs a round trip to the edge, and remotedialer may drop a
			// connection opened just as the client reports its open ones.
			MaxIdleConns:        64,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}
		if s.sessions[key] > 0 { // not when the tunnel closed meanwhile
			s.transports[key] = t
		}
	}
	return t
}

// retryTransport sends a request that is safe to repeat again when it
// failed before any answer came. remotedialer closes a connection that the
// server opened just as the client listed its open ones (once a minute); a
// GET lost so has not reached the edge, or changed nothing there.
type retryTransport struct {
	rt       http.RoundTripper
	attempts int
}

func (r retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := r.rt.RoundTrip(req)
		if err == nil || attempt >= r.attempts || !replayable(req) || req.Context().Err() != nil {
			return resp, err
		}
	}
}

// replayable: a bodiless GET, HEAD or OPTIONS that upgrades nothing (exec
// and attach start a process; they are not repeated).
func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	return (req.Body == nil || req.Body == http.NoBody) && req.Header.Get("Upgrade") == ""
}

// parseEdgePath splits EdgesPrefix + INV/ST/proxy/REST.
func parseEdgePath(path string) (inv, st, rest string, err error) {
	tail, ok := strings.CutPrefix(path, EdgesPrefix)
	if !ok {
		return "", "", "", fmt.Errorf("not an edge path: %s", path)
	}
	parts := strings.SplitN(tail, "/", 4)
	if len(parts) < 3 || parts[2] != "proxy" {
		return "", "", "", fmt.Errorf("an edge is reached at %sINVENTORY/SYNCTARGET/proxy/PATH", EdgesPrefix)
	}
	for _, name := range parts[:2] {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return "", "", "", fmt.Errorf("%q is not a valid name: %s", name, strings.Join(errs, "; "))
		}
	}
	rest = "/"
	if len(parts) == 4 {
		rest += parts[3]
	}
	return parts[0], parts[1], rest, nil
}

// writeStatus answers with a Kubernetes Status, which kubectl shows well.
func writeStatus(w http.ResponseWriter, code int, message string) {
	status := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: message, Code: int32(code), Reason: metav1.StatusReason(http.StatusText(code))}
	switch code {
	case http.StatusForbidden:
		status.Reason = metav1.StatusReasonForbidden
	case http.StatusNotFound:
		status.Reason = metav1.StatusReasonNotFound
	case http.StatusBadRequest:
		status.Reason = metav1.StatusReasonBadRequest
	case http.StatusServiceUnavailable:
		status.Reason = metav1.StatusReasonServiceUnavailable
	case http.StatusUnauthorized:
		status.Reason = metav1.StatusReasonUnauthorized
	case http.StatusTooManyRequests:
		status.Reason = metav1.StatusReasonTooManyRequests
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}
