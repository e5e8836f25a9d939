// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package authnconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestLoad(t *testing.T) {
	write := func(content string) string {
		p := filepath.Join(t.TempDir(), "auth.yaml")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: "https://issuer.example.com", audiences: [kubestellar]}
  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
`
	cfg, err := Load(write(good))
	require.NoError(t, err)
	require.Equal(t, "https://issuer.example.com", cfg.JWT[0].Issuer.URL)

	for _, tc := range []struct{ desc, content, want string }{
		{"not YAML of a kind", "hello: world", "Object 'Kind' is missing"},
		{"another kind", "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n", "not an AuthenticationConfiguration"},
		{"no issuer", "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n", "names no jwt issuer"},
		{"plain http issuer", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: "http://issuer.example.com", audiences: [kubestellar]}
  claimMappings: {username: {claim: sub, prefix: ""}}
`, "https"},
		{"anonymous", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
anonymous: {enabled: true}
jwt:
- issuer: {url: "https://issuer.example.com", audiences: [kubestellar]}
  claimMappings: {username: {claim: sub, prefix: ""}}
`, "anonymous"},
		{"unknown field", good + "bogus: 1\n", "bogus"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Load(write(tc.content))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	require.Error(t, err)
}

func TestServerIdentitiesRefused(t *testing.T) {
	for _, tc := range []struct {
		u    user.Info
		want string
	}{
		{&user.DefaultInfo{Name: "oidc:alice", Groups: []string{"oidc:team-a"}}, ""},
		{&user.DefaultInfo{Name: "system:admin"}, `starts with "system:"`},
		{&user.DefaultInfo{Name: "kubestellar-admin"}, `starts with "kubestellar-"`},
		{&user.DefaultInfo{Name: "alice", Groups: []string{"system:masters"}}, `group "system:masters"`},
		{&user.DefaultInfo{Name: "alice", Groups: []string{"kubestellar:syncers"}}, `group "kubestellar:syncers"`},
		{&user.DefaultInfo{Name: "alice", Extra: map[string][]string{"kubestellar.io/sync-target": {"edge1"}}}, "extra key"},
		{&user.DefaultInfo{Name: "alice", Extra: map[string][]string{"example.com/team": {"a"}}}, ""},
		{&user.DefaultInfo{Name: ""}, "empty user name"},
	} {
		err := checkIdentity(tc.u)
		if tc.want == "" {
			require.NoError(t, err, tc.u.GetName())
		} else {
			require.ErrorContains(t, err, tc.want, tc.u.GetName())
		}
	}
}
