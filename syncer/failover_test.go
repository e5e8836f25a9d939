// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/jointoken"
)

func TestFailover(t *testing.T) {
	answer := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name+" "+r.URL.Path)
		}))
	}
	a, b := answer("a"), answer("b")
	defer b.Close()
	s, err := newServers([]string{a.URL, b.URL}, klog.Background())
	require.NoError(t, err)
	client := &http.Client{Transport: s.wrap(http.DefaultTransport)}
	get := func() (string, error) {
		// The request names the first server; the wrapper sends it to the one in use.
		resp, err := client.Get(a.URL + "/spaces/mb/api")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body), nil
	}
	got, err := get()
	require.NoError(t, err)
	require.Equal(t, "a /spaces/mb/api", got)

	a.Close()
	_, err = get()
	require.Error(t, err, "the request in flight fails")
	require.Equal(t, b.URL, s.URL(), "and the syncer moves to the next server")
	got, err = get()
	require.NoError(t, err)
	require.Equal(t, "b /spaces/mb/api", got, "keeping the path")

	one, err := newServers([]string{b.URL}, klog.Background())
	require.NoError(t, err)
	one.failed(0, io.EOF)
	require.Equal(t, b.URL, one.URL(), "with one server there is nowhere to go")
}

// Requests to the center are bounded in time; the caches' lists and
// watches are not, or every watch would end with the bound and start
// again.
func TestCachesWatchWithoutTheRequestTimeout(t *testing.T) {
	srv, err := newServers([]string{"https://center.example:6443"}, klog.Background())
	require.NoError(t, err)
	base := baseConfig(&Options{}, jointoken.Token{}, nil, srv)
	require.Equal(t, 30*time.Second, base.Timeout, "a request gives up after 30 s")
	mailbox := spaceConfig(base, "inv1-mb-1")
	caches := watchConfig(mailbox)
	require.Zero(t, caches.Timeout, "a cache's watch lasts until the server ends it")
	require.Equal(t, mailbox.Host, caches.Host)
	require.Equal(t, 30*time.Second, mailbox.Timeout, "the config it is made from is unchanged")
}
