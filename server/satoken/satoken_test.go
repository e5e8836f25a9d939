// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package satoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/kubestellar/kubestellar/spaces"
)

func TestDeriveKey(t *testing.T) {
	ca, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	k1, err := DeriveKey(ca)
	require.NoError(t, err)
	k2, err := DeriveKey(ca)
	require.NoError(t, err)
	require.True(t, k1.Equal(k2), "servers sharing a CA derive the same key")
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	k3, err := DeriveKey(other)
	require.NoError(t, err)
	require.False(t, k1.Equal(k3))
	require.False(t, k1.Equal(ca), "not the CA key itself")
}

func TestTokensWorkInTheirSpaceOnly(t *testing.T) {
	ca, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	key, err := DeriveKey(ca)
	require.NoError(t, err)
	signer, err := NewSigner(key)
	require.NoError(t, err)
	accounts := map[string]*corev1.ServiceAccount{
		"team-a/ci/deployer": {ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "deployer", UID: "uid-a"}},
		"team-b/ci/deployer": {ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "deployer", UID: "uid-b"}},
	}
	get := func(_ context.Context, space, ns, name string) (*corev1.ServiceAccount, error) {
		if sa, ok := accounts[space+"/"+ns+"/"+name]; ok {
			return sa, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
	}
	authn, err := NewAuthenticator(key, get)
	require.NoError(t, err)
	ctx := context.Background()
	in := func(space string) context.Context {
		return authenticator.WithAudiences(spaces.WithSpace(ctx, space), authenticator.Audiences{Audience})
	}
	tok, exp, err := signer.Sign(ctx, "team-a", accounts["team-a/ci/deployer"], []string{Audience}, time.Hour)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), exp, time.Minute)

	resp, ok, err := authn.AuthenticateToken(in("team-a"), tok)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "system:serviceaccount:ci:deployer", resp.User.GetName())
	require.ElementsMatch(t, []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"}, resp.User.GetGroups())

	_, ok, err = authn.AuthenticateToken(in("team-b"), tok)
	require.False(t, ok)
	require.ErrorContains(t, err, `works only in its own space`)

	// Made again: another UID.
	accounts["team-a/ci/deployer"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "deployer", UID: types.UID("uid-a2")}}
	_, ok, err = authn.AuthenticateToken(in("team-a"), tok)
	require.False(t, ok)
	require.ErrorContains(t, err, "was deleted")
	delete(accounts, "team-a/ci/deployer")
	_, ok, err = authn.AuthenticateToken(in("team-a"), tok)
	require.False(t, ok)
	require.ErrorContains(t, err, "no longer exists")

	// Expired, forged, another audience, not a JWT.
	signer.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	old, _, err := signer.Sign(ctx, "team-b", accounts["team-b/ci/deployer"], []string{Audience}, time.Hour)
	require.NoError(t, err)
	_, ok, err = authn.AuthenticateToken(in("team-b"), old)
	require.False(t, ok)
	require.Error(t, err)
	signer.now = time.Now
	parts := strings.Split(tok, ".")
	_, ok, err = authn.AuthenticateToken(in("team-a"), parts[0]+"."+parts[1]+"."+strings.Repeat("A", len(parts[2])))
	require.False(t, ok)
	require.Error(t, err)
	elsewhere, _, err := signer.Sign(ctx, "team-b", accounts["team-b/ci/deployer"], []string{"vault"}, time.Hour)
	require.NoError(t, err)
	_, ok, err = authn.AuthenticateToken(in("team-b"), elsewhere)
	require.False(t, ok)
	require.ErrorContains(t, err, "audiences")
	_, ok, err = authn.AuthenticateToken(in("team-b"), "abcdef.0123456789abcdef")
	require.False(t, ok)
	require.NoError(t, err, "not a JWT of ours: the next authenticator's business")
}
