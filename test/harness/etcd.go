// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

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

	"github.com/kubestellar/kubestellar/internal/certs"
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
	dir                       string
	server                    *background
}

// StartEtcd starts etcd for a test and stops it when the test ends.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	e, err := NewEtcd(t.Context(), t.Logf)
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	return e
}

// NewEtcd starts etcd on free loopback ports (building it first if the
// edge clusters' binaries are not built yet); Stop removes it.
func NewEtcd(ctx context.Context, logf edgecluster.Logf) (_ *Etcd, err error) {
	bins, err := edgecluster.EnsureBinaries(ctx, logf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ks-etcd-")
	if err != nil {
		return nil, err
	}
	e := &Etcd{dir: dir}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, err
	}
	serverCert, serverKey, err := issueCert(pki, pki, "etcd-server", x509.ExtKeyUsageServerAuth, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	e.CAFile = filepath.Join(pki, certs.CACertFile)
	if e.CertFile, e.KeyFile, err = issueCert(pki, pki, "etcd-client", x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	client, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	peer, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	e.Endpoint = fmt.Sprintf("https://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	e.server, err = startBackground(filepath.Join(dir, "etcd.log"), bins.Etcd,
		"--name=ks", "--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+e.Endpoint, "--advertise-client-urls="+e.Endpoint,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=ks="+peerURL,
		"--client-cert-auth", "--trusted-ca-file="+e.CAFile, "--cert-file="+serverCert, "--key-file="+serverKey,
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	tlsConfig, err := e.clientTLS()
	if err != nil {
		return nil, err
	}
	health := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 5 * time.Second}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if e.server.hasExited() {
			return false, errors.New("etcd exited")
		}
		resp, err := health.Get(e.Endpoint + "/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, fmt.Errorf("etcd did not become healthy: %w; log:\n%s", err, e.server.log())
	}
	return e, nil
}

// PID is etcd's process.
func (e *Etcd) PID() int { return e.server.cmd.Process.Pid }

// Stop stops etcd and removes its files.
func (e *Etcd) Stop() {
	e.server.stop()
	os.RemoveAll(e.dir)
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
