package embedded

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestStackReserveIsTransparent(t *testing.T) {
	called := false
	h := withStackReserve(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		called = true
		require.Equal(t, "/api/v1/pods", req.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil))
	require.True(t, called)
	require.Equal(t, http.StatusTeapot, rec.Code)

	want := &authenticator.Response{User: &user.DefaultInfo{Name: "alice"}}
	for _, tc := range []struct {
		resp *authenticator.Response
		ok   bool
		err  error
	}{{want, true, nil}, {nil, false, nil}, {nil, false, errors.New("bad token")}} {
		a := stackReservingAuthenticator{authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
			return tc.resp, tc.ok, tc.err
		})}
		resp, ok, err := a.AuthenticateRequest(httptest.NewRequest(http.MethodGet, "/", nil))
		require.Equal(t, tc.resp, resp)
		require.Equal(t, tc.ok, ok)
		require.Equal(t, tc.err, err)
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
