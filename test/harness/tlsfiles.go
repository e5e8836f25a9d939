// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/internal/certs"
)

// IssueCert writes dir/name.crt and dir/name.key: a certificate for a
// server (on the IPs) or a client, signed by the CA in caDir (ca.crt and
// ca.key, as internal/certs lays them out; made there if missing). It
// returns the two paths.
func IssueCert(t testing.TB, caDir, dir, name string, usage x509.ExtKeyUsage, ips ...string) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath, err := issueCert(caDir, dir, name, usage, ips...)
	require.NoError(t, err)
	return certPath, keyPath
}

func issueCert(caDir, dir, name string, usage x509.ExtKeyUsage, ips ...string) (certPath, keyPath string, err error) {
	ca, err := certs.EnsureCA(caDir, "test-ca")
	if err != nil {
		return "", "", err
	}
	tmpl := x509.Certificate{Subject: pkix.Name{CommonName: name}, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	for _, ip := range ips {
		parsed := net.ParseIP(ip)
		if parsed == nil {
			return "", "", fmt.Errorf("%q is not an IP address", ip)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, parsed)
	}
	certPEM, keyPEM, err := ca.Issue(tmpl, 24*time.Hour)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, os.WriteFile(certPath, certPEM, 0o644)
}
