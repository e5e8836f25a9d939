// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/test/harness"
	"github.com/kubestellar/kubestellar/tunnel"
)

// rssKiB is a process's resident memory.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kib, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(t, err)
			return kib
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// TestEdgeAttackUnboundedInput: what one edge's token sends the built
// server is bounded, with an error rather than memory growth — tunnels per
// token, the size of a tunnel message, the request rate, the watches held
// open (issue 13, finding 5).
func TestEdgeAttackUnboundedInput(t *testing.T) {
	srv := harness.StartBinary(t, "")
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	token := flagValue(t, srv.JoinCommand(t, "edge1", "--inventory-space", "inv1"), "--token")
	header := http.Header{"Authorization": []string{"Bearer " + token}}
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback; the attacker does not care
	dialer := &websocket.Dialer{TLSClientConfig: tlsConfig, HandshakeTimeout: 10 * time.Second}
	tunnelURL := strings.Replace(srv.BaseURL(), "https://", "wss://", 1) + jointoken.TunnelPath

	// The token's SyncTarget must be known before tunnels open.
	var conns []*websocket.Conn
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, _, err := dialer.DialContext(ctx, tunnelURL, header)
		if err != nil {
			return false, nil
		}
		conns = append(conns, c)
		return true, nil
	}), "a tunnel with the syncer's token")

	t.Run("tunnels per token", func(t *testing.T) {
		for len(conns) < tunnel.MaxTunnelsPerToken {
			c, _, err := dialer.Dial(tunnelURL, header)
			require.NoError(t, err)
			conns = append(conns, c)
		}
		_, resp, err := dialer.Dial(tunnelURL, header)
		require.Error(t, err, "tunnel %d of one token", tunnel.MaxTunnelsPerToken+1)
		require.NotNil(t, resp)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		for _, c := range conns {
			c.Close()
		}
	})

	t.Run("a 768 MiB tunnel message", func(t *testing.T) {
		var c *websocket.Conn
		require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			c, _, err = dialer.DialContext(ctx, tunnelURL, header) // the closed ones may still be counted for a moment
			return err == nil, nil
		}), "a tunnel once the others closed")
		defer c.Close()
		before := rssKiB(t, srv.Pid())
		// A binary frame announcing 768 MiB (masked, with a zero key), whose
		// payload starts as the tunnel's list of connections, which the
		// tunnel library reads whole into memory; then 64 MiB of it.
		frame := []byte{0x82, 0x80 | 127}
		frame = binary.BigEndian.AppendUint64(frame, 768<<20)
		frame = append(frame, 0, 0, 0, 0)
		frame = binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(frame, 1), 0), 8) // id, connection, type SyncConnections
		raw := c.UnderlyingConn()
		_ = raw.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := raw.Write(frame)
		require.NoError(t, err)
		chunk := make([]byte, 1<<20)
		sent := 0
		for ; sent < 64; sent++ {
			if _, err := raw.Write(chunk); err != nil {
				break
			}
		}
		// The server closes the tunnel: reading ends.
		_ = raw.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.Copy(io.Discard, raw)
		require.NoError(t, err, "the server closed the tunnel (EOF), rather than the read timing out")
		after := rssKiB(t, srv.Pid())
		t.Logf("sent the header and %d MiB; server RSS %d MiB before, %d MiB after", sent, before>>10, after>>10)
		require.Less(t, after-before, 32<<10, "server memory grew by %d MiB", (after-before)>>10)
	})

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}, MaxIdleConnsPerHost: 300}}
	get := func(ctx context.Context, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.BaseURL()+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header = header.Clone()
		return client.Do(req)
	}

	t.Run("watches held open", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		path := "/spaces/inv1/apis/edge.kubestellar.io/v2alpha1/synctargets?watch=true&timeoutSeconds=120&fieldSelector=metadata.name%3Dedge1"
		var bodies []io.Closer
		defer func() {
			for _, b := range bodies {
				b.Close()
			}
		}()
		for range auth.DefaultSyncerLimits.MaxLongRunning {
			resp, err := get(ctx, path)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			bodies = append(bodies, resp.Body)
		}
		resp, err := get(ctx, path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "watch %d: %s", auth.DefaultSyncerLimits.MaxLongRunning+1, body)
		require.Contains(t, string(body), "watches and streams open")
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	})

	t.Run("request rate", func(t *testing.T) {
		// Four times the burst, as fast as 32 clients go: beyond the
		// burst and the rate, 429s with Retry-After.
		total := 4 * auth.DefaultSyncerLimits.Burst
		codes := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		work := make(chan struct{}, total)
		for range total {
			work <- struct{}{}
		}
		close(work)
		for range 32 {
			wg.Go(func() {
				for range work {
					resp, err := get(context.Background(), "/spaces/inv1/apis/edge.kubestellar.io/v2alpha1/synctargets/edge1")
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					codes[resp.StatusCode]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		t.Logf("%d requests: %v", total, codes)
		require.Positive(t, codes[http.StatusOK])
		require.Positive(t, codes[http.StatusTooManyRequests], "a syncer beyond its rate is refused")
		require.Equal(t, total, codes[http.StatusOK]+codes[http.StatusTooManyRequests], "only 200s and 429s: %v", codes)
	})
}
