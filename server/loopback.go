// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// closingListener runs onClose once, after the listener has closed.
type closingListener struct {
	net.Listener
	once    sync.Once
	onClose func()
}

func (l *closingListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(l.onClose)
	return err
}

// closeLoopbackOnStop makes the server's in-process clients drop their idle
// connections when the HTTPS listener closes, which is when the API server
// starts its HTTP shutdown. By then the controllers have stopped, and their
// shared HTTP/2 connection to the loopback address sits idle; a Go client
// does not close an idle connection on the server's GOAWAY, and net/http
// waits a second for it before it lets the server exit.
func closeLoopbackOnStop(ln net.Listener, loopback *rest.Config, logger klog.Logger) net.Listener {
	return &closingListener{Listener: ln, onClose: func() {
		// The same configuration finds the same cached transport that
		// every in-process client shares.
		rt, err := rest.TransportFor(loopback)
		if err != nil {
			logger.V(2).Info("cannot close the loopback's idle connections", "err", err)
			return
		}
		utilnet.CloseIdleConnectionsFor(rt)
	}}
}
