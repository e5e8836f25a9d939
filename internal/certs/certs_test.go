// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func requireMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, want, info.Mode().Perm(), path)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

func TestEnsureCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs") // created on demand
	ca, err := EnsureCA(dir, "test-ca")
	require.NoError(t, err)

	require.True(t, ca.Cert.IsCA)
	require.Equal(t, "test-ca", ca.Cert.Subject.CommonName)
	require.NotZero(t, ca.Cert.KeyUsage&x509.KeyUsageCertSign)
	require.True(t, ca.Cert.NotAfter.After(time.Now().AddDate(9, 0, 0)))
	require.True(t, ca.Cert.NotBefore.Before(time.Now()))
	require.NoError(t, ca.Cert.CheckSignatureFrom(ca.Cert), "self-signed")
	require.Equal(t, ca.Cert.PublicKey, ca.Key.Public(), "key matches certificate")
	require.Equal(t, readFile(t, filepath.Join(dir, CACertFile)), ca.PEM)
	requireMode(t, filepath.Join(dir, CAKeyFile), 0o600)
	requireMode(t, filepath.Join(dir, CACertFile), 0o644)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{CACertFile, CAKeyFile}, names, "no temporary files are left behind")

	again, err := EnsureCA(dir, "another-name")
	require.NoError(t, err)
	require.Equal(t, ca.Cert.Raw, again.Cert.Raw, "the second call loads the same CA")
	require.Equal(t, ca.PEM, again.PEM)
	require.Equal(t, ca.Key.Public(), again.Key.Public())
	require.Equal(t, ca.Hash(), again.Hash())
}

func TestEnsureCAErrors(t *testing.T) {
	tests := []struct {
		desc    string
		cert    []byte // nil: file absent
		key     []byte
		wantErr string
	}{
		{desc: "garbage certificate", cert: []byte("not pem"), key: []byte("x"), wantErr: "no PEM certificate"},
		{desc: "garbage key", cert: nil, key: []byte("not a key"), wantErr: CAKeyFile},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			cert := tc.cert
			if cert == nil {
				// A valid certificate from another CA directory.
				other, err := EnsureCA(t.TempDir(), "other")
				require.NoError(t, err)
				cert = other.PEM
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, CACertFile), cert, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, CAKeyFile), tc.key, 0o600))
			_, err := EnsureCA(dir, "test-ca")
			require.ErrorContains(t, err, tc.wantErr)
			require.Equal(t, cert, readFile(t, filepath.Join(dir, CACertFile)), "an unreadable CA is never overwritten")
		})
	}
}

func TestCAHash(t *testing.T) {
	ca, err := EnsureCA(t.TempDir(), "test-ca")
	require.NoError(t, err)
	block, _ := pem.Decode(ca.PEM)
	require.NotNil(t, block)
	sum := sha256.Sum256(block.Bytes)
	require.Equal(t, hex.EncodeToString(sum[:]), ca.Hash())
	require.Len(t, ca.Hash(), 64)

	other, err := EnsureCA(t.TempDir(), "test-ca")
	require.NoError(t, err)
	require.NotEqual(t, ca.Hash(), other.Hash())
}

func loadServing(t *testing.T, certPath, keyPath string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certPath, keyPath) // also checks that the key matches
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	return cert
}

func verify(t *testing.T, cert *x509.Certificate, ca *CA, host string) error {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

func TestEnsureServingCert(t *testing.T) {
	dir := t.TempDir()
	ca, err := EnsureCA(dir, "test-ca")
	require.NoError(t, err)
	hosts := []string{"127.0.0.1", "::1", "localhost", "kubestellar.example.com", "", "localhost", "10.1.2.3"}

	certPath, keyPath, err := EnsureServingCert(dir, ca, hosts)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, ServingCertFile), certPath)
	require.Equal(t, filepath.Join(dir, ServingKeyFile), keyPath)
	requireMode(t, keyPath, 0o600)

	cert := loadServing(t, certPath, keyPath)
	require.Equal(t, []string{"localhost", "kubestellar.example.com"}, cert.DNSNames, "DNS names without duplicates or empties")
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	require.Equal(t, []string{"127.0.0.1", "::1", "10.1.2.3"}, ips)
	require.False(t, cert.IsCA)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, cert.ExtKeyUsage)
	for _, host := range []string{"localhost", "kubestellar.example.com", "127.0.0.1", "::1", "10.1.2.3"} {
		require.NoError(t, verify(t, cert, ca, host), host)
	}
	require.Error(t, verify(t, cert, ca, "other.example.com"))
	require.Error(t, verify(t, cert, ca, "10.9.9.9"))

	other, err := EnsureCA(t.TempDir(), "other-ca")
	require.NoError(t, err)
	require.Error(t, verify(t, cert, other, "localhost"), "does not verify against another CA")

	first := readFile(t, certPath)
	firstKey := readFile(t, keyPath)

	// Same hosts, in another order, or a subset: reused as it is.
	for _, same := range [][]string{hosts, {"10.1.2.3", "localhost", "kubestellar.example.com", "::1", "127.0.0.1"}, {"localhost"}, nil} {
		_, _, err = EnsureServingCert(dir, ca, same)
		require.NoError(t, err)
		require.Equal(t, first, readFile(t, certPath), "reused for %v", same)
		require.Equal(t, firstKey, readFile(t, keyPath))
	}

	// A new host: reissued, covering it and the others.
	_, _, err = EnsureServingCert(dir, ca, append(hosts, "new.example.com"))
	require.NoError(t, err)
	require.NotEqual(t, first, readFile(t, certPath))
	require.NotEqual(t, firstKey, readFile(t, keyPath), "a new key with the new certificate")
	cert = loadServing(t, certPath, keyPath)
	require.Equal(t, []string{"localhost", "kubestellar.example.com", "new.example.com"}, cert.DNSNames)
	require.NoError(t, verify(t, cert, ca, "new.example.com"))

	// A new IP: reissued too.
	second := readFile(t, certPath)
	_, _, err = EnsureServingCert(dir, ca, []string{"192.168.0.1"})
	require.NoError(t, err)
	require.NotEqual(t, second, readFile(t, certPath))
	cert = loadServing(t, certPath, keyPath)
	require.True(t, cert.IPAddresses[0].Equal(net.ParseIP("192.168.0.1")))
}

func TestEnsureServingCertReissues(t *testing.T) {
	tests := []struct {
		desc    string
		prepare func(t *testing.T, dir string, ca *CA)
	}{
		{
			desc: "signed by another CA",
			prepare: func(t *testing.T, dir string, _ *CA) {
				other, err := EnsureCA(t.TempDir(), "other")
				require.NoError(t, err)
				_, _, err = EnsureServingCert(dir, other, []string{"localhost"})
				require.NoError(t, err)
			},
		},
		{
			desc: "expiring within 30 days",
			prepare: func(t *testing.T, dir string, ca *CA) {
				tmpl := &x509.Certificate{
					SerialNumber: serial(),
					Subject:      pkix.Name{CommonName: "old"},
					NotBefore:    time.Now().Add(-time.Hour),
					NotAfter:     time.Now().Add(10 * 24 * time.Hour),
					ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
					DNSNames:     []string{"localhost"},
				}
				der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, ca.Key.Public(), ca.Key)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, ServingCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
			},
		},
		{
			desc: "unparsable file",
			prepare: func(t *testing.T, dir string, _ *CA) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, ServingCertFile), []byte("garbage"), 0o644))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			ca, err := EnsureCA(dir, "test-ca")
			require.NoError(t, err)
			tc.prepare(t, dir, ca)
			before := readFile(t, filepath.Join(dir, ServingCertFile))

			certPath, keyPath, err := EnsureServingCert(dir, ca, []string{"localhost"})
			require.NoError(t, err)
			require.NotEqual(t, before, readFile(t, certPath))
			cert := loadServing(t, certPath, keyPath)
			require.NoError(t, verify(t, cert, ca, "localhost"))
			require.True(t, cert.NotAfter.After(time.Now().Add(300*24*time.Hour)))
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	tests := []struct {
		desc string
		mode os.FileMode
		data string
	}{
		{desc: "private", mode: 0o600, data: "secret"},
		{desc: "public", mode: 0o644, data: "cert"},
		{desc: "empty", mode: 0o600, data: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			path := filepath.Join(dir, "file")
			require.NoError(t, WriteFileAtomic(path, []byte("previous"), 0o600))
			require.NoError(t, WriteFileAtomic(path, []byte(tc.data), tc.mode))
			require.Equal(t, tc.data, string(readFile(t, path)))
			requireMode(t, path, tc.mode)
			requireMode(t, dir, 0o700)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file left")
		})
	}
}
