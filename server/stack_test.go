// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// TestStackReservingAuthenticator: the wrapper answers as the
// authenticator it wraps, and asks whether a request is long-running (whose
// stack it leaves alone) only when the request has been told apart.
func TestStackReservingAuthenticator(t *testing.T) {
	want := &authenticator.Response{User: &user.DefaultInfo{Name: "alice"}}
	for _, tc := range []struct {
		name    string
		info    *request.RequestInfo
		resp    *authenticator.Response
		ok      bool
		err     error
		checked bool
	}{
		{"a create", &request.RequestInfo{IsResourceRequest: true, Verb: "create"}, want, true, nil, true},
		{"a watch", &request.RequestInfo{IsResourceRequest: true, Verb: "watch"}, want, true, nil, true},
		{"unauthenticated", &request.RequestInfo{Verb: "get", Path: "/healthz"}, nil, false, nil, true},
		{"a bad token", &request.RequestInfo{IsResourceRequest: true, Verb: "list"}, nil, false, errors.New("bad token"), true},
		{"no request info", nil, want, true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checked := false
			a := stackReservingAuthenticator{
				Request: authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
					return tc.resp, tc.ok, tc.err
				}),
				longRunning: func(_ *http.Request, info *request.RequestInfo) bool {
					checked = true
					return info.Verb == "watch"
				},
			}
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.info != nil {
				req = req.WithContext(request.WithRequestInfo(req.Context(), tc.info))
			}
			resp, ok, err := a.AuthenticateRequest(req)
			require.Equal(t, tc.resp, resp)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.err, err)
			require.Equal(t, tc.checked, checked)
		})
	}
}

// BenchmarkRequestStack: a goroutine that goes 80 frames deep, as a
// request does, with and without its stack reserved first. Run with
// -benchmem; the difference is the stack copies (see reserveStack).
func BenchmarkRequestStack(b *testing.B) {
	for _, tc := range []struct {
		name    string
		reserve bool
	}{{"grown by doubling", false}, {"reserved", true}} {
		b.Run(tc.name, func(b *testing.B) {
			done := make(chan int)
			for b.Loop() {
				go func() {
					if tc.reserve {
						reserveStack()
					}
					done <- deep(80)
				}()
				<-done
			}
		})
	}
}

// deep recurses n frames of about 160 bytes each.
//
//go:noinline
func deep(n int) int {
	var pad [16]int
	pad[n%16] = n
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n%16]
}
