// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// unlistedPaths are the handlers the API server registers without listing
// them at / (profiling, log verbosity, the index itself): the index cannot
// name them, so they are named here.
var unlistedPaths = []string{"/", "/index.html", "/debug/pprof", "/debug/pprof/", "/debug/pprof/profile", "/debug/pprof/symbol",
	"/debug/pprof/trace", "/debug/pprof/goroutine", "/debug/flags", "/debug/flags/v"}

// TestEveryHandlerDeclaresItsScope enumerates every path the server serves
// (the index at / as the admin reads it, and the handlers it does not
// list) and asks for each under a space prefix, as the admin, the caller
// every filter lets furthest: what is not a space's (the edge proxy, the
// tunnel, the syncer's endpoints, the dashboard, /metrics, /debug) must
// not be found there; what is (the API, discovery, OpenAPI, health,
// version) must answer as in the root space. A handler added later is
// the root space's until spaces.SpacePaths names it, and this test
// reaches it through the index.
func TestEveryHandlerDeclaresItsScope(t *testing.T) {
	s := harness.StartInProcess(t, "")
	createSpace(t, s, "team-a")
	cfg := s.RESTConfig(t, spaces.Root)
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	do := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, cfg.Host+path, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err, "%s %s", method, path)
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(body)
	}

	code, body := do(http.MethodGet, "/")
	require.Equal(t, http.StatusOK, code, body)
	var index struct {
		Paths []string `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &index), body)
	// What the index must list for the enumeration to mean anything.
	for _, want := range []string{"/metrics", "/api", "/apis", "/version", "/dashboard", "/kubestellar/v1/edges/", "/kubestellar/v1/tunnel"} {
		require.Contains(t, index.Paths, want, "the index lists %s", want)
	}
	paths := append(index.Paths, unlistedPaths...)
	served, global := 0, 0
	for _, path := range paths {
		// A prefix handler is asked for something below it.
		probe := path
		if strings.HasSuffix(probe, "/") && probe != "/" {
			probe += "inv/edge/proxy/api"
		}
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
			code, body := do(method, "/spaces/team-a"+probe)
			if spaces.ServedInSpace(path) {
				require.NotContains(t, body, "is not served in a space", "%s %s is a space's", method, probe)
				if method == http.MethodGet {
					served++
				}
				continue
			}
			require.Equal(t, http.StatusNotFound, code, "%s /spaces/team-a%s is the server's, not a space's: %s", method, probe, body)
			require.Contains(t, body, "is not served in a space", "%s %s", method, probe)
			if method == http.MethodGet {
				global++
			}
		}
	}
	t.Logf("%d paths: %d served in spaces, %d the server's only", len(paths), served, global)
	for _, path := range []string{"/api", "/apis", "/version", "/healthz", "/readyz", "/openapi/v2"} {
		code, body := do(http.MethodGet, "/spaces/team-a"+path)
		require.Equal(t, http.StatusOK, code, "GET %s in a space: %s", path, body)
	}
	require.NotZero(t, served)
	require.NotZero(t, global)
	// And the server's own are there in the root space: the 404 above is
	// the space prefix's doing.
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/flags"} {
		code, body := do(http.MethodGet, path)
		require.Equal(t, http.StatusOK, code, "GET %s in the root space: %s", path, body)
	}
}
