// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func read(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := conn.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn := listen(t, path)
	t.Setenv("NOTIFY_SOCKET", path)
	n := Take()
	require.NotNil(t, n)
	_, set := os.LookupEnv("NOTIFY_SOCKET")
	require.False(t, set, "Take unsets NOTIFY_SOCKET so nothing else announces readiness")
	require.NoError(t, n.Notify(Ready("serving")...))
	require.Equal(t, "READY=1\nSTATUS=serving\n", read(t, conn))
	require.NoError(t, n.Notify(Stopping()...))
	require.Equal(t, "STOPPING=1\n", read(t, conn))
}

func TestAbstractSocket(t *testing.T) {
	name := "@kubestellar-test-" + filepath.Base(t.TempDir())
	conn := listen(t, name)
	require.NoError(t, New(name).Notify("READY=1"))
	require.Equal(t, "READY=1\n", read(t, conn))
}

func TestNoSocketIsANoOp(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n := Take()
	require.Nil(t, n)
	require.NoError(t, n.Notify("READY=1"))
}

func TestUnreachableSocketIsAnError(t *testing.T) {
	require.Error(t, New(filepath.Join(t.TempDir(), "missing.sock")).Notify("READY=1"))
}
