// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/spaces"
)

func testTokens() *Tokens {
	tokens := &Tokens{}
	tokens.Add("admin-token", AdminInfo())
	tokens.Add("alice-token", &user.DefaultInfo{Name: "alice", Groups: []string{"devs", user.AllAuthenticated}})
	return tokens
}

func TestTokens(t *testing.T) {
	tokens := testTokens()
	tests := []struct {
		token    string
		wantUser string
	}{
		{token: "admin-token", wantUser: AdminUser},
		{token: "alice-token", wantUser: "alice"},
		{token: "bob-token"},
		{token: ""},
		{token: "admin-token "},
		{token: "ADMIN-TOKEN"},
		{token: "admin-toke"},
	}
	for _, tc := range tests {
		t.Run(tc.token, func(t *testing.T) {
			resp, ok, err := tokens.AuthenticateToken(context.Background(), tc.token)
			require.NoError(t, err)
			if tc.wantUser == "" {
				require.False(t, ok)
				require.Nil(t, resp)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.wantUser, resp.User.GetName())
		})
	}

	var empty Tokens
	_, ok, err := empty.AuthenticateToken(context.Background(), "")
	require.NoError(t, err)
	require.False(t, ok, "no token authenticates against an empty set")
}

func TestAdminInfo(t *testing.T) {
	info := AdminInfo()
	require.Equal(t, AdminUser, info.GetName())
	require.Contains(t, info.GetGroups(), user.SystemPrivilegedGroup)
	require.Contains(t, info.GetGroups(), user.AllAuthenticated)
}

func TestRequestAuthenticator(t *testing.T) {
	authn := NewRequestAuthenticator(testTokens())
	tests := []struct {
		desc     string
		method   string
		path     string
		header   string
		wantUser string // "" when not authenticated
		wantErr  bool
	}{
		{desc: "admin token", method: http.MethodGet, path: "/api/v1/pods", header: "Bearer admin-token", wantUser: AdminUser},
		{desc: "admin token on a public path", method: http.MethodGet, path: "/healthz", header: "Bearer admin-token", wantUser: AdminUser},
		{desc: "admin token posts", method: http.MethodPost, path: "/api/v1/namespaces", header: "Bearer admin-token", wantUser: AdminUser},
		{desc: "lowercase bearer", method: http.MethodGet, path: "/api", header: "bearer alice-token", wantUser: "alice"},
		{desc: "anonymous healthz", method: http.MethodGet, path: "/healthz", wantUser: user.Anonymous},
		{desc: "anonymous healthz check", method: http.MethodGet, path: "/healthz/etcd", wantUser: user.Anonymous},
		{desc: "anonymous livez", method: http.MethodGet, path: "/livez", wantUser: user.Anonymous},
		{desc: "anonymous readyz", method: http.MethodGet, path: "/readyz", wantUser: user.Anonymous},
		{desc: "anonymous version", method: http.MethodGet, path: "/version", wantUser: user.Anonymous},
		{desc: "anonymous api", method: http.MethodGet, path: "/api"},
		{desc: "anonymous root", method: http.MethodGet, path: "/"},
		{desc: "anonymous resources", method: http.MethodGet, path: "/api/v1/secrets"},
		{desc: "anonymous lookalike", method: http.MethodGet, path: "/healthzz"},
		{desc: "anonymous version prefix", method: http.MethodGet, path: "/versions"},
		{desc: "anonymous metrics", method: http.MethodGet, path: "/metrics"},
		{desc: "anonymous post to healthz", method: http.MethodPost, path: "/healthz"},
		{desc: "anonymous head of healthz", method: http.MethodHead, path: "/healthz"},
		{desc: "anonymous dashboard", method: http.MethodGet, path: "/dashboard/", wantUser: user.Anonymous},
		{desc: "anonymous dashboard without slash", method: http.MethodGet, path: "/dashboard", wantUser: user.Anonymous},
		{desc: "anonymous dashboard post", method: http.MethodPost, path: "/dashboard/logout", wantUser: user.Anonymous},
		{desc: "anonymous dashboard head", method: http.MethodHead, path: "/dashboard/login", wantUser: user.Anonymous},
		{desc: "anonymous dashboard delete", method: http.MethodDelete, path: "/dashboard/api/x"},
		{desc: "anonymous dashboard put", method: http.MethodPut, path: "/dashboard/api/x"},
		{desc: "anonymous dashboard lookalike", method: http.MethodGet, path: "/dashboards"},
		{desc: "user token on the dashboard", method: http.MethodPost, path: "/dashboard/api/login-codes", header: "Bearer alice-token", wantUser: "alice"},
		{desc: "bad token on the dashboard", method: http.MethodPost, path: "/dashboard/api/login-codes", header: "Bearer nope", wantErr: true},
		{desc: "bad token", method: http.MethodGet, path: "/api", header: "Bearer nope", wantErr: true},
		{desc: "bad token on a public path", method: http.MethodGet, path: "/healthz", header: "Bearer nope", wantErr: true},
		{desc: "basic auth on a public path", method: http.MethodGet, path: "/healthz", header: "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))},
		{desc: "basic auth", method: http.MethodGet, path: "/api", header: "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, ok, err := authn.AuthenticateRequest(req)
			if tc.wantErr {
				require.Error(t, err)
				require.False(t, ok)
				return
			}
			require.NoError(t, err)
			if tc.wantUser == "" {
				require.False(t, ok)
				require.Nil(t, resp)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.wantUser, resp.User.GetName())
			if tc.wantUser == user.Anonymous {
				require.Equal(t, []string{user.AllUnauthenticated}, resp.User.GetGroups())
			}
		})
	}
}

func TestAuthorizer(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}
	tests := []struct {
		desc       string
		space      string // "" for none in the context
		attrs      authorizer.AttributesRecord
		wantAllow  bool
		wantReason string
	}{
		{desc: "admin resource write", space: "foo", attrs: authorizer.AttributesRecord{User: AdminInfo(), Verb: "create", ResourceRequest: true, Resource: "pods", Namespace: "ns"}, wantAllow: true},
		{desc: "admin non-resource", attrs: authorizer.AttributesRecord{User: AdminInfo(), Verb: "post", Path: "/anything"}, wantAllow: true},
		{desc: "masters group, vouched for by authentication", attrs: authorizer.AttributesRecord{User: provenance.Vouch(&user.DefaultInfo{Name: "loopback", Groups: []string{user.SystemPrivilegedGroup}}), Verb: "delete", ResourceRequest: true, Resource: "spaces"}, wantAllow: true},
		{desc: "masters group named by impersonation", attrs: authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "loopback", Groups: []string{user.SystemPrivilegedGroup}}, Verb: "delete", ResourceRequest: true, Resource: "spaces"},
			wantReason: `user "loopback" has no access to space "root"`},
		{desc: "the server's name and group, named by impersonation", space: "team-a", attrs: authorizer.AttributesRecord{User: &user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}}, Verb: "create", ResourceRequest: true, APIGroup: "edge.kubestellar.io", Resource: "singleplacementslices"},
			wantReason: `user "system:apiserver" has no access to space "team-a"`},
		{desc: "anyone reads healthz", attrs: authorizer.AttributesRecord{User: &user.DefaultInfo{Name: user.Anonymous}, Verb: "get", Path: "/healthz"}, wantAllow: true},
		{desc: "anyone reads readyz checks", attrs: authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/readyz/ping"}, wantAllow: true},
		{desc: "nobody reads version", attrs: authorizer.AttributesRecord{Verb: "get", Path: "/version"}, wantAllow: true},
		{desc: "anyone gets the dashboard", attrs: authorizer.AttributesRecord{User: &user.DefaultInfo{Name: user.Anonymous}, Verb: "get", Path: "/dashboard/"}, wantAllow: true},
		{desc: "anyone posts to the dashboard", attrs: authorizer.AttributesRecord{User: alice, Verb: "post", Path: "/dashboard/api/login-codes"}, wantAllow: true},
		{desc: "dashboard put", attrs: authorizer.AttributesRecord{User: alice, Verb: "put", Path: "/dashboard/api/x"}, wantReason: `user "alice" has no access to space "root"`},
		{desc: "dashboard in a space", space: "foo", attrs: authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/dashboard/"}, wantReason: `user "alice" has no access to space "foo"`},
		{desc: "dashboard lookalike", attrs: authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/dashboardx"}, wantReason: `user "alice" has no access to space "root"`},
		{desc: "resource named like the dashboard", attrs: authorizer.AttributesRecord{User: alice, Verb: "get", ResourceRequest: true, Resource: "pods", Path: "/dashboard/"}, wantReason: `user "alice" has no access to space "root"`},
		{desc: "post to healthz", space: "foo", attrs: authorizer.AttributesRecord{User: alice, Verb: "post", Path: "/healthz"}, wantReason: `user "alice" has no access to space "foo"`},
		{desc: "resource named like a public path", space: "foo", attrs: authorizer.AttributesRecord{User: alice, Verb: "get", ResourceRequest: true, Resource: "pods", Path: "/healthz"}, wantReason: `user "alice" has no access to space "foo"`},
		{desc: "other non-resource", space: "foo", attrs: authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/metrics"}, wantReason: `user "alice" has no access to space "foo"`},
		{desc: "resource read in root", attrs: authorizer.AttributesRecord{User: alice, Verb: "get", ResourceRequest: true, Resource: "pods"}, wantReason: `user "alice" has no access to space "root"`},
		{desc: "wildcard", space: spaces.Wildcard, attrs: authorizer.AttributesRecord{User: alice, Verb: "list", ResourceRequest: true, Resource: "pods"}, wantReason: `user "alice" has no access to space "*"`},
		{desc: "no user", space: "bar", attrs: authorizer.AttributesRecord{Verb: "list", ResourceRequest: true, Resource: "pods"}, wantReason: `user "<anonymous>" has no access to space "bar"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			if tc.space != "" {
				ctx = spaces.WithSpace(ctx, tc.space)
			}
			attrs := tc.attrs
			if attrs.User == nil {
				// An AttributesRecord with a nil *DefaultInfo would be a non-nil interface.
				decision, reason, err := Authorizer{}.Authorize(ctx, attributesWithoutUser{attrs})
				require.NoError(t, err)
				require.Equal(t, tc.wantAllow, decision == authorizer.DecisionAllow)
				require.Equal(t, tc.wantReason, reason)
				return
			}
			decision, reason, err := Authorizer{}.Authorize(ctx, attrs)
			require.NoError(t, err)
			if tc.wantAllow {
				require.Equal(t, authorizer.DecisionAllow, decision)
				require.Empty(t, reason)
				return
			}
			require.Equal(t, authorizer.DecisionDeny, decision)
			require.Equal(t, tc.wantReason, reason)
		})
	}
}

// attributesWithoutUser returns a nil user.Info.
type attributesWithoutUser struct{ authorizer.AttributesRecord }

func (attributesWithoutUser) GetUser() user.Info { return nil }

func TestRulesFor(t *testing.T) {
	resources, nonResources, incomplete, err := Authorizer{}.RulesFor(context.Background(), AdminInfo(), "ns")
	require.NoError(t, err)
	require.False(t, incomplete)
	require.Len(t, resources, 1)
	require.Equal(t, []string{"*"}, resources[0].GetVerbs())
	require.Equal(t, []string{"*"}, resources[0].GetResources())
	require.Len(t, nonResources, 1)
	require.Equal(t, []string{"*"}, nonResources[0].GetNonResourceURLs())

	resources, nonResources, incomplete, err = Authorizer{}.RulesFor(context.Background(), &user.DefaultInfo{Name: "alice"}, "ns")
	require.NoError(t, err)
	require.False(t, incomplete)
	require.Empty(t, resources)
	require.Len(t, nonResources, 1)
	require.Equal(t, []string{"get"}, nonResources[0].GetVerbs())
	require.Equal(t, PublicPaths, nonResources[0].GetNonResourceURLs())
}

func TestEnsureAdminToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AdminTokenFile)

	token, err := EnsureAdminToken(dir)
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	require.Len(t, raw, 32)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, token+"\n", string(data))
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	again, err := EnsureAdminToken(dir)
	require.NoError(t, err)
	require.Equal(t, token, again, "the stored token is reused")

	other, err := EnsureAdminToken(t.TempDir())
	require.NoError(t, err)
	require.NotEqual(t, token, other, "each data directory gets its own token")
}

func TestEnsureAdminTokenExistingFile(t *testing.T) {
	tests := []struct {
		desc    string
		content string
		want    string
		wantErr string
	}{
		{desc: "written by hand", content: "  my-token \n", want: "my-token"},
		{desc: "empty", content: "", wantErr: "admin.token is empty: remove it"},
		{desc: "blank", content: " \n\t\n", wantErr: "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, AdminTokenFile)
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			token, err := EnsureAdminToken(dir)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, path)
				require.Empty(t, token)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want, token)
			}
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.content, string(data), "an existing file is never rewritten")
		})
	}
}

func TestEnsureAdminTokenUnreadable(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be cannot be read as a token.
	require.NoError(t, os.Mkdir(filepath.Join(dir, AdminTokenFile), 0o700))
	_, err := EnsureAdminToken(dir)
	require.Error(t, err)
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	require.NoError(t, err)
	b, err := NewSecret()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.Len(t, a, 43) // 32 bytes, unpadded base64
}

// TestDashboardOnlyInRoot: under /spaces/NAME the dashboard's path needs a
// token like everything else (the space filter has stripped the prefix and
// put the space in the context).
func TestDashboardOnlyInRoot(t *testing.T) {
	authn := NewRequestAuthenticator(testTokens())
	req := httptest.NewRequest(http.MethodGet, "/dashboard/", nil)
	req = req.WithContext(spaces.WithSpace(req.Context(), "foo"))
	resp, ok, err := authn.AuthenticateRequest(req)
	require.NoError(t, err)
	require.False(t, ok)
	require.Nil(t, resp)
}

// allowAll is RBAC that grants everything: what the owner of a space
// (cluster-admin there) has.
type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

func (a allowAll) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

func (allowAll) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func (allowAll) RulesFor(context.Context, user.Info, string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	return nil, nil, false, nil
}

// TestReservedImpersonation: who may become whom. A space's RBAC that
// grants every impersonation (its owner's cluster-admin) yields the space's
// own ServiceAccounts and any user or group name that is not the server's;
// never the server, an admin, a syncer or an extra the server's
// authenticators set, in any space, the root space included. The server's
// admins may impersonate anyone.
func TestReservedImpersonation(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"team-a", user.AllAuthenticated}}
	impersonate := func(u user.Info, resource, subresource, namespace, name string) authorizer.AttributesRecord {
		group := ""
		if resource == "uids" || resource == "userextras" {
			group = "authentication.k8s.io"
		}
		return authorizer.AttributesRecord{User: u, Verb: "impersonate", ResourceRequest: true, APIGroup: group, Resource: resource,
			Subresource: subresource, Namespace: namespace, Name: name}
	}
	tests := []struct {
		desc       string
		attrs      authorizer.AttributesRecord
		wantReason string // "" when allowed
	}{
		{desc: "a user the space names", attrs: impersonate(alice, "users", "", "", "bob")},
		{desc: "a group", attrs: impersonate(alice, "groups", "", "", "team-b")},
		{desc: "system:authenticated, which every user is in", attrs: impersonate(alice, "groups", "", "", user.AllAuthenticated)},
		{desc: "a ServiceAccount of the space", attrs: impersonate(alice, "serviceaccounts", "", "ci", "deployer")},
		{desc: "the groups of the space's ServiceAccounts", attrs: impersonate(alice, "groups", "", "", "system:serviceaccounts:ci")},
		{desc: "a UID", attrs: impersonate(alice, "uids", "", "", "1234")},
		{desc: "an extra of one's own", attrs: impersonate(alice, "userextras", "example.com/team", "", "a")},
		{desc: "the admin", attrs: impersonate(alice, "users", "", "", AdminUser), wantReason: `impersonating user "kubestellar-admin" is refused`},
		{desc: "the server", attrs: impersonate(alice, "users", "", "", user.APIServerUser), wantReason: `impersonating user "system:apiserver" is refused`},
		{desc: "system:masters", attrs: impersonate(alice, "groups", "", "", user.SystemPrivilegedGroup), wantReason: `impersonating group "system:masters" is refused`},
		{desc: "a node", attrs: impersonate(alice, "users", "", "", "system:node:edge1"), wantReason: `impersonating user "system:node:edge1" is refused`},
		{desc: "the nodes' group", attrs: impersonate(alice, "groups", "", "", "system:nodes"), wantReason: `impersonating group "system:nodes" is refused`},
		{desc: "a syncer", attrs: impersonate(alice, "users", "", "", principal.SyncerUser("inv-b", "edge-b").Name), wantReason: `impersonating user "system:kubestellar:syncer:inv-b:edge-b" is refused`},
		{desc: "the syncers' group", attrs: impersonate(alice, "groups", "", "", principal.SyncersGroup), wantReason: `impersonating group "kubestellar:syncers" is refused`},
		{desc: "a syncer's inventory space", attrs: impersonate(alice, "userextras", principal.ExtraInventorySpace, "", "inv-b"), wantReason: `impersonating user extra "kubestellar.io/inventory-space" is refused`},
		{desc: "a ServiceAccount's space", attrs: impersonate(alice, "userextras", "kubestellar.io/space", "", "team-b"), wantReason: `impersonating user extra "kubestellar.io/space" is refused`},
		{desc: "a token's id", attrs: impersonate(alice, "userextras", principal.ExtraTokenID, "", "aaaaaa"), wantReason: `impersonating user extra "kubestellar.io/token-id" is refused`},
		{desc: "a credential id", attrs: impersonate(alice, "userextras", "authentication.kubernetes.io/credential-id", "", "x"), wantReason: `impersonating user extra "authentication.kubernetes.io/credential-id" is refused`},
		{desc: "the admin may become the server", attrs: impersonate(AdminInfo(), "users", "", "", user.APIServerUser)},
		{desc: "the admin may become a syncer", attrs: impersonate(AdminInfo(), "groups", "", "", principal.SyncersGroup)},
		{desc: "an admin's group named by impersonation is no admin", attrs: impersonate(&user.DefaultInfo{Name: "mallory", Groups: []string{user.SystemPrivilegedGroup}}, "users", "", "", user.APIServerUser),
			wantReason: `impersonating user "system:apiserver" is refused`},
	}
	az := Authorizer{Users: allowAll{}}
	for _, space := range []string{"team-a", spaces.Root} {
		for _, tc := range tests {
			t.Run(space+"/"+tc.desc, func(t *testing.T) {
				decision, reason, err := az.Authorize(spaces.WithSpace(context.Background(), space), tc.attrs)
				require.NoError(t, err)
				if tc.wantReason == "" {
					require.Equal(t, authorizer.DecisionAllow, decision, reason)
					return
				}
				require.Equal(t, authorizer.DecisionDeny, decision)
				require.Contains(t, reason, tc.wantReason)
			})
		}
	}
}

// recordingUsers is RBAC that allows one space and records what it was
// asked.
type recordingUsers struct {
	allowAll
	space string
	asked *[]string
}

func (r recordingUsers) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	space := spaces.SpaceOrRoot(ctx)
	*r.asked = append(*r.asked, fmt.Sprintf("%s %s %s/%s/%s %s", space, a.GetVerb(), a.GetAPIGroup(), a.GetResource(), a.GetSubresource(), a.GetName()))
	if space == r.space {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, "not a member of " + space, nil
}

func (r recordingUsers) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, attrs))
}

// TestEdgeProxyIsASubresource: the edge proxy is authorized as
// synctargets/proxy in the SyncTarget's inventory space, by that space's
// RBAC, not as a path of the root space.
func TestEdgeProxyIsASubresource(t *testing.T) {
	var asked []string
	az := Authorizer{Users: recordingUsers{space: "inv-b", asked: &asked}}
	bob := &user.DefaultInfo{Name: "bob", Groups: []string{user.AllAuthenticated}}
	edge := func(u user.Info, verb, path string) (authorizer.Decision, string) {
		d, reason, err := az.Authorize(spaces.WithSpace(context.Background(), spaces.Root), authorizer.AttributesRecord{User: u, Verb: verb, Path: path})
		require.NoError(t, err)
		return d, reason
	}
	d, _ := edge(bob, "get", "/kubestellar/v1/edges/inv-b/edge-b/proxy/api/v1/namespaces/default/secrets")
	require.Equal(t, authorizer.DecisionAllow, d)
	d, _ = edge(bob, "post", "/kubestellar/v1/edges/inv-b/edge-b/proxy/api/v1/namespaces/default/configmaps")
	require.Equal(t, authorizer.DecisionAllow, d)
	d, reason := edge(bob, "get", "/kubestellar/v1/edges/inv-a/edge-a/proxy/api")
	require.Equal(t, authorizer.DecisionDeny, d, "another inventory's edge")
	require.Contains(t, reason, "not a member of inv-a")
	require.Equal(t, []string{"inv-b get edge.kubestellar.io/synctargets/proxy edge-b", "inv-b create edge.kubestellar.io/synctargets/proxy edge-b",
		"inv-a get edge.kubestellar.io/synctargets/proxy edge-a"}, asked)
	d, reason = edge(bob, "get", "/kubestellar/v1/edges/inv-b")
	require.Equal(t, authorizer.DecisionDeny, d)
	require.Contains(t, reason, "INVENTORY/SYNCTARGET/proxy/PATH")
	d, _ = edge(AdminInfo(), "delete", "/kubestellar/v1/edges/inv-a/edge-a/proxy/api/v1/namespaces/x")
	require.Equal(t, authorizer.DecisionAllow, d, "the admins reach every edge")
	d, _ = edge(principal.SyncerUser("inv-b", "edge-b"), "get", "/kubestellar/v1/edges/inv-b/edge-b/proxy/api")
	require.Equal(t, authorizer.DecisionDeny, d, "a syncer does not reach edges through the center")
}

// getOnly is RBAC that grants get and nothing else.
type getOnly struct{ allowAll }

func (getOnly) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetVerb() == "get" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, "only get", nil
}

// TestEdgeUpgradesAreCreates: with get on an edge's proxy, a GET goes
// through but an upgrade (exec, attach) does not.
func TestEdgeUpgradesAreCreates(t *testing.T) {
	reached := 0
	h := WithEdgeUpgrades(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }), Authorizer{Users: getOnly{}})
	serve := func(u user.Info, upgrade string) int {
		req := httptest.NewRequest(http.MethodGet, "/kubestellar/v1/edges/inv-b/edge-b/proxy/api/v1/namespaces/default/pods/web/exec?command=sh", nil)
		if upgrade != "" {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", upgrade)
		}
		req = req.WithContext(genericapirequest.WithUser(spaces.WithSpace(req.Context(), spaces.Root), u))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	bob := &user.DefaultInfo{Name: "bob"}
	require.Equal(t, http.StatusOK, serve(bob, ""))
	require.Equal(t, http.StatusForbidden, serve(bob, "websocket"))
	require.Equal(t, http.StatusForbidden, serve(bob, "SPDY/3.1"))
	require.Equal(t, http.StatusOK, serve(AdminInfo(), "websocket"), "the admins may")
	require.Equal(t, 2, reached)
}
