package tunnel

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rancher/remotedialer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/embedded/auth"
)

// Server holds the syncers' tunnels.
type Server struct {
	ctx      context.Context
	rd       *remotedialer.Server
	onChange func(ctx context.Context, inventorySpace, syncTarget string, connected bool)

	// peers, when set, forward requests for tunnels held by other servers.
	peers *Peers

	mu         sync.Mutex
	sessions   map[string]int // open tunnels per "inventory/synctarget"
	transports map[string]*http.Transport
}

// NewServer returns a tunnel server; onChange (may be nil) hears when a
// SyncTarget's first tunnel opens and its last one closes.
func NewServer(ctx context.Context, onChange func(ctx context.Context, inventorySpace, syncTarget string, connected bool)) *Server {
	s := &Server{ctx: ctx, onChange: onChange, sessions: map[string]int{}, transports: map[string]*http.Transport{}}
	s.rd = remotedialer.New(s.clientKey, func(w http.ResponseWriter, _ *http.Request, code int, err error) {
		writeStatus(w, code, err.Error())
	})
	return s
}

// SetPeers makes the edge proxy forward requests for tunnels that other
// servers of the cluster hold. Call it before serving.
func (s *Server) SetPeers(p *Peers) { s.peers = p }

// clientKey names a tunnel after the SyncTarget of its token.
func (s *Server) clientKey(req *http.Request) (string, bool, error) {
	u, _ := request.UserFrom(req.Context())
	inv, st, ok := auth.SyncTargetOf(u)
	if !ok {
		return "", false, nil
	}
	return inv + "/" + st, true, nil
}

// ServeHTTP opens a syncer's tunnel and holds it until it closes.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	logger := klog.FromContext(s.ctx)
	key, ok, _ := s.clientKey(req)
	if !ok {
		u, _ := request.UserFrom(req.Context())
		name := "<anonymous>"
		if u != nil {
			name = u.GetName()
		}
		logger.Info("refused a tunnel: not a syncer's token", "user", name, "remote", req.RemoteAddr)
		writeStatus(w, http.StatusForbidden, fmt.Sprintf("user %q may not open a tunnel: only a syncer's token does", name))
		return
	}
	if !websocket.IsWebSocketUpgrade(req) {
		logger.Info("refused a tunnel: not a WebSocket handshake", "syncTarget", key, "remote", req.RemoteAddr)
		writeStatus(w, http.StatusBadRequest, "a tunnel is opened with a WebSocket handshake (HTTP/1.1 GET with Upgrade: websocket)")
		return
	}
	s.changed(key, +1)
	defer s.changed(key, -1)
	logger.Info("tunnel opened", "syncTarget", key, "remote", req.RemoteAddr)
	// The tunnel ends with the request or with the server.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	s.rd.ServeHTTP(&watchingWriter{ResponseWriter: w, ctx: ctx, deadAfter: DeadAfter, onDead: func() {
		logger.Info("tunnel silent too long: dropping it", "syncTarget", key, "remote", req.RemoteAddr, "after", DeadAfter)
	}}, req)
	logger.Info("tunnel closed", "syncTarget", key, "remote", req.RemoteAddr)
}

func (s *Server) changed(key string, delta int) {
	s.mu.Lock()
	before := s.sessions[key]
	s.sessions[key] = before + delta
	if s.sessions[key] == 0 {
		delete(s.sessions, key)
	}
	after := s.sessions[key]
	s.mu.Unlock()
	if s.onChange == nil || (before > 0) == (after > 0) {
		return
	}
	inv, st, _ := strings.Cut(key, "/")
	s.onChange(s.ctx, inv, st, after > 0)
}

// Connected reports whether a SyncTarget has a tunnel open.
func (s *Server) Connected(inventorySpace, syncTarget string) bool {
	return s.rd.HasSession(inventorySpace + "/" + syncTarget)
}

// Open lists the SyncTargets ("inventory/name") with a tunnel open.
func (s *Server) Open() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.sessions))
	for key := range s.sessions {
		out = append(out, key)
	}
	return out
}

// Tunnels counts the open tunnels.
func (s *Server) Tunnels() int {
	return len(s.rd.ListClients())
}

// DialEdge opens a connection to a SyncTarget's edge API, through its tunnel.
func (s *Server) DialEdge(ctx context.Context, inventorySpace, syncTarget string) (net.Conn, error) {
	return s.rd.Dialer(inventorySpace+"/"+syncTarget)(ctx, "tcp", EdgeAPIAddress)
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
		key := inv + "/" + st
		if !s.rd.HasSession(key) {
			if s.peers != nil && s.peers.forward(w, req, inv, st) {
				return
			}
			writeStatus(w, http.StatusServiceUnavailable, fmt.Sprintf("SyncTarget %s has no tunnel open: its syncer is not connected", key))
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
			Transport:     retryTransport{rt: s.transport(inv, st), attempts: 3},
			FlushInterval: -1, // watches and logs stream
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				writeStatus(w, http.StatusBadGateway, fmt.Sprintf("reaching the edge cluster of SyncTarget %s: %v", key, err))
			},
		}
		// Requests through a tunnel (watches, logs) end with the server.
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		defer context.AfterFunc(s.ctx, cancel)()
		proxy.ServeHTTP(w, req.WithContext(ctx))
	})
}

func (s *Server) transport(inv, st string) *http.Transport {
	key := inv + "/" + st
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.transports[key]
	if !ok {
		t = &http.Transport{
			DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return s.DialEdge(ctx, inv, st) },
			ForceAttemptHTTP2: false,
			// Keep connections through the tunnel for reuse: each new one
			// costs a round trip to the edge, and remotedialer may drop a
			// connection opened just as the client reports its open ones.
			MaxIdleConns:        64,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}
		s.transports[key] = t
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
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}
