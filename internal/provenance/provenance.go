// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package provenance tells an identity that one of the server's
// authenticators vouched for from one that a request named for itself.
//
// Kubernetes' impersonation filter replaces the authenticated user with one
// built from Impersonate-* headers, which a caller allowed to impersonate
// fills as it likes: the group system:masters, the user name
// system:apiserver, a syncer's name and extras. A decision that trusts a
// name trusts a header. The server's authentication wraps what its
// authenticators return (Authenticated); the impersonation filter's user is
// a new value, never wrapped, so IsPrivileged, IsServer and Vouched answer
// false for an impersonated identity, whatever it claims to be. The server's
// own in-process writes carry a user made with Vouch.
package provenance

import (
	"net/http"
	"slices"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// vouched is an identity an authenticator of the server returned, or the
// server made for itself.
type vouched struct{ user.Info }

// Vouch marks u as the server's own word. Only authentication and the
// server's in-process callers may use it, never on anything a request says.
func Vouch(u user.Info) user.Info {
	if u == nil || Vouched(u) {
		return u
	}
	return vouched{u}
}

// Vouched tells whether u came from an authenticator of the server (or the
// server itself) rather than from impersonation headers.
func Vouched(u user.Info) bool {
	_, ok := u.(vouched)
	return ok
}

// IsPrivileged tells whether u may do everything everywhere: an
// authenticated member of system:masters (the admin token, the server's
// loopback client, a token the admin made for that group).
func IsPrivileged(u user.Info) bool {
	return Vouched(u) && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

// IsServer tells whether u is the server itself: its loopback client,
// which its controllers use, or its in-process writes.
func IsServer(u user.Info) bool {
	return IsPrivileged(u) && u.GetName() == user.APIServerUser
}

// Authenticated wraps every identity a authenticates with Vouch.
func Authenticated(a authenticator.Request) authenticator.Request {
	return authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := a.AuthenticateRequest(req)
		if ok && err == nil && resp != nil {
			out := *resp
			out.User = Vouch(resp.User)
			return &out, ok, err
		}
		return resp, ok, err
	})
}
