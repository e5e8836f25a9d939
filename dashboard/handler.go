// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
)

// Path is where the dashboard is served; the server's authentication lets
// its requests through without a bearer token, and Handler checks its own
// sessions.
const Path = "/dashboard"

// CookieName is the session cookie.
const CookieName = "kubestellar-dashboard"

// LoginCodesPath is where `kubestellar dashboard` POSTs, with its bearer
// token, for a login code.
const LoginCodesPath = Path + "/api/login-codes"

//go:embed web
var webFS embed.FS

// Handler serves the dashboard: its pages, the login-code exchange, and
// the views streamed with Server-Sent Events.
type Handler struct {
	ctx      context.Context
	store    *Store
	sessions *Sessions
	authz    authorizer.Authorizer
	loopback *rest.Config
	// visibleSpaces: see Options.
	visibleSpaces func(ctx context.Context) func(name string) bool
	now           func() time.Time
	static        http.Handler
	pages         *template.Template
	// settle is how long a stream waits after a change for more changes
	// before it computes its view again.
	settle time.Duration
	// keepalive is how often an idle stream sends a comment.
	keepalive time.Duration
}

// Options configure a Handler.
type Options struct {
	Store    *Store
	Sessions *Sessions
	// Authorizer decides what each session's identity may list, space by
	// space: the server's own authorizer.
	Authorizer authorizer.Authorizer
	// Loopback is a privileged client configuration of the root space; the
	// workload view impersonates the session's identity with it.
	Loopback *rest.Config
	// VisibleSpaces tells, for the user of a context, which Spaces it sees
	// (nil: all). Everyone may list Spaces and sees those it may use, so
	// being allowed to list them says nothing about which. Without it,
	// whoever may list Spaces sees them all.
	VisibleSpaces func(ctx context.Context) func(name string) bool
	Now           func() time.Time
}

// NewHandler returns the dashboard's handler; its streams end with ctx.
func NewHandler(ctx context.Context, o Options) (*Handler, error) {
	static, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, err
	}
	pages, err := template.ParseFS(webFS, "web/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard pages: %w", err)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Handler{ctx: ctx, store: o.Store, sessions: o.Sessions, authz: o.Authorizer, loopback: o.Loopback, visibleSpaces: o.VisibleSpaces, now: now,
		static: http.StripPrefix(Path+"/static/", http.FileServerFS(static)), pages: pages,
		settle: 200 * time.Millisecond, keepalive: 20 * time.Second}, nil
}

// IsLongRunning tells the API server's filters which dashboard requests
// stay open (the event streams), so that no request timeout ends them.
func IsLongRunning(r *http.Request) bool {
	return r.URL.Path == Path+"/api/events"
}

func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	// Login links carry their code: never to another site.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	h.keepSessionConnection(w, r)
	p := strings.TrimPrefix(r.URL.Path, Path)
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case p == "" && get:
		http.Redirect(w, r, Path+"/", http.StatusSeeOther)
	case p == "/login" && get:
		h.login(w, r)
	case p == "/logout" && r.Method == http.MethodPost:
		h.logout(w, r)
	case p == "/api/login-codes" && r.Method == http.MethodPost:
		h.newCode(w, r)
	case strings.HasPrefix(p, "/static/") && get:
		w.Header().Set("Cache-Control", "no-cache")
		h.static.ServeHTTP(w, r)
	case p == "/" && get:
		if _, ok := h.session(r); !ok {
			http.Redirect(w, r, Path+"/login", http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h.page(w, http.StatusOK, "index.html", nil)
	case p == "/api/events" && get:
		h.events(w, r)
	case p == "/api/workload" && get:
		h.workload(w, r)
	case p == rolloutAPI && r.Method == http.MethodPost:
		h.setPaused(w, r)
	case p == "/api/whoami" && get:
		sess, ok := h.session(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "no dashboard session: run `kubestellar dashboard` for a login link")
			return
		}
		writeJSON(w, http.StatusOK, sess.Identity)
	default:
		writeError(w, http.StatusNotFound, "not found")
	}
}

// keepSessionConnection lets a browser with a live session keep its
// HTTP/2 connection. The API server's authentication filter sees every
// dashboard request as anonymous (the session cookie is a credential only
// this handler knows) and, against HTTP/2 abuse by unauthenticated clients
// (CVE-2023-44487), asks with "Connection: close" that the connection end
// after this one request: the HTTP/2 server sends GOAWAY. A browser sends a
// page's requests over one connection, and fails one it had queued for a
// connection that closes so (ERR_CONNECTION_CLOSED): the script or the
// event stream of a page that then shows nothing. A live session
// authenticates the request, so its connection stays; without one, the API
// server's rule holds.
func (h *Handler) keepSessionConnection(w http.ResponseWriter, r *http.Request) {
	if w.Header().Get("Connection") == "" {
		return
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" && h.sessions.Alive(c.Value) {
		w.Header().Del("Connection")
	}
}

func (h *Handler) page(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		klog.FromContext(h.ctx).Error(err, "rendering dashboard page", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// session returns the request's live session.
func (h *Handler) session(r *http.Request) (Session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return Session{}, false
	}
	return h.sessions.Get(c.Value)
}

// newCode answers `kubestellar dashboard`: a one-time code bound to the
// identity the API server authenticated from its bearer token.
func (h *Handler) newCode(w http.ResponseWriter, r *http.Request) {
	u, ok := request.UserFrom(r.Context())
	if !ok || u == nil || u.GetName() == user.Anonymous || slices.Contains(u.GetGroups(), user.AllUnauthenticated) {
		writeError(w, http.StatusUnauthorized, "a login code needs credentials: run `kubestellar dashboard` with a kubeconfig that carries your token")
		return
	}
	if _, _, isSyncer := principal.SyncTargetOf(u); isSyncer || slices.Contains(u.GetGroups(), principal.SyncersGroup) {
		writeError(w, http.StatusForbidden, "a syncer token cannot open the dashboard: use an admin's or a user's kubeconfig")
		return
	}
	if _, _, err := serviceaccount.SplitUsername(u.GetName()); err == nil && len(u.GetExtra()[principal.ExtraSpace]) != 1 {
		// Its space would be lost: a session acts in every space.
		writeError(w, http.StatusForbidden, "a ServiceAccount opens the dashboard with a token of its own (kubectl create token), not by impersonation")
		return
	}
	c, expires, err := h.sessions.NewCode(IdentityOf(u))
	if err != nil {
		writeError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	klog.FromContext(r.Context()).V(2).Info("dashboard login code made", "user", u.GetName())
	writeJSON(w, http.StatusCreated, LoginCode{Code: c, Path: Path + "/login?code=" + url.QueryEscape(c), ExpiresAt: expires.UTC()})
}

// LoginCode is the answer to a POST of LoginCodesPath.
type LoginCode struct {
	Code string `json:"code"`
	// Path, on the server's URL, is the login link.
	Path      string    `json:"path"`
	ExpiresAt time.Time `json:"expiresAt"`
}

type loginPage struct {
	Message string
}

// login exchanges a code for a session cookie, then sends the browser to
// the dashboard. The move is a page of its own rather than a 3xx: a
// browser that followed the link from another site would not send a
// SameSite=Strict cookie on a redirect of that navigation.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	c := r.URL.Query().Get("code")
	w.Header().Set("Cache-Control", "no-store")
	if c == "" {
		if _, ok := h.session(r); ok {
			http.Redirect(w, r, Path+"/", http.StatusSeeOther)
			return
		}
		h.page(w, http.StatusUnauthorized, "login.html", loginPage{})
		return
	}
	sess, ok, err := h.sessions.Redeem(c)
	if err != nil {
		klog.FromContext(r.Context()).Error(err, "making a dashboard session")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if !ok {
		h.page(w, http.StatusUnauthorized, "login.html", loginPage{Message: "This login link has expired or was used already. Run kubestellar dashboard for a new one."})
		return
	}
	http.SetCookie(w, SessionCookie(sess.ID))
	klog.FromContext(r.Context()).Info("dashboard session opened", "user", sess.Identity.Name)
	h.page(w, http.StatusOK, "enter.html", nil)
}

// SessionCookie is the cookie that carries session id.
func SessionCookie(id string) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: id, Path: Path + "/", MaxAge: int(SessionMaxTTL / time.Second),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode}
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "logout from another site")
		return
	}
	if c, err := r.Cookie(CookieName); err == nil {
		h.sessions.End(c.Value)
	}
	gone := SessionCookie("")
	gone.MaxAge = -1
	http.SetCookie(w, gone)
	http.Redirect(w, r, Path+"/login", http.StatusSeeOther)
}

// sameOrigin tells whether a POST comes from the dashboard's own pages, by
// the headers browsers set (Sec-Fetch-Site, else Origin); the session
// cookie's SameSite=Strict is the first guard.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		u, err := url.Parse(origin)
		return err == nil && u.Host == r.Host
	}
	return true
}

// accessCacheTTL is how long a stream trusts an authorization decision.
const accessCacheTTL = 10 * time.Second

// visibleTo returns what identity may list, by the server's authorizer in
// each space, each decision kept accessCacheTTL.
func (h *Handler) visibleTo(ctx context.Context, id Identity) Visible {
	return h.allowedTo(ctx, id, "list")
}

// allowedTo returns what identity may do verb to, as visibleTo does.
func (h *Handler) allowedTo(ctx context.Context, id Identity, verb string) Visible {
	type decision struct {
		allowed bool
		at      time.Time
	}
	u := id.User()
	cached := map[string]decision{}
	return func(space string, gvr schema.GroupVersionResource) bool {
		k := space + " " + gvr.String()
		now := h.now()
		if d, ok := cached[k]; ok && now.Sub(d.at) < accessCacheTTL {
			return d.allowed
		}
		var allowed bool
		if gvr == SpacesGVR && h.visibleSpaces != nil {
			// (root, Spaces): sees them all; (name, Spaces): sees that one.
			sees := h.visibleSpaces(request.WithUser(ctx, u))
			allowed = sees == nil || (space != spaces.Root && sees(space))
		} else {
			attrs := authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: gvr.Group, APIVersion: gvr.Version,
				Resource: gvr.Resource, ResourceRequest: true}
			d, _, err := h.authz.Authorize(spaces.WithSpace(ctx, space), attrs)
			allowed = err == nil && d == authorizer.DecisionAllow
		}
		cached[k] = decision{allowed: allowed, at: now}
		return allowed
	}
}

// Update is one message of an event stream: the view asked for, as of Now.
type Update struct {
	View    string          `json:"view"`
	Now     time.Time       `json:"now"`
	User    string          `json:"user"`
	Loading bool            `json:"loading,omitempty"`
	Fleet   *FleetView      `json:"fleet,omitempty"`
	Spaces  *SpacesView     `json:"spaces,omitempty"`
	Places  *PlacementsView `json:"placements,omitempty"`
}

func queryOf(r *http.Request) Query {
	v := r.URL.Query()
	pageNo, _ := strconv.Atoi(v.Get("page"))
	size, _ := strconv.Atoi(v.Get("size"))
	return Query{Page: pageNo, PageSize: size, Text: v.Get("q"), Only: v.Get("only")}
}

// Compute returns the view of the store that visible allows.
func (s *Store) Compute(view string, visible Visible, now time.Time, q Query) Update {
	u := Update{View: view, Now: now.UTC()}
	if !s.Synced() {
		u.Loading = true
		return u
	}
	snap := s.snapshot(visible)
	switch view {
	case "spaces":
		v := Spaces(snap.spaces, q)
		u.Spaces = &v
	case "placements":
		v := Placements(snap.placements, snap.slices, snap.edgeIndex, snap.copies, now, q)
		u.Places = &v
	default:
		u.View = "fleet"
		v := Fleet(snap.edges, now, q)
		u.Fleet = &v
	}
	return u
}

// events streams a view, computed again after each change of the store
// (and as edges fall silent), sent only when it differs from the last.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	sess, ok := h.session(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "no dashboard session: run `kubestellar dashboard` for a login link")
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel)
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	view, q := r.URL.Query().Get("view"), queryOf(r)
	visible := h.visibleTo(ctx, sess.Identity)
	patchable := h.allowedTo(ctx, sess.Identity, "patch")
	keepalive := time.NewTicker(h.keepalive)
	defer keepalive.Stop()
	var last []byte
	for {
		changed := h.store.Changed()
		if !h.sessions.Alive(sess.ID) {
			_, _ = fmt.Fprint(w, "event: logout\ndata: {}\n\n")
			flusher.Flush()
			return
		}
		u := h.store.Compute(view, visible, h.now(), q)
		u.User = sess.Identity.Name
		if u.Places != nil {
			for i := range u.Places.Placements {
				if r := u.Places.Placements[i].Rollout; r != nil {
					r.MayPause = patchable(u.Places.Placements[i].Space, PlacementsGVR)
				}
			}
		}
		data, err := json.Marshal(u)
		if err != nil {
			klog.FromContext(ctx).Error(err, "encoding a dashboard view")
			return
		}
		// Now moves on every time: compare without it.
		if body := withoutNow(data); !bytes.Equal(body, last) {
			last = body
			if _, err := fmt.Fprintf(w, "event: view\ndata: %s\n\n", data); err != nil {
				return
			}
			flusher.Flush()
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-keepalive.C:
				if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
					return
				}
				flusher.Flush()
				if !h.sessions.Alive(sess.ID) {
					break wait
				}
			case <-changed:
				// Let a burst of changes settle.
				select {
				case <-ctx.Done():
					return
				case <-time.After(h.settle):
				}
				break wait
			}
		}
	}
}

// withoutNow drops the leading "now" field's value from an encoded Update.
func withoutNow(data []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	delete(m, "now")
	out, _ := json.Marshal(m)
	return out
}
