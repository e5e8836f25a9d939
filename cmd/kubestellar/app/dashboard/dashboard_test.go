// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	dash "github.com/kubestellar/kubestellar/dashboard"
	kskubeconfig "github.com/kubestellar/kubestellar/server/kubeconfig"
)

// server answers POST LoginCodesPath with status and body, and records the
// Authorization header it got.
func server(t *testing.T, status int, body string, auth *string) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != dash.LoginCodesPath {
			http.NotFound(w, r)
			return
		}
		if auth != nil {
			*auth = r.Header.Get("Authorization")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRequestCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		path   string
		err    string
	}{
		{name: "a code", status: http.StatusCreated, body: `{"code":"c1","path":"/dashboard/login?code=c1","expiresAt":"2030-01-01T00:00:00Z"}`, path: "/dashboard/login?code=c1"},
		{name: "refused, with a reason", status: http.StatusForbidden, body: `{"error":"anonymous users get no dashboard"}`,
			err: "the server refused a dashboard login code (403 Forbidden): anonymous users get no dashboard"},
		{name: "no dashboard", status: http.StatusNotFound, body: "404 page not found", err: "has no dashboard (404 Not Found): upgrade it"},
		{name: "refused, no reason", status: http.StatusInternalServerError, body: "oops", err: "the server refused a dashboard login code: 500 Internal Server Error"},
		{name: "not JSON", status: http.StatusCreated, body: "<html>", err: "reading the server's login code: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := server(t, tc.status, tc.body, nil)
			code, err := requestCode(context.Background(), &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, srv.URL)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.path, code.Path)
		})
	}

	srv := server(t, http.StatusCreated, "{}", nil)
	srv.Close()
	_, err := requestCode(context.Background(), &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, srv.URL)
	require.ErrorContains(t, err, "asking "+srv.URL+" for a dashboard login code: ")
	require.ErrorContains(t, err, "(is the server running?)")
}

// TestDashboard runs the command against a kubeconfig for a space of a test
// server: it asks with the kubeconfig's token and prints the link on the
// server's root, whatever space the kubeconfig names.
func TestDashboard(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("opening a browser is tested where there is no display")
	}
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	expires := time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)
	var auth string
	srv := server(t, http.StatusCreated, `{"code":"c1","path":"/dashboard/login?code=c1","expiresAt":"`+expires+`"}`, &auth)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kskubeconfig.ForSpace(srv.URL, "wds1", ca, "alice-token"), path))

	for _, tc := range []struct {
		args   []string
		errOut string
	}{
		{args: []string{"--no-browser"}},
		{errOut: "(no browser opened: no display)"},
	} {
		var out, errOut bytes.Buffer
		cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append([]string{"--kubeconfig", path}, tc.args...))
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		require.NoError(t, cmd.Execute())
		require.Equal(t, srv.URL+"/dashboard/login?code=c1\n", out.String())
		require.Equal(t, "Bearer alice-token", auth)
		require.Contains(t, errOut.String(), "it works once")
		require.Contains(t, errOut.String(), tc.errOut)
	}
}
