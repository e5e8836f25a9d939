// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package satoken issues and checks ServiceAccount tokens, per space.
//
// `kubectl create token NAME -n NS` in a space asks for a TokenRequest on
// the ServiceAccount; the answer is a JWT signed by the server, expiring,
// whose claims name the ServiceAccount (namespace, name, UID) and the
// space. It authenticates as system:serviceaccount:NS:NAME, in the groups
// system:serviceaccounts and system:serviceaccounts:NS, and only in its own
// space: the same ServiceAccount name in another space is another account,
// and a token presented there is refused. It stops working when the
// ServiceAccount is deleted (or made again: another UID).
//
// The signing key is derived from the cluster's CA key, so every server
// sharing a datastore (and so the CA) signs and checks the same tokens
// without any new state to share.
package satoken

import (
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"
	"gopkg.in/go-jose/go-jose.v2/jwt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
)

const (
	// Issuer is the iss claim of the server's ServiceAccount tokens.
	Issuer = "https://kubestellar.io/serviceaccounts"
	// Audience is the API server's audience, the default of a token.
	Audience = "kubestellar"

	// Expiration bounds of a TokenRequest, as kube-apiserver's defaults.
	DefaultExpiration = time.Hour
	MinExpiration     = 10 * time.Minute
	MaxExpiration     = 48 * time.Hour
)

// claims are the token's private claims: Kubernetes' and the space.
type claims struct {
	Kubernetes kubernetesClaims `json:"kubernetes.io"`
	Space      string           `json:"kubestellar.io/space"`
}

type kubernetesClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount ref    `json:"serviceaccount"`
}

type ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// DeriveKey returns the ServiceAccount signing key of a cluster whose CA
// key is caKey: a P-256 key drawn from HKDF-SHA256 over the CA key.
func DeriveKey(caKey any) (*ecdsa.PrivateKey, error) {
	der, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return nil, fmt.Errorf("reading the CA key: %w", err)
	}
	seed, err := hkdf.Key(sha256.New, der, nil, "kubestellar service account signing key v1", 40)
	if err != nil {
		return nil, err
	}
	// A scalar in [1, N-1], from 320 bits to keep the bias negligible.
	n := new(big.Int).Sub(ecdsaP256Order(), big.NewInt(1))
	d := new(big.Int).Mod(new(big.Int).SetBytes(seed), n)
	d.Add(d, big.NewInt(1))
	priv, err := ecdh.P256().NewPrivateKey(d.FillBytes(make([]byte, 32)))
	if err != nil {
		return nil, err
	}
	der, err = x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("the derived key is not an ECDSA key")
	}
	return ec, nil
}

func ecdsaP256Order() *big.Int {
	n, _ := new(big.Int).SetString("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", 16)
	return n
}

// Issuer signs tokens.
type Signer struct {
	gen serviceaccount.TokenGenerator
	now func() time.Time
}

// NewSigner returns a signer with key.
func NewSigner(key *ecdsa.PrivateKey) (*Signer, error) {
	gen, err := serviceaccount.JWTTokenGenerator(Issuer, key)
	if err != nil {
		return nil, err
	}
	return &Signer{gen: gen, now: time.Now}, nil
}

// Sign returns a token for sa of space, for audiences, expiring after
// ttl, and when it expires.
func (s *Signer) Sign(ctx context.Context, space string, sa *corev1.ServiceAccount, audiences []string, ttl time.Duration) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(ttl)
	public := &jwt.Claims{
		Issuer:    Issuer,
		Subject:   apiserverserviceaccount.MakeUsername(sa.Namespace, sa.Name),
		Audience:  jwt.Audience(audiences),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(exp),
		ID:        uuid.NewString(),
	}
	private := &claims{Space: space, Kubernetes: kubernetesClaims{Namespace: sa.Namespace,
		ServiceAccount: ref{Name: sa.Name, UID: string(sa.UID)}}}
	tok, err := s.gen.GenerateToken(ctx, public, private)
	return tok, exp, err
}

// ServiceAccountGetter reads a ServiceAccount of a space.
type ServiceAccountGetter func(ctx context.Context, space, namespace, name string) (*corev1.ServiceAccount, error)

// NewAuthenticator returns the authenticator of the tokens key signed,
// checking each against the space of the request and the ServiceAccount
// as it is now (getSA).
func NewAuthenticator(key *ecdsa.PrivateKey, getSA ServiceAccountGetter) (authenticator.Token, error) {
	keys, err := serviceaccount.StaticPublicKeysGetter([]any{key.Public()})
	if err != nil {
		return nil, err
	}
	inner := serviceaccount.JWTTokenAuthenticator[claims]([]string{Issuer}, keys, authenticator.Audiences{Audience}, &validator{getSA: getSA, now: time.Now})
	return authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		resp, ok, err := inner.AuthenticateToken(ctx, token)
		if !ok || err != nil {
			return resp, ok, err
		}
		// As kube-apiserver's authenticator chain does; and the space,
		// which the validator checked is the request's, goes with the
		// identity wherever it is used (a dashboard session, a
		// placement's writer): a ServiceAccount acts in its own space only.
		u := resp.User
		extra := map[string][]string{principal.ExtraSpace: {spaces.SpaceOrRoot(ctx)}}
		for k, v := range u.GetExtra() {
			if k != principal.ExtraSpace {
				extra[k] = v
			}
		}
		resp.User = &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Groups: append(u.GetGroups(), user.AllAuthenticated), Extra: extra}
		return resp, true, nil
	}), nil
}

type validator struct {
	getSA ServiceAccountGetter
	now   func() time.Time
}

// Validate checks what the signature cannot: the space of the request,
// and that the ServiceAccount is still the one the token names.
func (v *validator) Validate(ctx context.Context, _ string, public *jwt.Claims, private *claims) (*apiserverserviceaccount.ServiceAccountInfo, error) {
	// The signature is checked; the times are the validator's to check.
	switch err := public.Validate(jwt.Expected{Time: v.now()}); {
	case errors.Is(err, jwt.ErrExpired):
		return nil, errors.New("the ServiceAccount token has expired: ask for a new one (kubectl create token)")
	case err != nil:
		return nil, fmt.Errorf("the ServiceAccount token is not valid now: %w", err)
	}
	if public.Expiry == nil {
		return nil, errors.New("a ServiceAccount token without an expiry")
	}
	k := private.Kubernetes
	if private.Space == "" || k.Namespace == "" || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "" {
		return nil, errors.New("a ServiceAccount token without its space, namespace, name or UID")
	}
	if public.Subject != apiserverserviceaccount.MakeUsername(k.Namespace, k.ServiceAccount.Name) {
		return nil, errors.New("the token's subject does not name its ServiceAccount")
	}
	if space := spaces.SpaceOrRoot(ctx); space != private.Space {
		return nil, fmt.Errorf("the token of ServiceAccount %s/%s of space %q is used in space %q: a ServiceAccount's token works only in its own space",
			k.Namespace, k.ServiceAccount.Name, private.Space, space)
	}
	sa, err := v.getSA(ctx, private.Space, k.Namespace, k.ServiceAccount.Name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("ServiceAccount %s/%s of space %q no longer exists", k.Namespace, k.ServiceAccount.Name, private.Space)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up ServiceAccount %s/%s: %w", k.Namespace, k.ServiceAccount.Name, err)
	}
	if sa.UID != types.UID(k.ServiceAccount.UID) || sa.DeletionTimestamp != nil {
		return nil, fmt.Errorf("ServiceAccount %s/%s of space %q was deleted (it is another one now, or being deleted)", k.Namespace, k.ServiceAccount.Name, private.Space)
	}
	info := &apiserverserviceaccount.ServiceAccountInfo{Namespace: k.Namespace, Name: k.ServiceAccount.Name, UID: k.ServiceAccount.UID}
	return info, nil
}
