// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sdnotify speaks systemd's notify protocol (sd_notify(3)): a
// service of Type=notify tells systemd it is ready (READY=1) or stopping
// (STOPPING=1) with a datagram to the socket named by $NOTIFY_SOCKET.
//
// Take reads that variable and removes it from the environment, so that
// the process says it is ready only when it is: the embedded apiserver
// would otherwise announce READY=1 as soon as it listens, before the
// post-start hooks and controllers are up.
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// Notifier sends states to systemd. A nil Notifier (no $NOTIFY_SOCKET, not
// run by systemd) does nothing.
type Notifier struct {
	addr *net.UnixAddr
}

// Take returns a Notifier for $NOTIFY_SOCKET, or nil when it is not set,
// and unsets the variable.
func Take() *Notifier {
	path := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	return New(path)
}

// New returns a Notifier for a socket path ("@name" for an abstract
// socket), or nil for "".
func New(path string) *Notifier {
	if path == "" {
		return nil
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:]
	}
	return &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
}

// Notify sends state, e.g. "READY=1" or "STOPPING=1", with optional more
// lines such as "STATUS=...".
func (n *Notifier) Notify(state ...string) error {
	if n == nil {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notifying systemd: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(state, "\n") + "\n")); err != nil {
		return fmt.Errorf("notifying systemd: %w", err)
	}
	return nil
}

// Ready is the message that a service is ready, with a status line.
func Ready(status string) []string { return []string{"READY=1", "STATUS=" + status} }

// Stopping is the message that a service is stopping.
func Stopping() []string { return []string{"STOPPING=1"} }
