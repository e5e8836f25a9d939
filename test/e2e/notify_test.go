// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// notifySocket is a real unix datagram socket standing in for systemd's.
type notifySocket struct {
	conn *net.UnixConn
	msgs chan string
}

func listenNotify(t *testing.T) (*notifySocket, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	s := &notifySocket{conn: conn, msgs: make(chan string, 16)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(s.msgs)
				return
			}
			s.msgs <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return s, path
}

// next returns the next message, failing the test after timeout.
func (s *notifySocket) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-time.After(timeout):
		t.Fatalf("no message on the notify socket within %s", timeout)
		return ""
	}
}

// TestServerNotifiesSystemd: under Type=notify, the server says READY=1
// once, only when /readyz is ok (the embedded apiserver, which would say it
// as soon as it listens, is kept quiet), and STOPPING=1 on SIGTERM.
func TestServerNotifiesSystemd(t *testing.T) {
	sock, path := listenNotify(t)
	t.Setenv("NOTIFY_SOCKET", path)
	srv := harness.StartBinary(t, "")
	// StartBinary returned when /readyz was ok; READY may come a moment later
	// but never earlier, so check /readyz at the moment it arrives too.
	msg := sock.next(t, 30*time.Second)
	require.True(t, strings.HasPrefix(msg, "READY=1\n"), "first message %q", msg)
	require.Contains(t, msg, "STATUS=serving https://")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", srv.Port))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	srv.Stop(t)
	require.Equal(t, "STOPPING=1\n", sock.next(t, 10*time.Second), "no second READY, then STOPPING")
}

// TestSyncerNotifiesSystemd: the syncer says READY=1 once it has connected
// and found its mailbox, and STOPPING=1 when it stops.
func TestSyncerNotifiesSystemd(t *testing.T) {
	srv := harness.StartBinary(t, "")
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	sock, path := listenNotify(t)
	t.Setenv("NOTIFY_SOCKET", path)
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, "")
	msg := sock.next(t, time.Minute)
	require.True(t, strings.HasPrefix(msg, "READY=1\nSTATUS=connected; mailbox inv1-mb-"), "first message %q", msg)
	require.Contains(t, syncer.Log(), "mailbox inv1-mb-", "READY came after the mailbox was found")
	syncer.Stop(t)
	require.Equal(t, "STOPPING=1\n", sock.next(t, 10*time.Second))
}
