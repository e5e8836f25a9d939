// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	jose "gopkg.in/go-jose/go-jose.v2"
	"gopkg.in/go-jose/go-jose.v2/jwt"

	"github.com/kubestellar/kubestellar/test/harness"
)

// oidcIssuer is an OpenID Connect provider on loopback: discovery and
// keys, and ID tokens it signs for the test.
type oidcIssuer struct {
	*httptest.Server
	signer jose.Signer
}

func startOIDCIssuer(t *testing.T) *oidcIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	jwk := jose.JSONWebKey{Key: key, KeyID: "test-key", Algorithm: string(jose.RS256), Use: "sig"}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jwk}, (&jose.SignerOptions{}).WithType("JWT"))
	require.NoError(t, err)
	iss := &oidcIssuer{signer: signer}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss.URL, "jwks_uri": iss.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"}, "response_types_supported": []string{"id_token"},
			"subject_types_supported": []string{"public"}, "authorization_endpoint": iss.URL + "/auth"})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk.Public()}})
	})
	iss.Server = httptest.NewTLSServer(mux)
	t.Cleanup(iss.Close)
	return iss
}

// token signs an ID token for sub, with groups, for audience.
func (i *oidcIssuer) token(t *testing.T, sub, audience string, groups ...string) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.Signed(i.signer).Claims(jwt.Claims{Issuer: i.URL, Subject: sub, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).
		Claims(map[string]any{"groups": groups}).CompactSerialize()
	require.NoError(t, err)
	return tok
}

func (i *oidcIssuer) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.Certificate().Raw}))
}

// TestOIDCUsers: an OpenID Connect issuer named in --authentication-config
// authenticates users, mapped as the file says, and each space's RBAC
// decides what they may do.
func TestOIDCUsers(t *testing.T) {
	iss := startOIDCIssuer(t)
	cfg := `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ` + iss.URL + `
    audiences: [kubestellar-cli]
    certificateAuthority: |
` + indent(iss.caPEM(), "      ") + `
  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
    groups: {claim: groups, prefix: "oidc:"}
`
	path := filepath.Join(t.TempDir(), "authentication.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	srv := harness.StartBinary(t, "", "--authentication-config", path)
	admin := srv.Kubectl()
	srv.CLI(t, "space", "create", "team-a")
	admin.MustRun(t, "--context", "team-a", "create", "rolebinding", "team-a-view", "--clusterrole=view", "--group=oidc:team-a", "-n", "default")
	admin.MustRun(t, "--context", "team-a", "create", "configmap", "settings", "-n", "default", "--from-literal=mode=fast")

	alice := &tenant{name: "alice", dir: t.TempDir(), token: iss.token(t, "alice", "kubestellar-cli", "team-a"), srv: srv}
	require.NoError(t, os.WriteFile(filepath.Join(alice.dir, "token"), []byte(alice.token), 0o600))
	a := alice.in(t, "team-a")
	// The issuer's keys are fetched in the background after the start.
	poll(t, a, func(s string) bool { return strings.Contains(s, "oidc:alice") }, "alice's ID token to authenticate", "auth", "whoami")
	require.Contains(t, a.MustRun(t, "auth", "whoami"), "oidc:team-a")
	require.Equal(t, "fast", a.MustRun(t, "get", "configmap", "settings", "-n", "default", "-o", "jsonpath={.data.mode}"))
	require.Contains(t, a.MustFail(t, "delete", "configmap", "settings", "-n", "default"), "forbidden")

	// A token for another audience, or of another group, gets nothing here.
	other := &tenant{name: "mallory", dir: t.TempDir(), token: iss.token(t, "alice", "someone-else", "team-a"), srv: srv}
	require.NoError(t, os.WriteFile(filepath.Join(other.dir, "token"), []byte(other.token), 0o600))
	require.True(t, unauthorized(other.in(t, "team-a").MustFail(t, "get", "configmaps", "-n", "default")))
	bob := &tenant{name: "bob", dir: t.TempDir(), token: iss.token(t, "bob", "kubestellar-cli", "team-b"), srv: srv}
	require.NoError(t, os.WriteFile(filepath.Join(bob.dir, "token"), []byte(bob.token), 0o600))
	require.Contains(t, bob.in(t, "team-a").MustFail(t, "get", "--raw", "/spaces/team-a/api/v1/namespaces/default/configmaps"),
		`user "oidc:bob" has no access to space "team-a"`)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}
