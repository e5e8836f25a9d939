// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// A request to the API server runs in three goroutines the API server's
// libraries start: HTTP/2's handler, the timeout filter's (for requests
// that are not long-running), and finisher.FinishRequest's (the storage
// call). Each starts with the runtime's starting stack size, the average of
// every goroutine's, which the server's many small idle ones (watches,
// informers) keep small, and doubles it as the request goes deeper: every
// doubling copies the whole stack, frame by frame, and the deeper the stack
// the dearer the copy. Under many clients creating ConfigMaps this was a
// large share of the server's CPU, most of it in the timeout filter's
// goroutine, which runs the filters, the handler and the encoding of the
// response.
//
// reserveStack grows the calling goroutine's stack in one step, to fit
// requestStack more bytes, where the stack is still shallow: as the
// timeout filter's goroutine authenticates the request, the first thing in
// it that calls the server's own code (stackReservingAuthenticator). A
// long-running request (a watch, a tunnel) is served in HTTP/2's or HTTP/1's
// goroutine for as long as it lasts, which keeps its stack: it grows as it
// needs, without a reservation. The storage call's goroutine starts inside
// the API server's handlers, with nothing of ours before its first growth,
// and is left as it is.
const requestStack = 16 << 10

//go:noinline
func reserveStack() {
	var frame [requestStack]byte
	use(&frame)
}

//go:noinline
func use(frame *[requestStack]byte) { frame[0] = 1 }

// stackReservingAuthenticator reserves the stack of a request that is not
// long-running before it is authenticated.
type stackReservingAuthenticator struct {
	authenticator.Request
	longRunning request.LongRunningRequestCheck
}

func (a stackReservingAuthenticator) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if info, ok := request.RequestInfoFrom(req.Context()); ok && !a.longRunning(req, info) {
		reserveStack()
	}
	return a.Request.AuthenticateRequest(req)
}
