// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/spaces"
)

// spaceAuthorizer allows system:masters everything, and others to list in
// the spaces it names for them.
type spaceAuthorizer map[string][]string

func (a spaceAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	for _, g := range u.GetGroups() {
		if g == user.SystemPrivilegedGroup {
			return authorizer.DecisionAllow, "", nil
		}
	}
	for _, s := range a[u.GetName()] {
		if s == spaces.SpaceOrRoot(ctx) && attrs.GetVerb() == "list" {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionDeny, "no", nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: its decisions
// carry no conditions, so it answers as Authorize does (a wrapper must not
// let the wrapped authorizer's answer through unchanged).
func (a spaceAuthorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: no decision of its
// has conditions to evaluate.
func (spaceAuthorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func testHandler(t *testing.T) (*Handler, *Store) {
	t.Helper()
	store := NewStore()
	store.synced = true
	store.edges["inv1/a"] = edgeOf("inv1", syncTarget("a", metav1.ConditionTrue, time.Second, 0))
	store.edges["inv2/b"] = edgeOf("inv2", syncTarget("b", metav1.ConditionFalse, time.Second, 0))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := NewHandler(ctx, Options{Store: store, Sessions: NewSessions(func() time.Time { return now }),
		Authorizer: spaceAuthorizer{"alice": {"inv2"}}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	h.settle = time.Millisecond
	return h, store
}

func serve(h http.Handler, method, target string, u user.Info, cookie *http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	if u != nil {
		req = req.WithContext(request.WithUser(req.Context(), u))
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestLoginCodes(t *testing.T) {
	h, _ := testHandler(t)
	tests := []struct {
		desc       string
		user       user.Info
		wantStatus int
	}{
		{desc: "no user", wantStatus: http.StatusUnauthorized},
		{desc: "anonymous", user: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}, wantStatus: http.StatusUnauthorized},
		{desc: "a syncer", user: &user.DefaultInfo{Name: "system:kubestellar:syncer:inv1:a", Groups: []string{"kubestellar:syncers"}}, wantStatus: http.StatusForbidden},
		{desc: "a user", user: &user.DefaultInfo{Name: "alice", Groups: []string{"team-a"}}, wantStatus: http.StatusCreated},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			rec := serve(h, http.MethodPost, LoginCodesPath, tc.user, nil)
			require.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			if tc.wantStatus != http.StatusCreated {
				return
			}
			var code LoginCode
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &code))
			require.Equal(t, "/dashboard/login?code="+code.Code, code.Path)
			require.Equal(t, now.Add(CodeTTL), code.ExpiresAt)
		})
	}
	require.Equal(t, http.StatusNotFound, serve(h, http.MethodGet, LoginCodesPath, &user.DefaultInfo{Name: "alice"}, nil).Code, "POST only")
}

// login runs the whole exchange for u and returns the session cookie.
func loginAs(t *testing.T, h *Handler, u user.Info) *http.Cookie {
	t.Helper()
	rec := serve(h, http.MethodPost, LoginCodesPath, u, nil)
	require.Equal(t, http.StatusCreated, rec.Code)
	var code LoginCode
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &code))
	rec = serve(h, http.MethodGet, code.Path, nil, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `url=/dashboard/`)
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].HttpOnly && cookies[0].Secure && cookies[0].SameSite == http.SameSiteStrictMode)
	require.Equal(t, "same-origin", rec.Header().Get("Referrer-Policy"))
	// The link works once.
	again := serve(h, http.MethodGet, code.Path, nil, nil)
	require.Equal(t, http.StatusUnauthorized, again.Code)
	require.Empty(t, again.Result().Cookies())
	return &http.Cookie{Name: cookies[0].Name, Value: cookies[0].Value}
}

func TestWithoutSession(t *testing.T) {
	h, _ := testHandler(t)
	bogus := &http.Cookie{Name: CookieName, Value: "forged"}
	for _, c := range []*http.Cookie{nil, bogus} {
		for _, path := range []string{"/dashboard/api/events?view=fleet", "/dashboard/api/whoami", "/dashboard/api/workload?space=wds1&resource=v1/configmaps&name=x"} {
			rec := serve(h, http.MethodGet, path, nil, c)
			require.Equal(t, http.StatusUnauthorized, rec.Code, path)
			require.NotContains(t, rec.Body.String(), "inv1")
		}
		rec := serve(h, http.MethodGet, "/dashboard/", nil, c)
		require.Equal(t, http.StatusSeeOther, rec.Code)
		require.Equal(t, "/dashboard/login", rec.Header().Get("Location"))
		rec = serve(h, http.MethodGet, "/dashboard/login", nil, c)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.Contains(t, rec.Body.String(), "kubestellar dashboard")
	}
	// The static assets hold no data and need no session.
	rec := serve(h, http.MethodGet, "/dashboard/static/app.js", nil, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'none'")
}

// firstView reads the first view event of a stream.
func firstView(t *testing.T, h *Handler, cookie *http.Cookie, query string) Update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/api/events?"+query, nil)
	require.NoError(t, err)
	req.AddCookie(cookie)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var u Update
			require.NoError(t, json.Unmarshal([]byte(data), &u))
			return u
		}
	}
	t.Fatalf("the stream ended without a view: %v", sc.Err())
	return Update{}
}

func TestEventsPerIdentity(t *testing.T) {
	h, _ := testHandler(t)
	admin := loginAs(t, h, &user.DefaultInfo{Name: "kubestellar-admin", Groups: []string{user.SystemPrivilegedGroup}})
	alice := loginAs(t, h, &user.DefaultInfo{Name: "alice", Groups: []string{"team-a"}})
	bob := loginAs(t, h, &user.DefaultInfo{Name: "bob"})

	u := firstView(t, h, admin, "view=fleet")
	require.Equal(t, "kubestellar-admin", u.User)
	require.Equal(t, 2, u.Fleet.Counts.Total)
	u = firstView(t, h, alice, "view=fleet")
	require.Equal(t, "alice", u.User)
	require.Equal(t, 1, u.Fleet.Counts.Total)
	require.Equal(t, "inv2", u.Fleet.Edges[0].Space)
	u = firstView(t, h, bob, "view=fleet")
	require.Zero(t, u.Fleet.Counts.Total)
}

func TestEventsFollowChanges(t *testing.T) {
	h, store := testHandler(t)
	cookie := loginAs(t, h, &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/api/events?view=fleet", nil)
	require.NoError(t, err)
	req.AddCookie(cookie)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	views := make(chan Update)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var u Update
				if json.Unmarshal([]byte(data), &u) == nil {
					select {
					case views <- u:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	require.Equal(t, 1, (<-views).Fleet.Counts.Connected)
	store.mu.Lock()
	store.edges["inv2/b"] = edgeOf("inv2", syncTarget("b", metav1.ConditionTrue, time.Second, 0))
	store.notifyLocked()
	store.mu.Unlock()
	select {
	case u := <-views:
		require.Equal(t, 2, u.Fleet.Counts.Connected)
	case <-ctx.Done():
		t.Fatal("the stream did not follow the change")
	}
	// Logout ends the stream's session: it says so and ends.
	rec := serve(h, http.MethodPost, "/dashboard/logout", nil, cookie)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, -1, rec.Result().Cookies()[0].MaxAge)
	store.mu.Lock()
	store.notifyLocked()
	store.mu.Unlock()
	require.Equal(t, http.StatusUnauthorized, serve(h, http.MethodGet, "/dashboard/api/whoami", nil, cookie).Code)
}

func TestLogoutFromAnotherSite(t *testing.T) {
	h, _ := testHandler(t)
	cookie := loginAs(t, h, &user.DefaultInfo{Name: "alice"})
	req := httptest.NewRequest(http.MethodPost, "https://center:6443/dashboard/logout", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Equal(t, http.StatusOK, serve(h, http.MethodGet, "/dashboard/api/whoami", nil, cookie).Code)
}

// TestSessionKeepsConnection: the API server's authentication filter asks,
// with "Connection: close", that an anonymous client's HTTP/2 connection
// end after one request; a request with a live session lifts that, one
// without keeps it.
func TestSessionKeepsConnection(t *testing.T) {
	h, _ := testHandler(t)
	live := loginAs(t, h, &user.DefaultInfo{Name: "alice"})
	ended := loginAs(t, h, &user.DefaultInfo{Name: "bob"})
	require.Equal(t, http.StatusSeeOther, serve(h, http.MethodPost, "/dashboard/logout", nil, ended).Code)
	tests := []struct {
		desc   string
		cookie *http.Cookie
		want   string
	}{
		{desc: "no session", want: "close"},
		{desc: "a forged session", cookie: &http.Cookie{Name: CookieName, Value: "forged"}, want: "close"},
		{desc: "an ended session", cookie: ended, want: "close"},
		{desc: "a live session", cookie: live, want: ""},
	}
	for _, tc := range tests {
		for _, path := range []string{"/dashboard/", "/dashboard/static/app.js", "/dashboard/api/whoami", "/dashboard/login"} {
			t.Run(tc.desc+" "+path, func(t *testing.T) {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				if tc.cookie != nil {
					req.AddCookie(tc.cookie)
				}
				rec := httptest.NewRecorder()
				rec.Header().Set("Connection", "close")
				h.ServeHTTP(rec, req)
				require.Equal(t, tc.want, rec.Result().Header.Get("Connection"))
			})
		}
	}
}

// TestPagesHaveIcons: every page names its icon, so that a browser does not
// ask the API server for /favicon.ico, as an anonymous client whose
// connection the API server closes under the page's other requests.
func TestPagesHaveIcons(t *testing.T) {
	h, _ := testHandler(t)
	cookie := loginAs(t, h, &user.DefaultInfo{Name: "alice"})
	for _, page := range []*httptest.ResponseRecorder{
		serve(h, http.MethodGet, "/dashboard/login", nil, nil),
		serve(h, http.MethodGet, "/dashboard/login?code=used", nil, nil),
		serve(h, http.MethodGet, "/dashboard/", nil, cookie),
	} {
		require.Contains(t, page.Body.String(), `<link rel="icon" href="data:image/svg+xml,`)
	}
	rec := serve(h, http.MethodPost, LoginCodesPath, &user.DefaultInfo{Name: "alice"}, nil)
	var code LoginCode
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &code))
	require.Contains(t, serve(h, http.MethodGet, code.Path, nil, nil).Body.String(), `<link rel="icon" href="data:image/svg+xml,`)
}

// TestSpacesSeenByMembers: everyone may list Spaces, so the dashboard asks
// which ones a user sees rather than whether it may list them.
func TestSpacesSeenByMembers(t *testing.T) {
	h, _ := testHandler(t)
	h.visibleSpaces = func(ctx context.Context) func(string) bool {
		u, _ := request.UserFrom(ctx)
		if u.GetName() == "admin" {
			return nil
		}
		return func(name string) bool { return name == "wds1" }
	}
	alice := h.visibleTo(context.Background(), Identity{Name: "alice"})
	require.False(t, alice(spaces.Root, SpacesGVR), "alice sees not every space")
	require.True(t, alice("wds1", SpacesGVR))
	require.False(t, alice("wds2", SpacesGVR))
	admin := h.visibleTo(context.Background(), Identity{Name: "admin"})
	require.True(t, admin(spaces.Root, SpacesGVR))
}
