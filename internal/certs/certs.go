// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package certs creates the server's certificate authority and serving
// certificate in its data directory on first start, and reissues the serving
// certificate when the names it must cover change.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// File names inside the certificate directory.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
)

// CA is a certificate authority that can sign serving certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is the CA certificate, PEM encoded, as clients must trust it.
	PEM []byte
}

// Hash returns the hex SHA-256 of the CA certificate (DER), the value a join
// token pins.
func (ca *CA) Hash() string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return hex.EncodeToString(sum[:])
}

// EnsureCA loads the CA from dir, creating it when there is none.
func EnsureCA(dir, commonName string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	if ca, err := loadCA(certPath, keyPath); err == nil {
		return ca, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// Never replace a CA whose key went missing: clients and join tokens pin it.
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Stat(p); err == nil {
			return nil, fmt.Errorf("%s exists but its pair is missing: restore it, or remove both %s and %s to make a new CA (every client must then trust the new one)",
				p, CACertFile, CAKeyFile)
		}
	}
	ca, err := NewCA(commonName, 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := writeKeyPair(certPath, keyPath, ca.PEM, keyPEM); err != nil {
		return nil, err
	}
	return loadCA(certPath, keyPath)
}

// NewCA makes a CA in memory, valid from an hour ago for validity.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// KeyPEM returns the CA's key, PEM encoded (SEC 1 for an ECDSA key, as the
// CA has always been written).
func (ca *CA) KeyPEM() ([]byte, error) {
	if k, ok := ca.Key.(*ecdsa.PrivateKey); ok {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Issue signs a certificate made from tmpl (its subject, names and usages)
// for a new key, valid from an hour ago for validity; without a KeyUsage,
// the certificate's is digital signature. It returns the certificate and
// the key, PEM encoded.
func (ca *CA) Issue(tmpl x509.Certificate, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(validity)
	if tmpl.KeyUsage == 0 {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func loadCA(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	keyObj, err := keyutil.PrivateKeyFromFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	key, ok := keyObj.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", keyPath)
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM}, nil
}

// EnsureServingCert makes sure dir holds a serving certificate signed by ca
// that covers every host (DNS name or IP) in hosts; it issues a new one when
// there is none, when it does not cover them all, or when it expires within
// 30 days. It returns the certificate and key paths.
func EnsureServingCert(dir string, ca *CA, hosts []string) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile)
	var ips []net.IP
	var dnsNames []string
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		} else if h != "" && !slices.Contains(dnsNames, h) {
			dnsNames = append(dnsNames, h)
		}
	}
	if existing, err := os.ReadFile(certPath); err == nil {
		if cert, err := parseCert(existing); err == nil && covers(cert, ca, dnsNames, ips) {
			return certPath, keyPath, nil
		}
	}
	certPEM, keyPEM, err := ca.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubestellar-server"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, 365*24*time.Hour)
	if err != nil {
		return "", "", err
	}
	return certPath, keyPath, writeKeyPair(certPath, keyPath, certPEM, keyPEM)
}

func covers(cert *x509.Certificate, ca *CA, dnsNames []string, ips []net.IP) bool {
	if cert.CheckSignatureFrom(ca.Cert) != nil || time.Until(cert.NotAfter) < 30*24*time.Hour {
		return false
	}
	for _, name := range dnsNames {
		if !slices.Contains(cert.DNSNames, name) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// writeKeyPair writes the key (0600) before the certificate, each through a
// temporary file, so a crash never leaves a certificate without its key.
func writeKeyPair(certPath, keyPath string, certPEM, keyPEM []byte) error {
	if err := WriteFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFileAtomic(certPath, certPEM, 0o644)
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory, fsynced and renamed, with the given mode from the start.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}
