package syncer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
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
