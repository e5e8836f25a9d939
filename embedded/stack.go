package embedded

import (
	"net/http"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// A request to the API server runs in three goroutines the API server's
// libraries start: HTTP/2's handler, the timeout filter's, and
// finisher.FinishRequest's (the storage call). Each starts with the
// runtime's starting stack size, the average of every goroutine's, which
// the server's many small idle ones (watches, informers) keep small, and
// doubles it as the request goes deeper: every doubling copies the whole
// stack, frame by frame, and the deeper the stack the dearer the copy. At
// 32 clients creating ConfigMaps this was 13 % of the server's CPU.
//
// reserveStack grows the calling goroutine's stack in one step, to fit
// requestStack more bytes, where the stack is still shallow: at the top of
// the handler's goroutine (withStackReserve) and as the timeout filter's
// goroutine starts (stackReservingAuthenticator: authentication is the
// first thing in it that calls the server's own code). The storage call's
// goroutine starts inside the API server's handlers, with nothing of ours
// before its first growth, and is left as it is.
const requestStack = 16 << 10

//go:noinline
func reserveStack() {
	var frame [requestStack]byte
	use(&frame)
}

//go:noinline
func use(frame *[requestStack]byte) { frame[0] = 1 }

// withStackReserve reserves a request's stack before handler runs.
func withStackReserve(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		reserveStack()
		handler.ServeHTTP(w, req)
	})
}

// stackReservingAuthenticator reserves a request's stack before it is
// authenticated.
type stackReservingAuthenticator struct{ authenticator.Request }

func (a stackReservingAuthenticator) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	reserveStack()
	return a.Request.AuthenticateRequest(req)
}
