// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/jointoken"
)

// TestConnectRetriesOnOneConnection: a server too busy to answer who the
// token is for (429) is asked again on the same connection, its CA not
// read again: 10,000 syncers connecting at once would otherwise cost the
// server two TLS handshakes per attempt, each one more load on the server
// they wait for.
func TestConnectRetriesOnOneConnection(t *testing.T) {
	var caReads, asked, conns atomic.Int32
	var caPEM []byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cacerts":
			caReads.Add(1)
			_, _ = w.Write(caPEM)
		case IdentityPath:
			if asked.Add(1) <= 2 {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many requests", http.StatusTooManyRequests)
				return
			}
			_ = json.NewEncoder(w).Encode(Identity{InventorySpace: "inv1", SyncTarget: "edge1", MailboxSpace: "inv1-edge1-mailbox"})
		default:
			http.NotFound(w, r)
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	o := NewOptions()
	o.Server, o.SyncTarget = srv.URL, "edge1"
	tok := jointoken.Token{CAHash: jointoken.CAHash(caPEM), ID: "abcdef", Secret: "0123456789abcdef"}
	var out bytes.Buffer
	s := &Syncer{opts: o, out: &out, tok: tok}
	var err error
	s.servers, err = newServers(o.Servers(), klog.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.connect(ctx))
	require.Equal(t, "inv1-edge1-mailbox", s.id.MailboxSpace)
	require.EqualValues(t, 3, asked.Load(), "asked until answered")
	require.EqualValues(t, 1, caReads.Load(), "the CA is read once")
	require.EqualValues(t, 2, conns.Load(), "one connection to read the CA, one for the API: a TLS handshake each, whatever the retries")
}
