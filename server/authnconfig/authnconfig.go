// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package authnconfig authenticates users of external identity providers
// (OIDC issuers, and any JWT issuer) through Kubernetes' structured
// authentication configuration: `kubestellar server start
// --authentication-config FILE` takes the same AuthenticationConfiguration
// file as kube-apiserver (apiserver.config.k8s.io/v1 or v1beta1: jwt
// issuers, audiences, claim validation rules, claim mappings with CEL) and
// uses k8s.io/apiserver's own JWT authenticator for each issuer.
//
// One rule is the server's own: an identity from an issuer may not be one
// the server makes itself (a name or group starting with system: or
// kubestellar:, or extra keys of kubestellar.io), so no claim mapping can
// pose as the admin, a syncer or a ServiceAccount.
package authnconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/install"
	"k8s.io/apiserver/pkg/apis/apiserver/validation"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
	"k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/plugin/pkg/authenticator/token/oidc"
)

// Load reads and validates an AuthenticationConfiguration file.
func Load(path string) (*apiserver.AuthenticationConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	install.Install(scheme)
	obj, gvk, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg, ok := obj.(*apiserver.AuthenticationConfiguration)
	if !ok {
		return nil, fmt.Errorf("%s holds a %s, not an AuthenticationConfiguration", path, gvk)
	}
	if cfg.Anonymous != nil {
		return nil, fmt.Errorf("%s: anonymous: the server decides itself what anonymous callers may read (the root space's health and CA paths); leave it out", path)
	}
	if errs := validation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), cfg, nil); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", path, errs.ToAggregate())
	}
	if len(cfg.JWT) == 0 {
		return nil, fmt.Errorf("%s names no jwt issuer", path)
	}
	return cfg, nil
}

// NewAuthenticator returns a token authenticator for the configuration's
// JWT issuers; each fetches its issuer's keys in the background until ctx
// ends (a token of an issuer not reached yet fails, as in kube-apiserver).
func NewAuthenticator(ctx context.Context, cfg *apiserver.AuthenticationConfiguration) (authenticator.Token, error) {
	var issuers []authenticator.Token
	for i := range cfg.JWT {
		jwt := cfg.JWT[i]
		opts := oidc.Options{JWTAuthenticator: jwt, SupportedSigningAlgs: []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"}}
		if ca := jwt.Issuer.CertificateAuthority; ca != "" {
			opts.CAContentProvider = staticCA([]byte(ca))
		}
		a, err := oidc.New(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("jwt issuer %s: %w", jwt.Issuer.URL, err)
		}
		issuers = append(issuers, a)
	}
	return withoutServerIdentities(union.New(issuers...)), nil
}

type staticCA []byte

func (c staticCA) CurrentCABundleContent() []byte { return c }

// reserved starts the names and groups of the server's own identities.
var reserved = []string{"system:", "kubestellar:", "kubestellar-"}

// withoutServerIdentities refuses an identity the server makes itself.
func withoutServerIdentities(inner authenticator.Token) authenticator.Token {
	return authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		resp, ok, err := inner.AuthenticateToken(ctx, token)
		if !ok || err != nil {
			return resp, ok, err
		}
		if err := checkIdentity(resp.User); err != nil {
			return nil, false, err
		}
		u := resp.User
		// Every authenticated user is in system:authenticated, as the
		// kube-apiserver's authenticator chain adds.
		resp.User = &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Groups: append(u.GetGroups(), user.AllAuthenticated), Extra: u.GetExtra()}
		return resp, true, nil
	})
}

func checkIdentity(u user.Info) error {
	for _, p := range reserved {
		if strings.HasPrefix(u.GetName(), p) {
			return fmt.Errorf("the token's user name %q starts with %q, which only the server's own identities use: map it with a prefix (claimMappings.username.prefix)", u.GetName(), p)
		}
		for _, g := range u.GetGroups() {
			if strings.HasPrefix(g, p) {
				return fmt.Errorf("the token's group %q starts with %q, which only the server's own identities use: map groups with a prefix (claimMappings.groups.prefix)", g, p)
			}
		}
	}
	for k := range u.GetExtra() {
		if k == "kubestellar.io" || strings.HasPrefix(k, "kubestellar.io/") || strings.Contains(k, ".kubestellar.io/") {
			return fmt.Errorf("the token maps the extra key %q, which only the server's own identities carry", k)
		}
	}
	if u.GetName() == "" {
		return errors.New("the token maps to an empty user name")
	}
	return nil
}
