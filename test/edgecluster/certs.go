// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/kubestellar/kubestellar/internal/certs"
)

// pki is the set of keys and certificates of one cluster, all made here:
// a CA, a serving certificate for the loopback addresses (used by
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok's kubelet
// API), client certificates for the admin, the controller manager, the
// scheduler and kube-apiserver towards the kubelet API, and the
// service-account signing key pair.
type pki struct {
	dir string

	caCertPEM []byte

	// Paths of the files written in dir.
	CACert, CAKey                               string
	ServingCert, ServingKey                     string
	ServiceAccountKey, ServiceAccountPub        string
	AdminCert, AdminKey                         string
	ControllerManagerCert, ControllerManagerKey string
	SchedulerCert, SchedulerKey                 string
	KubeletClientCert, KubeletClientKey         string

	// PEM of the admin client credentials, for kubeconfigs and rest.Config.
	AdminCertPEM, AdminKeyPEM []byte
	// PEM of the controllers' client credentials.
	ControllerManagerCertPEM, ControllerManagerKeyPEM []byte
	SchedulerCertPEM, SchedulerKeyPEM                 []byte
}

// certValidity is long enough for a cluster left running by hand.
const certValidity = 365 * 24 * time.Hour

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	ca, caCertPEM, caKeyPEM, err := newCA("edgecluster-ca")
	if err != nil {
		return nil, err
	}
	p.caCertPEM = caCertPEM
	if p.CACert, p.CAKey, err = p.write("ca", p.caCertPEM, caKeyPEM); err != nil {
		return nil, err
	}

	servingCert, servingKey, err := issue(ca, x509.Certificate{
		Subject:     pkix.Name{CommonName: "edgecluster-serving"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	})
	if err != nil {
		return nil, err
	}
	if p.ServingCert, p.ServingKey, err = p.write("serving", servingCert, servingKey); err != nil {
		return nil, err
	}

	client := func(cn string, orgs ...string) ([]byte, []byte, error) {
		return issue(ca, x509.Certificate{
			Subject:     pkix.Name{CommonName: cn, Organization: orgs},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
	}
	if p.AdminCertPEM, p.AdminKeyPEM, err = client("edgecluster-admin", "system:masters"); err != nil {
		return nil, err
	}
	if p.AdminCert, p.AdminKey, err = p.write("admin", p.AdminCertPEM, p.AdminKeyPEM); err != nil {
		return nil, err
	}
	// The controller manager runs all its controllers with its own identity
	// (no --use-service-account-credentials), which the bootstrap RBAC role
	// of system:kube-controller-manager does not cover; hence system:masters.
	if p.ControllerManagerCertPEM, p.ControllerManagerKeyPEM, err = client("system:kube-controller-manager", "system:masters"); err != nil {
		return nil, err
	}
	if p.ControllerManagerCert, p.ControllerManagerKey, err = p.write("kube-controller-manager", p.ControllerManagerCertPEM, p.ControllerManagerKeyPEM); err != nil {
		return nil, err
	}
	if p.SchedulerCertPEM, p.SchedulerKeyPEM, err = client("system:kube-scheduler"); err != nil {
		return nil, err
	}
	if p.SchedulerCert, p.SchedulerKey, err = p.write("kube-scheduler", p.SchedulerCertPEM, p.SchedulerKeyPEM); err != nil {
		return nil, err
	}
	// kube-apiserver's identity towards the nodes' kubelet API (kwok's
	// server), for logs, exec and port-forward.
	kubeletClientCert, kubeletClientKey, err := client("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return nil, err
	}
	if p.KubeletClientCert, p.KubeletClientKey, err = p.write("kubelet-client", kubeletClientCert, kubeletClientKey); err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	p.ServiceAccountKey = filepath.Join(dir, "sa.key")
	p.ServiceAccountPub = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(p.ServiceAccountKey, saKeyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.ServiceAccountPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// newCA makes a CA (internal/certs', as the server makes its own): the CA,
// and its certificate and key as PEM.
func newCA(commonName string) (ca *certs.CA, certPEM, keyPEM []byte, err error) {
	if ca, err = certs.NewCA(commonName, certValidity); err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err = ca.KeyPEM()
	return ca, ca.PEM, keyPEM, err
}

// issue signs a certificate made from tmpl with a new key.
func issue(ca *certs.CA, tmpl x509.Certificate) (certPEM, keyPEM []byte, err error) {
	return ca.Issue(tmpl, certValidity)
}

func (p *pki) write(name string, certPEM, keyPEMBytes []byte) (certPath, keyPath string, err error) {
	certPath = filepath.Join(p.dir, name+".crt")
	keyPath = filepath.Join(p.dir, name+".key")
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, keyPEMBytes, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
