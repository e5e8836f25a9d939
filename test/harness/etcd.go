package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/embedded/certs"
	"github.com/kubestellar/kubestellar/test/edgecluster"
)

// Etcd is a throwaway one-member etcd cluster on loopback that serves
// clients over TLS and requires client certificates, as production etcd
// does. Its binary is the edge clusters' (etcd 3.7, built from Go modules:
// Debian's 3.4 is too old for the API server's watch progress requests).
type Etcd struct {
	// Endpoint is the client URL (https).
	Endpoint string
	// CAFile verifies etcd's certificate; CertFile and KeyFile are a
	// client's certificate.
	CAFile, CertFile, KeyFile string
	server                    *Daemon
}

// StartEtcd starts etcd for a test and stops it when the test ends.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	bins, err := edgecluster.EnsureBinaries(t.Context(), t.Logf)
	require.NoError(t, err)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	require.NoError(t, os.MkdirAll(pki, 0o700))
	serverCert, serverKey := IssueCert(t, pki, pki, "etcd-server", x509.ExtKeyUsageServerAuth, "127.0.0.1")
	e := &Etcd{CAFile: filepath.Join(pki, certs.CACertFile)}
	e.CertFile, e.KeyFile = IssueCert(t, pki, pki, "etcd-client", x509.ExtKeyUsageClientAuth)

	client, peer := FreePort(t), FreePort(t)
	e.Endpoint = fmt.Sprintf("https://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	e.server = (*Netns)(nil).StartDaemon(t, filepath.Join(dir, "etcd.log"), bins.Etcd,
		"--name=ks", "--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+e.Endpoint, "--advertise-client-urls="+e.Endpoint,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=ks="+peerURL,
		"--client-cert-auth", "--trusted-ca-file="+e.CAFile, "--cert-file="+serverCert, "--key-file="+serverKey,
		"--unsafe-no-fsync", "--log-level=warn")

	tlsConfig, err := e.clientTLS()
	require.NoError(t, err)
	health := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 5 * time.Second}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if e.server.HasExited() {
			return false, errors.New("etcd exited")
		}
		resp, err := health.Get(e.Endpoint + "/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "etcd did not become healthy; log:\n%s", e.server.Log())
	return e
}

func (e *Etcd) clientTLS() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(e.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no certificate in the etcd CA file")
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ServerArgs are the `kubestellar server start` flags that use this etcd.
func (e *Etcd) ServerArgs() []string {
	return []string{"--datastore-endpoint", e.Endpoint,
		"--datastore-cafile", e.CAFile, "--datastore-certfile", e.CertFile, "--datastore-keyfile", e.KeyFile}
}
