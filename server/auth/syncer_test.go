// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
)

var (
	testCA      = []byte("-----BEGIN CERTIFICATE-----\nthis server\n-----END CERTIFICATE-----\n")
	otherCA     = []byte("-----BEGIN CERTIFICATE-----\nanother server\n-----END CERTIFICATE-----\n")
	testNow     = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	testSecrets = "0123456789abcdef"
)

// tokenFixture stores a token Secret in a fake cache and returns the token.
func tokenFixture(t *testing.T, indexer cache.Indexer, id, syncTarget, expiration string) jointoken.Token {
	t.Helper()
	tok := jointoken.Token{CAHash: jointoken.CAHash(testCA), ID: id, Secret: testSecrets}
	inv, st, err := ParseSyncTargetRef(syncTarget)
	require.NoError(t, err)
	info := TokenInfo{ID: id, InventorySpace: inv, SyncTarget: st, SyncTargetUID: fixtureUID(inv, st), SecretSHA256: jointoken.SecretHash(tok.Secret)}
	s := tokenSecret(info)
	if expiration != "" {
		s.Data[TokenExpirationKey] = []byte(expiration)
	}
	require.NoError(t, indexer.Add(s))
	return tok
}

func newSecretIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func TestSyncerTokens(t *testing.T) {
	indexer := newSecretIndexer()
	valid := tokenFixture(t, indexer, "aaaaaa", "inv1/edge1", "")
	future := tokenFixture(t, indexer, "bbbbbb", "inv1/edge2", testNow.Add(time.Second).Format(time.RFC3339))
	expired := tokenFixture(t, indexer, "cccccc", "inv1/edge1", testNow.Format(time.RFC3339))
	badExpiry := tokenFixture(t, indexer, "dddddd", "inv1/edge1", "tomorrow")
	// A Secret of another type is not a token, whatever its name.
	wrongType := tokenFixture(t, indexer, "eeeeee", "inv1/edge1", "")
	obj, _, _ := indexer.GetByKey(TokenNamespace + "/" + TokenSecretName("eeeeee"))
	notToken := obj.(*corev1.Secret).DeepCopy()
	notToken.Type = corev1.SecretTypeOpaque
	require.NoError(t, indexer.Update(notToken))

	withSecret := func(tok jointoken.Token, secret string) jointoken.Token { tok.Secret = secret; return tok }
	withCA := func(tok jointoken.Token, ca []byte) jointoken.Token { tok.CAHash = jointoken.CAHash(ca); return tok }
	bare := func(tok jointoken.Token) jointoken.Token { tok.CAHash = ""; return tok }

	tests := []struct {
		desc     string
		bearer   string
		wantUser string
		wantErr  string // "" with no user: not a syncer token at all
	}{
		{desc: "full form", bearer: valid.String(), wantUser: "system:kubestellar:syncer:inv1:edge1"},
		{desc: "bare form", bearer: bare(valid).String(), wantUser: "system:kubestellar:syncer:inv1:edge1"},
		{desc: "expires later", bearer: future.Bearer(), wantUser: "system:kubestellar:syncer:inv1:edge2"},
		{desc: "expired", bearer: expired.Bearer(), wantErr: "syncer token cccccc expired at 2030-01-02T03:04:05Z"},
		{desc: "unreadable expiration", bearer: badExpiry.Bearer(), wantErr: "expiration is not RFC 3339"},
		{desc: "another server's CA", bearer: withCA(valid, otherCA).String(), wantErr: "syncer token aaaaaa pins another CA"},
		{desc: "wrong secret", bearer: withSecret(valid, "fedcba9876543210").Bearer(), wantErr: "wrong secret for syncer token aaaaaa"},
		{desc: "unknown id", bearer: "zzzzzz." + testSecrets, wantErr: "unknown syncer token zzzzzz"},
		{desc: "secret of another type", bearer: wrongType.Bearer(), wantErr: `is of type "Opaque"`},
		{desc: "admin-style token", bearer: "q2b7Y2x3cT1ZbWFyeS1oYWQtYS1saXR0bGUtbGFtYg"},
		{desc: "empty", bearer: ""},
		{desc: "malformed", bearer: "aaaaaa.short"},
	}
	tokens := NewSyncerTokens(testCA, fixtureUIDs("inv1/edge1", "inv1/edge2"))
	tokens.now = func() time.Time { return testNow }
	tokens.SetSecrets(corelisters.NewSecretLister(indexer).Secrets(TokenNamespace))
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, ok, err := tokens.AuthenticateToken(context.Background(), tc.bearer)
			if tc.wantUser != "" {
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, tc.wantUser, resp.User.GetName())
				require.Equal(t, []string{principal.SyncersGroup, user.AllAuthenticated}, resp.User.GetGroups())
				return
			}
			require.False(t, ok)
			require.Nil(t, resp)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.NotContains(t, err.Error(), testSecrets, "errors never carry the secret")
		})
	}

	t.Run("before the cache is set", func(t *testing.T) {
		waiting := NewSyncerTokens(testCA, fixtureUIDs())
		waiting.loadWait = 50 * time.Millisecond
		_, ok, err := waiting.AuthenticateToken(context.Background(), valid.String())
		require.False(t, ok)
		require.ErrorContains(t, err, "not loaded yet")
	})
	t.Run("the cache set while the token waits", func(t *testing.T) {
		waiting := NewSyncerTokens(testCA, fixtureUIDs("inv1/edge1", "inv1/edge2"))
		// The cache is set once the token waits for it, which wakes the
		// token: it would wait an hour (and the test time out) otherwise.
		waiting.loadWait = time.Hour
		waiting.waiting = func() {
			go waiting.SetSecrets(corelisters.NewSecretLister(indexer).Secrets(TokenNamespace))
		}
		resp, ok, err := waiting.AuthenticateToken(context.Background(), valid.String())
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, principal.SyncerUserPrefix+"inv1:edge1", resp.User.GetName())
	})
	t.Run("revoked", func(t *testing.T) {
		obj, _, _ := indexer.GetByKey(TokenNamespace + "/" + TokenSecretName("aaaaaa"))
		require.NoError(t, indexer.Delete(obj))
		_, ok, err := tokens.AuthenticateToken(context.Background(), valid.String())
		require.False(t, ok)
		require.ErrorContains(t, err, "unknown syncer token aaaaaa")
	})
}

func TestSyncerUserAndSyncTargetOf(t *testing.T) {
	u := principal.SyncerUser("inv1", "edge1")
	require.Equal(t, "system:kubestellar:syncer:inv1:edge1", u.GetName())
	require.Equal(t, map[string][]string{principal.ExtraInventorySpace: {"inv1"}, principal.ExtraSyncTarget: {"edge1"}}, u.GetExtra())

	tests := []struct {
		desc    string
		user    user.Info
		wantInv string
		wantST  string
	}{
		{desc: "syncer", user: u, wantInv: "inv1", wantST: "edge1"},
		{desc: "nil", user: nil},
		{desc: "admin", user: AdminInfo()},
		{desc: "no group", user: &user.DefaultInfo{Name: u.Name, Extra: u.Extra}},
		{desc: "no extra", user: &user.DefaultInfo{Name: u.Name, Groups: u.Groups}},
		{desc: "name of another", user: &user.DefaultInfo{Name: "system:kubestellar:syncer:inv1:edge2", Groups: u.Groups, Extra: u.Extra}},
		{desc: "two SyncTargets", user: &user.DefaultInfo{Name: u.Name, Groups: u.Groups,
			Extra: map[string][]string{principal.ExtraInventorySpace: {"inv1"}, principal.ExtraSyncTarget: {"edge1", "edge2"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			inv, st, ok := principal.SyncTargetOf(tc.user)
			require.Equal(t, tc.wantInv != "", ok)
			require.Equal(t, tc.wantInv, inv)
			require.Equal(t, tc.wantST, st)
		})
	}
}

func TestRequestAuthenticatorWithSyncerTokens(t *testing.T) {
	indexer := newSecretIndexer()
	tok := tokenFixture(t, indexer, "aaaaaa", "inv1/edge1", "")
	syncers := NewSyncerTokens(testCA, fixtureUIDs("inv1/edge1"))
	syncers.SetSecrets(corelisters.NewSecretLister(indexer).Secrets(TokenNamespace))
	authn := NewRequestAuthenticator(union.New(testTokens(), syncers))
	for header, want := range map[string]string{
		"Bearer admin-token":             AdminUser,
		"Bearer " + tok.String():         "system:kubestellar:syncer:inv1:edge1",
		"Bearer " + tok.Bearer():         "system:kubestellar:syncer:inv1:edge1",
		"Bearer aaaaaa.wrongwrongwrongw": "",
		"Bearer nope":                    "",
	} {
		req := httptest.NewRequest(http.MethodGet, "/api", nil)
		req.Header.Set("Authorization", header)
		resp, ok, err := authn.AuthenticateRequest(req)
		if want == "" {
			require.False(t, ok, header)
			require.Error(t, err, header)
			continue
		}
		require.NoError(t, err, header)
		require.True(t, ok, header)
		require.Equal(t, want, resp.User.GetName())
	}
}

// staticSyncTargets maps "inv/name" to a mailbox.
type staticSyncTargets map[string]string

func (s staticSyncTargets) MailboxOf(inv, name string) (string, bool) {
	mb, ok := s[inv+"/"+name]
	return mb, ok
}

func TestAuthorizerForSyncers(t *testing.T) {
	az := Authorizer{SyncTargets: staticSyncTargets{"inv1/edge1": "inv1-mb-1", "inv1/edge2": "inv1-mb-2", "inv1/edge3": ""}}
	edge1, edge3 := principal.SyncerUser("inv1", "edge1"), principal.SyncerUser("inv1", "edge3")
	res := func(u user.Info, verb, group, resource, sub, ns, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, APIVersion: "v1", Resource: resource,
			Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
	}
	st := func(verb, sub, name string) authorizer.AttributesRecord {
		return res(edge1, verb, edgeGroup, "synctargets", sub, "", name)
	}
	path := func(u user.Info, verb, p string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Path: p}
	}
	tests := []struct {
		desc       string
		space      string
		attrs      authorizer.AttributesRecord
		wantReason string // "" for allowed
	}{
		// The inventory space.
		{desc: "get own SyncTarget", space: "inv1", attrs: st("get", "", "edge1")},
		{desc: "list own SyncTarget by name", space: "inv1", attrs: st("list", "", "edge1")},
		{desc: "watch own SyncTarget by name", space: "inv1", attrs: st("watch", "", "edge1")},
		{desc: "list SyncTargets", space: "inv1", attrs: st("list", "", ""),
			wantReason: `may only read SyncTarget "edge1" and write its status in space "inv1"`},
		{desc: "watch SyncTargets", space: "inv1", attrs: st("watch", "", ""), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "watch another SyncTarget by name", space: "inv1", attrs: st("watch", "", "edge2"), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "update own status", space: "inv1", attrs: st("update", "status", "edge1")},
		{desc: "patch own status", space: "inv1", attrs: st("patch", "status", "edge1")},
		{desc: "get own status", space: "inv1", attrs: st("get", "status", "edge1")},
		{desc: "get another SyncTarget", space: "inv1", attrs: st("get", "", "edge2"),
			wantReason: `user "system:kubestellar:syncer:inv1:edge1" may only read SyncTarget "edge1" and write its status in space "inv1"`},
		{desc: "update another's status", space: "inv1", attrs: st("update", "status", "edge2"), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "update own spec", space: "inv1", attrs: st("update", "", "edge1"), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "delete own SyncTarget", space: "inv1", attrs: st("delete", "", "edge1"), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "create a SyncTarget", space: "inv1", attrs: st("create", "", ""), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "read Locations", space: "inv1", attrs: res(edge1, "list", edgeGroup, "locations", "", "", ""), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "a look-alike resource in another group", space: "inv1", attrs: res(edge1, "get", "example.com", "synctargets", "", "", "edge1"), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "read secrets in the inventory", space: "inv1", attrs: res(edge1, "list", "", "secrets", "", "default", ""), wantReason: `may only read SyncTarget "edge1"`},
		{desc: "discovery in the inventory", space: "inv1", attrs: path(edge1, "get", "/apis/edge.kubestellar.io/v2alpha1")},
		// The own mailbox.
		{desc: "list in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "list", "apps", "deployments", "", "", "")},
		{desc: "watch in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "watch", "", "configmaps", "", "demo", "")},
		{desc: "update status in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "update", "apps", "deployments", "status", "demo", "web")},
		{desc: "patch annotations in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "patch", "", "configmaps", "", "demo", "x")},
		{desc: "create upsynced object in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "create", "", "configmaps", "", "demo", "")},
		{desc: "delete in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "delete", "", "configmaps", "", "demo", "x")},
		{desc: "deletecollection in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "deletecollection", "", "configmaps", "", "demo", ""),
			wantReason: `user "system:kubestellar:syncer:inv1:edge1" may not deletecollection in its mailbox space "inv1-mb-1"`},
		{desc: "impersonate in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "impersonate", "", "users", "", "", AdminUser), wantReason: "may not impersonate"},
		{desc: "watch CRDs in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "watch", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "")},
		{desc: "get a CRD in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "widgets.example.com")},
		{desc: "create a CRD in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "create", "apiextensions.k8s.io", "customresourcedefinitions", "", "", ""),
			wantReason: `user "system:kubestellar:syncer:inv1:edge1" may only read CustomResourceDefinitions, which the server binds, in its mailbox space "inv1-mb-1"`},
		{desc: "delete a CRD in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "delete", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "synctargets.edge.kubestellar.io"),
			wantReason: "may only read CustomResourceDefinitions"},
		{desc: "update a CRD's status in own mailbox", space: "inv1-mb-1", attrs: res(edge1, "update", "apiextensions.k8s.io", "customresourcedefinitions", "status", "", "widgets.example.com"),
			wantReason: "may only read CustomResourceDefinitions"},
		{desc: "discovery in own mailbox", space: "inv1-mb-1", attrs: path(edge1, "get", "/api/v1")},
		{desc: "openapi in own mailbox", space: "inv1-mb-1", attrs: path(edge1, "get", "/openapi/v3/apis/apps/v1")},
		{desc: "post to discovery", space: "inv1-mb-1", attrs: path(edge1, "post", "/api"), wantReason: "may not post /api"},
		{desc: "metrics", space: "inv1-mb-1", attrs: path(edge1, "get", "/metrics"), wantReason: `may not get /metrics in space "inv1-mb-1"`},
		// Elsewhere.
		{desc: "another mailbox", space: "inv1-mb-2", attrs: res(edge1, "get", "", "configmaps", "", "demo", "x"),
			wantReason: `user "system:kubestellar:syncer:inv1:edge1" has no access to space "inv1-mb-2"`},
		{desc: "discovery in another mailbox", space: "inv1-mb-2", attrs: path(edge1, "get", "/api"), wantReason: "may not get /api"},
		{desc: "a WDS", space: "wds1", attrs: res(edge1, "list", "apps", "deployments", "", "", ""), wantReason: `has no access to space "wds1"`},
		{desc: "root", space: spaces.Root, attrs: res(edge1, "list", "", "secrets", "", TokenNamespace, ""), wantReason: `has no access to space "root"`},
		{desc: "root by default", attrs: res(edge1, "get", "", "namespaces", "", "", "default"), wantReason: `has no access to space "root"`},
		{desc: "wildcard", space: spaces.Wildcard, attrs: res(edge1, "list", "", "configmaps", "", "", ""), wantReason: `has no access to space "*"`},
		{desc: "another inventory", space: "inv2", attrs: res(edge1, "get", edgeGroup, "synctargets", "", "", "edge1"), wantReason: `has no access to space "inv2"`},
		{desc: "no mailbox yet", space: "inv1-mb-3", attrs: res(edge3, "list", "", "configmaps", "", "", ""), wantReason: `has no access to space "inv1-mb-3"`},
		{desc: "own description", space: spaces.Root, attrs: path(edge1, "get", jointoken.SyncerInfoPath)},
		{desc: "tunnel as a stream", space: spaces.Root, attrs: path(edge1, "post", jointoken.TunnelPath)},
		{desc: "tunnel stream in a space", space: "wds1", attrs: path(edge1, "post", jointoken.TunnelPath), wantReason: `may not post /kubestellar/v1/tunnel in space "wds1"`},
		{desc: "post to its description", space: spaces.Root, attrs: path(edge1, "post", jointoken.SyncerInfoPath), wantReason: `may not post /kubestellar/v1/syncer`},
		// Only in the root: elsewhere it would tell which spaces exist.
		{desc: "own description in a space", space: "wds1", attrs: path(edge1, "get", jointoken.SyncerInfoPath), wantReason: `may not get /kubestellar/v1/syncer in space "wds1"`},
		{desc: "cacerts", space: spaces.Root, attrs: path(edge1, "get", jointoken.CACertsPath)},
		{desc: "discovery in root", space: spaces.Root, attrs: path(edge1, "get", "/apis"), wantReason: `may not get /apis in space "root"`},
		// A syncer identity of a SyncTarget nobody knows reaches only its inventory space.
		{desc: "unknown SyncTarget's mailbox", space: "inv1-mb-1", attrs: res(principal.SyncerUser("inv1", "ghost"), "get", "", "configmaps", "", "demo", "x"), wantReason: "has no access"},
		// Other users are not helped by the syncer rules.
		{desc: "alice in a mailbox", space: "inv1-mb-1", attrs: res(&user.DefaultInfo{Name: "alice"}, "get", "", "configmaps", "", "demo", "x"),
			wantReason: `user "alice" has no access to space "inv1-mb-1"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			if tc.space != "" {
				ctx = spaces.WithSpace(ctx, tc.space)
			}
			decision, reason, err := az.Authorize(ctx, tc.attrs)
			require.NoError(t, err)
			if tc.wantReason == "" {
				require.Equal(t, authorizer.DecisionAllow, decision, reason)
				require.Empty(t, reason)
				return
			}
			require.Equal(t, authorizer.DecisionDeny, decision)
			require.Contains(t, reason, tc.wantReason)
			require.Contains(t, reason, tc.attrs.User.GetName())
		})
	}

	t.Run("no SyncTarget lookup", func(t *testing.T) {
		decision, _, err := Authorizer{}.Authorize(spaces.WithSpace(context.Background(), "inv1-mb-1"), res(edge1, "get", "", "configmaps", "", "demo", "x"))
		require.NoError(t, err)
		require.Equal(t, authorizer.DecisionDeny, decision)
	})
}

func TestRulesForSyncers(t *testing.T) {
	az := Authorizer{SyncTargets: staticSyncTargets{"inv1/edge1": "inv1-mb-1"}}
	u := principal.SyncerUser("inv1", "edge1")
	tests := []struct {
		space         string
		wantResources []string // verbs:resource:names
		wantDiscovery bool
	}{
		{space: "inv1", wantResources: []string{"get,list,watch:synctargets:edge1", "get,update,patch:synctargets/status:edge1"}, wantDiscovery: true},
		{space: "inv1-mb-1", wantResources: []string{"get,list,watch,create,update,patch,delete:*,*/*:"}, wantDiscovery: true},
		{space: "wds1"},
		{space: spaces.Root},
	}
	for _, tc := range tests {
		t.Run(tc.space, func(t *testing.T) {
			resources, nonResources, incomplete, err := az.RulesFor(spaces.WithSpace(context.Background(), tc.space), u, "")
			require.NoError(t, err)
			require.False(t, incomplete)
			var got []string
			for _, r := range resources {
				got = append(got, strings.Join(r.GetVerbs(), ",")+":"+strings.Join(r.GetResources(), ",")+":"+strings.Join(r.GetResourceNames(), ","))
			}
			require.Equal(t, tc.wantResources, got)
			var urls []string
			for _, r := range nonResources {
				require.Equal(t, []string{"get"}, r.GetVerbs())
				urls = append(urls, r.GetNonResourceURLs()...)
			}
			// The public paths and its own description: in the root only.
			if tc.space == spaces.Root {
				require.Contains(t, urls, jointoken.SyncerInfoPath)
				require.Contains(t, urls, jointoken.CACertsPath)
			} else {
				require.NotContains(t, urls, jointoken.SyncerInfoPath)
				require.NotContains(t, urls, jointoken.CACertsPath)
			}
			require.Equal(t, tc.wantDiscovery, strings.Contains(strings.Join(urls, " "), "/apis/*"))
		})
	}
}

func TestSyncTargetCache(t *testing.T) {
	c := &SyncTargetCache{}
	_, found := c.MailboxOf("inv1", "edge1")
	require.False(t, found, "nothing is found before the cache is set")

	indexer := cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})
	// The mailbox is derived from the UID; the status only says it exists.
	// edge3's status names another space: no mailbox.
	for _, st := range []struct{ space, name, uid, mailbox string }{
		{"inv1", "edge1", "uid-1", "inv1-mb-uid-1"}, {"inv2", "edge1", "uid-2", ""}, {"inv1", "edge3", "uid-3", "wds1"},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("edge.kubestellar.io/v2alpha1")
		u.SetKind("SyncTarget")
		u.SetName(st.name)
		u.SetUID(types.UID(st.uid))
		u.SetAnnotations(map[string]string{spaces.Annotation: st.space})
		if st.mailbox != "" {
			require.NoError(t, unstructured.SetNestedField(u.Object, st.mailbox, "status", "mailboxSpace"))
		}
		require.NoError(t, indexer.Add(u))
	}
	c.Set(indexer)
	for _, tc := range []struct {
		inv, name, wantMailbox string
		wantFound              bool
	}{
		{inv: "inv1", name: "edge1", wantMailbox: "inv1-mb-uid-1", wantFound: true},
		{inv: "inv2", name: "edge1", wantFound: true},
		{inv: "inv1", name: "edge3", wantFound: true},
		{inv: "inv1", name: "edge2"},
		{inv: "inv3", name: "edge1"},
	} {
		mailbox, found := c.MailboxOf(tc.inv, tc.name)
		require.Equal(t, tc.wantFound, found, "%s/%s", tc.inv, tc.name)
		require.Equal(t, tc.wantMailbox, mailbox, "%s/%s", tc.inv, tc.name)
	}

	// A SyncTarget is stored naming its mailbox, moments before the
	// mailbox controller makes the space: the mailbox is given out once
	// its space is made. While the spaces are not known yet, the status
	// decides (the space filter answers 503 meanwhile); a mailbox being
	// deleted is still its syncer's, which sees its copies go.
	for _, tc := range []struct {
		name        string
		phases      spacePhases
		wantMailbox string
	}{
		{name: "made", phases: spacePhases{"inv1-mb-uid-1": tenancyv1alpha1.SpacePhaseReady}, wantMailbox: "inv1-mb-uid-1"},
		{name: "not made yet", phases: spacePhases{"inv1-mb-uid-2": tenancyv1alpha1.SpacePhaseReady}},
		{name: "being deleted", phases: spacePhases{"inv1-mb-uid-1": tenancyv1alpha1.SpacePhaseTerminating}, wantMailbox: "inv1-mb-uid-1"},
		{name: "unknown (the cache of spaces not synced)", phases: nil, wantMailbox: "inv1-mb-uid-1"},
	} {
		c.Spaces = tc.phases
		mailbox, found := c.MailboxOf("inv1", "edge1")
		require.True(t, found, tc.name)
		require.Equal(t, tc.wantMailbox, mailbox, tc.name)
	}
}

// spacePhases is a spaces.Lookup of the phases of some spaces; nil answers
// that it does not know yet.
type spacePhases map[string]tenancyv1alpha1.SpacePhase

func (p spacePhases) SpacePhase(name string) (tenancyv1alpha1.SpacePhase, bool, error) {
	if p == nil {
		return "", false, errors.New("the cache of spaces has not synced")
	}
	phase, ok := p[name]
	return phase, ok, nil
}

func TestCACertsHandler(t *testing.T) {
	h := CACertsHandler(testCA)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, jointoken.CACertsPath, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, testCA, rec.Body.Bytes())
	require.Equal(t, jointoken.CAHash(testCA), jointoken.CAHash(rec.Body.Bytes()))

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, jointoken.CACertsPath, nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestSyncerInfoHandler(t *testing.T) {
	h := SyncerInfoHandler(staticSyncTargets{"inv1/edge1": "inv1-mb-1", "inv1/edge2": ""})
	tests := []struct {
		desc     string
		user     user.Info
		wantCode int
		want     jointoken.SyncerInfo
	}{
		{desc: "syncer with a mailbox", user: principal.SyncerUser("inv1", "edge1"), wantCode: http.StatusOK,
			want: jointoken.SyncerInfo{InventorySpace: "inv1", SyncTarget: "edge1", MailboxSpace: "inv1-mb-1"}},
		{desc: "syncer without a mailbox yet", user: principal.SyncerUser("inv1", "edge2"), wantCode: http.StatusOK,
			want: jointoken.SyncerInfo{InventorySpace: "inv1", SyncTarget: "edge2"}},
		{desc: "SyncTarget not known", user: principal.SyncerUser("inv1", "edge9"), wantCode: http.StatusOK,
			want: jointoken.SyncerInfo{InventorySpace: "inv1", SyncTarget: "edge9"}},
		{desc: "admin", user: AdminInfo(), wantCode: http.StatusForbidden},
		{desc: "nobody", wantCode: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, jointoken.SyncerInfoPath, nil)
			if tc.user != nil {
				req = req.WithContext(genericapirequest.WithUser(req.Context(), tc.user))
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tc.wantCode, rec.Code, rec.Body.String())
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			if tc.wantCode != http.StatusOK {
				require.Contains(t, rec.Body.String(), "is no syncer")
				return
			}
			var got jointoken.SyncerInfo
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
			require.Equal(t, tc.want, got)
			require.Contains(t, rec.Body.String(), `"mailboxSpace":`, "the field is there even when empty")
		})
	}
}

func TestTokenStore(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	now := func() time.Time { return testNow }

	tok, info, err := CreateToken(ctx, client, NewTokenOptions{InventorySpace: "inv1", SyncTarget: "edge1", SyncTargetUID: "uid-1", TTL: time.Hour,
		Description: "for edge1", CAPEM: testCA, Now: now})
	require.NoError(t, err)
	require.Equal(t, jointoken.CAHash(testCA), tok.CAHash)
	require.Equal(t, tok.ID, info.ID)
	_, err = client.CoreV1().Namespaces().Get(ctx, TokenNamespace, metav1.GetOptions{})
	require.NoError(t, err, "the namespace is created when missing")

	secret, err := client.CoreV1().Secrets(TokenNamespace).Get(ctx, "kubestellar-token-"+tok.ID, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.SecretType("kubestellar.io/token"), secret.Type)
	require.Equal(t, map[string]string{"kubestellar.io/token": "true"}, secret.Labels)
	require.Equal(t, map[string][]byte{
		"token-id":        []byte(tok.ID),
		"secret-sha256":   []byte(jointoken.SecretHash(tok.Secret)),
		"sync-target":     []byte("inv1/edge1"),
		"sync-target-uid": []byte("uid-1"),
		"expiration":      []byte("2030-01-02T04:04:05Z"),
		"description":     []byte("for edge1"),
	}, secret.Data)
	for _, v := range secret.Data {
		require.NotContains(t, string(v), tok.Secret, "the secret is never stored")
	}

	forever, _, err := CreateToken(ctx, client, NewTokenOptions{InventorySpace: "inv1", SyncTarget: "edge2", SyncTargetUID: "uid-2", CAPEM: testCA})
	require.NoError(t, err)
	other, _, err := CreateToken(ctx, client, NewTokenOptions{InventorySpace: "inv2", SyncTarget: "edge1", SyncTargetUID: "uid-3", CAPEM: testCA})
	require.NoError(t, err)
	again, _, err := CreateToken(ctx, client, NewTokenOptions{InventorySpace: "inv1", SyncTarget: "edge1", SyncTargetUID: "uid-1", CAPEM: testCA})
	require.NoError(t, err)

	list, err := ListTokens(ctx, client)
	require.NoError(t, err)
	require.Len(t, list, 4)
	byID := map[string]TokenInfo{}
	for _, i := range list {
		byID[i.ID] = i
	}
	require.Equal(t, "inv1/edge1", byID[tok.ID].SyncTargetRef())
	require.Equal(t, testNow.Add(time.Hour), byID[tok.ID].Expiration)
	require.True(t, byID[tok.ID].Expired(testNow.Add(time.Hour)))
	require.False(t, byID[tok.ID].Expired(testNow))
	require.True(t, byID[forever.ID].Expiration.IsZero())
	require.False(t, byID[forever.ID].Expired(testNow.AddDate(100, 0, 0)))

	revoked, err := RevokeSyncTargetTokens(ctx, client, "inv1", "edge1")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{tok.ID, again.ID}, revoked)
	require.NoError(t, RevokeToken(ctx, client, other.ID))
	require.ErrorIs(t, RevokeToken(ctx, client, other.ID), ErrTokenNotFound)
	require.ErrorContains(t, RevokeToken(ctx, client, "NOT-AN-ID"), "is not a token id")
	list, err = ListTokens(ctx, client)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, forever.ID, list[0].ID)

	for _, bad := range []NewTokenOptions{
		{InventorySpace: "Inv", SyncTarget: "edge1", SyncTargetUID: "uid-1", CAPEM: testCA},
		{InventorySpace: "inv1", SyncTarget: "edge/1", SyncTargetUID: "uid-1", CAPEM: testCA},
		{InventorySpace: "inv1", SyncTarget: "edge1", SyncTargetUID: "uid-1", CAPEM: testCA, TTL: -time.Second},
		{InventorySpace: "inv1", SyncTarget: "edge1", SyncTargetUID: "uid-1"},
		{InventorySpace: "inv1", SyncTarget: "edge1", CAPEM: testCA}, // no UID
	} {
		_, _, err := CreateToken(ctx, client, bad)
		require.Error(t, err, "%+v", bad)
	}
}

func TestParseSyncTargetRef(t *testing.T) {
	for in, wantErr := range map[string]string{
		"inv1/edge1":  "",
		"inv1":        "is not INVENTORY-SPACE/NAME",
		"/edge1":      "is not INVENTORY-SPACE/NAME",
		"inv1/":       "is not INVENTORY-SPACE/NAME",
		"inv1/a/b":    "is not INVENTORY-SPACE/NAME",
		"Inv1/edge1":  "invalid space name",
		"inv1/Edge1":  "invalid SyncTarget name",
		"inv1/edge.1": "invalid SyncTarget name",
	} {
		inv, st, err := ParseSyncTargetRef(in)
		if wantErr == "" {
			require.NoError(t, err)
			require.Equal(t, "inv1", inv)
			require.Equal(t, "edge1", st)
			continue
		}
		require.ErrorContains(t, err, wantErr, in)
	}
}
