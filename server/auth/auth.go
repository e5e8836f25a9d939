// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package auth holds the server's authentication and authorization.
//
// Identity is carried by bearer tokens only, never client certificates, so it
// survives TLS-terminating load balancers. The admin token lives in the data
// directory (0600), as k3s keeps its server token; the authenticator keeps
// only its SHA-256. Each syncer has a token of its own, for one SyncTarget
// (see jointoken, CreateToken and SyncerTokens). Authorization is
// space-aware: it sees the space of the request in its context, so a
// syncer reaches its SyncTarget and its mailbox space and nothing else.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/dashboard"
	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/spaces"
)

const (
	// AdminUser is the name of the identity the admin token carries.
	AdminUser = "kubestellar-admin"
	// AdminTokenFile is the admin token's file in the data directory.
	AdminTokenFile = "admin.token"
)

// EnsureAdminToken returns the admin token stored in dataDir, creating it on
// first start.
func EnsureAdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, AdminTokenFile)
	data, err := os.ReadFile(path)
	if err == nil {
		token := strings.TrimSpace(string(data))
		if token == "" {
			return "", fmt.Errorf("%s is empty: remove it to have a new admin token made", path)
		}
		return token, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	token, err := NewSecret()
	if err != nil {
		return "", err
	}
	return token, certs.WriteFileAtomic(path, []byte(token+"\n"), 0o600)
}

// NewSecret returns 32 random bytes, URL-safe base64 encoded.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Tokens authenticates static bearer tokens, comparing their hashes in
// constant time.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash [32]byte
	user user.Info
}

// Add lets token authenticate as u.
func (t *Tokens) Add(token string, u user.Info) {
	t.entries = append(t.entries, tokenEntry{hash: sha256.Sum256([]byte(token)), user: u})
}

// AuthenticateToken implements authenticator.Token.
func (t *Tokens) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	hash := sha256.Sum256([]byte(token))
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(hash[:], e.hash[:]) == 1 {
			return &authenticator.Response{User: e.user}, true, nil
		}
	}
	return nil, false, nil
}

// AdminInfo is the identity of the admin token, as authentication
// vouches for it (provenance).
func AdminInfo() user.Info {
	return provenance.Vouch(&user.DefaultInfo{Name: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}})
}

// PublicPaths may be read without a token, in the root space only: health
// probes of load balancers and service managers, the version, and the CA
// certificate (which a joining syncer checks against its token before
// trusting it). Under /spaces/NAME they need a token like everything else,
// so that nobody learns without one which spaces exist.
var PublicPaths = []string{"/healthz", "/livez", "/readyz", "/version", jointoken.CACertsPath}

func isPublic(path string) bool {
	for _, p := range PublicPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// isDashboard: a browser carries no bearer token to the dashboard
// (dashboard.Path), only the dashboard's session cookie: its requests in
// the root space reach the dashboard as anonymous (GET, HEAD and POST
// only), and the dashboard checks the session itself, serving nothing but
// its login page without one. Under /spaces/NAME it needs a token like
// everything else.
func isDashboard(path string) bool {
	return path == dashboard.Path || strings.HasPrefix(path, dashboard.Path+"/")
}

// NewRequestAuthenticator authenticates bearer tokens with tokens, and lets
// requests without credentials for PublicPaths and the dashboard through as
// anonymous.
func NewRequestAuthenticator(tokens authenticator.Token) authenticator.Request {
	bearer := bearertoken.New(tokens)
	return authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := bearer.AuthenticateRequest(req)
		if ok || err != nil {
			return resp, ok, err
		}
		if req.Method == http.MethodGet && req.Header.Get("Authorization") == "" && isPublic(req.URL.Path) &&
			spaces.SpaceOrRoot(req.Context()) == spaces.Root {
			return &authenticator.Response{User: &user.DefaultInfo{
				Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
		}
		if (req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodPost) &&
			req.Header.Get("Authorization") == "" && isDashboard(req.URL.Path) && spaces.SpaceOrRoot(req.Context()) == spaces.Root {
			return &authenticator.Response{User: &user.DefaultInfo{
				Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
		}
		return nil, false, nil
	})
}

// Authorizer decides who may do what in which space. Members of
// system:masters (the admin token, the server's loopback client) may do
// everything everywhere; anyone may read PublicPaths and reach the dashboard
// (GET, HEAD, POST under dashboard.Path in the root space; it checks its own
// sessions); a syncer may do what
// its SyncTarget needs (see authorizeSyncer); Users decides for everybody
// else (by the RBAC of the space); without Users, everything else is
// denied with a reason naming the user and the space.
type Authorizer struct {
	// SyncTargets finds the mailbox of a syncer's SyncTarget; without it,
	// syncers reach no mailbox.
	SyncTargets SyncTargetLookup
	// Users decides for users that are neither privileged nor syncers.
	Users UserAuthorizer
}

// UserAuthorizer decides for users, and lists their rules.
type UserAuthorizer interface {
	authorizer.Authorizer
	authorizer.RuleResolver
}

var (
	_ authorizer.Authorizer   = Authorizer{}
	_ authorizer.RuleResolver = Authorizer{}
)

// Authorize implements authorizer.Authorizer.
func (az Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if provenance.IsPrivileged(u) {
		return authorizer.DecisionAllow, "", nil
	}
	if !a.IsResourceRequest() && a.GetVerb() == "get" && isPublic(a.GetPath()) && spaces.SpaceOrRoot(ctx) == spaces.Root {
		return authorizer.DecisionAllow, "", nil
	}
	if inv, attrs, ok := EdgeProxyAttributes(ctx, a); ok {
		if attrs == nil {
			return authorizer.DecisionDeny, fmt.Sprintf("an edge is reached at %sINVENTORY/SYNCTARGET/proxy/PATH", jointoken.EdgesPrefix), nil
		}
		ctx, a = spaces.WithSpace(ctx, inv), attrs
	}
	if !a.IsResourceRequest() && isDashboard(a.GetPath()) && spaces.SpaceOrRoot(ctx) == spaces.Root &&
		(a.GetVerb() == "get" || a.GetVerb() == "head" || a.GetVerb() == "post") {
		return authorizer.DecisionAllow, "", nil
	}
	if inv, st, ok := principal.SyncTargetOf(u); ok {
		decision, reason := az.authorizeSyncer(ctx, a, inv, st)
		return decision, reason, nil
	}
	if why := ReservedImpersonation(a); why != "" {
		return authorizer.DecisionDeny, why, nil
	}
	if az.Users != nil {
		return az.Users.Authorize(ctx, a)
	}
	name := "<anonymous>"
	if u != nil {
		name = u.GetName()
	}
	return authorizer.DecisionDeny, fmt.Sprintf("user %q has no access to space %q", name, spaces.SpaceOrRoot(ctx)), nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: its decisions
// carry no conditions, so it answers as Authorize does (a wrapper must not
// let the wrapped authorizer's answer through unchanged).
func (az Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(az.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: no decision of its
// has conditions to evaluate.
func (Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor implements authorizer.RuleResolver, for kubectl auth can-i --list.
// The rules of a syncer depend on the space in ctx.
func (az Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	if provenance.IsPrivileged(u) {
		return []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			[]authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, false, nil
	}
	if inv, st, ok := principal.SyncTargetOf(u); ok {
		resources, nonResources := az.syncerRules(ctx, inv, st)
		return resources, nonResources, false, nil
	}
	if az.Users != nil {
		return az.Users.RulesFor(ctx, u, namespace)
	}
	if spaces.SpaceOrRoot(ctx) != spaces.Root {
		return nil, nil, false, nil
	}
	return nil, []authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: PublicPaths}}, false, nil
}

// ReservedImpersonation returns why impersonating what a names is refused
// to everyone but the server's admins, or "" when RBAC may decide. The
// identities the server honours beyond a space's RBAC are reserved: users
// and groups named system:* (system:masters, system:apiserver, nodes)
// or kubestellar* (the admin, syncers), and the user extras the server's
// authenticators set (kubestellar.io/*: a ServiceAccount's space, a token's
// id, a syncer's SyncTarget; authentication.kubernetes.io/*). Per-space
// RBAC grants impersonation of the space's own ServiceAccounts, UIDs, and
// any other user or group name; what it yields is judged by that space's
// RBAC, as the user it names.
func ReservedImpersonation(a authorizer.Attributes) string {
	if a.GetVerb() != "impersonate" || !a.IsResourceRequest() {
		return ""
	}
	name := a.GetName()
	reserved := func(what string) string {
		return fmt.Sprintf("impersonating %s %q is refused: the server's own identities (system:*, kubestellar*) and the extras its authenticators set cannot be taken on through impersonation", what, name)
	}
	switch a.GetResource() {
	case "users":
		if strings.HasPrefix(name, "system:") || strings.HasPrefix(name, "kubestellar") {
			return reserved("user")
		}
	case "groups":
		switch {
		case name == user.AllAuthenticated, name == serviceAccountsGroup, strings.HasPrefix(name, serviceAccountsGroup+":"):
			// What every user, or a ServiceAccount of the space, is anyway.
		case strings.HasPrefix(name, "system:"), strings.HasPrefix(name, "kubestellar"):
			return reserved("group")
		}
	case "userextras":
		key := a.GetSubresource()
		if strings.HasPrefix(key, "kubestellar.io/") || strings.HasPrefix(key, "authentication.kubernetes.io/") {
			name = key
			return reserved("user extra")
		}
	}
	return ""
}

// serviceAccountsGroup is the group of every ServiceAccount
// (system:serviceaccounts), and its prefix for those of one namespace.
const serviceAccountsGroup = "system:serviceaccounts"

// EdgeProxyAttributes: a request for the edge proxy in the root space
// (jointoken.EdgesPrefix + INV/ST/proxy/...) is authorized as the
// subresource proxy of SyncTarget ST in inventory space INV, as
// Kubernetes authorizes nodes/proxy: the RBAC of the inventory space
// decides who reaches its edges, the verb following the HTTP method as
// for resources (GET get, POST create, PUT update, PATCH patch, DELETE
// delete). ok=false when a is no such request; attrs=nil when its path
// names no SyncTarget.
func EdgeProxyAttributes(ctx context.Context, a authorizer.Attributes) (inv string, attrs authorizer.Attributes, ok bool) {
	tail, found := strings.CutPrefix(a.GetPath(), jointoken.EdgesPrefix)
	if a.IsResourceRequest() || !found || spaces.SpaceOrRoot(ctx) != spaces.Root {
		return "", nil, false
	}
	parts := strings.SplitN(tail, "/", 4)
	if len(parts) < 3 || parts[2] != "proxy" || spaces.ValidateName(parts[0]) != nil || parts[1] == "" {
		return "", nil, true
	}
	verb := a.GetVerb()
	switch verb {
	case "post":
		verb = "create"
	case "put":
		verb = "update"
	}
	return parts[0], authorizer.AttributesRecord{User: a.GetUser(), Verb: verb, APIGroup: edgeGroup, APIVersion: "*",
		Resource: "synctargets", Subresource: "proxy", Name: parts[1], ResourceRequest: true}, true
}

// WithEdgeUpgrades authorizes an upgrade through the edge proxy (exec,
// attach, port-forward: a GET with Upgrade, which would pass as get) as
// create on synctargets/proxy too: reading an edge is not running a
// command on it.
func WithEdgeUpgrades(handler http.Handler, az authorizer.Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		u, _ := genericapirequest.UserFrom(ctx)
		if req.Header.Get("Upgrade") == "" || !strings.HasPrefix(req.URL.Path, jointoken.EdgesPrefix) {
			handler.ServeHTTP(w, req)
			return
		}
		inv, attrs, ok := EdgeProxyAttributes(ctx, authorizer.AttributesRecord{User: u, Verb: "post", Path: req.URL.Path})
		if ok && attrs != nil {
			if d, reason, err := az.Authorize(spaces.WithSpace(ctx, inv), attrs); err != nil || d != authorizer.DecisionAllow {
				if reason == "" {
					reason = fmt.Sprintf("upgrading a connection to an edge (exec, attach, port-forward) needs create on synctargets/proxy in space %q", inv)
				}
				status := apierrors.NewForbidden(schema.GroupResource{Group: edgeGroup, Resource: "synctargets/proxy"}, attrs.GetName(), errors.New(reason)).Status()
				status.Kind, status.APIVersion = "Status", "v1"
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_ = json.NewEncoder(w).Encode(status)
				return
			}
		}
		handler.ServeHTTP(w, req)
	})
}
