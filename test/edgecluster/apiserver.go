// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// APIServerOptions configures StartAPIServer: one kube-apiserver on a
// datastore that the caller runs (an etcd cluster, or kine's etcd API).
type APIServerOptions struct {
	// Options are the cluster's name, directory, binaries, logging and
	// timeouts, as for StartCluster. Nodes is not used: there is no node,
	// no controller manager and no scheduler.
	Options
	// EtcdServers are kube-apiserver's --etcd-servers: etcd's client URLs,
	// or kine's listener (unix:///path/kine.sock, http://127.0.0.1:2379).
	EtcdServers []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are kube-apiserver's
	// --etcd-cafile, --etcd-certfile and --etcd-keyfile, when set.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// ExtraArgs are more kube-apiserver flags, after the harness's own (a
	// flag given twice takes the later value).
	ExtraArgs []string
}

// StartAPIServer starts kube-apiserver alone, on the loopback interface,
// against opts.EtcdServers, with the same flags, certificates and
// kubeconfig as a cluster's (StartCluster), and returns once its /readyz
// passes. The returned Cluster has that one process: Stop stops it and
// removes its directory (the datastore is the caller's to stop, after).
// ctx bounds the start only.
func StartAPIServer(ctx context.Context, opts APIServerOptions) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = "apiserver"
	}
	if len(opts.EtcdServers) == 0 {
		return nil, errors.New("edgecluster: StartAPIServer needs EtcdServers: the URLs of etcd or of kine's listener")
	}
	if err := opts.prepare(ctx); err != nil {
		return nil, err
	}
	storage := []string{"--etcd-servers=" + strings.Join(opts.EtcdServers, ",")}
	for _, f := range []struct{ flag, path string }{
		{"--etcd-cafile", opts.EtcdCAFile}, {"--etcd-certfile", opts.EtcdCertFile}, {"--etcd-keyfile", opts.EtcdKeyFile},
	} {
		if f.path != "" {
			storage = append(storage, f.flag+"="+f.path)
		}
	}
	extra := append(storage, opts.ExtraArgs...)
	return startRetrying(ctx, opts.Options, func(ctx context.Context, o Options) (_ *Cluster, err error) {
		started := time.Now()
		ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
		defer cancel()
		c, err := newCluster(o)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				c.failed(&err)
			}
		}()
		if err := c.setUp("kube-apiserver"); err != nil {
			return c, err
		}
		if _, err := c.startAPIServer(ctx, os.Environ(), extra...); err != nil {
			return c, err
		}
		c.logf("edgecluster %s: kube-apiserver ready at %s (%s); KUBECONFIG=%s", c.Name, c.Config.Host, since(started), c.KubeconfigPath)
		return c, nil
	})
}

// newCluster makes the cluster's directory: opts.Dir, or a new temporary
// one.
func newCluster(opts Options) (*Cluster, error) {
	c := &Cluster{Name: opts.Name, bins: opts.Binaries, logf: opts.Logf, keepDir: opts.KeepDir, stopTO: opts.StopTimeout}
	var err error
	if opts.Dir != "" {
		c.Dir, c.keepDir = opts.Dir, true
		err = os.MkdirAll(opts.Dir, 0o755)
	} else {
		c.Dir, err = os.MkdirTemp("", "edgecluster-"+opts.Name+"-")
	}
	if err != nil {
		return nil, fmt.Errorf("edgecluster %s: creating its directory: %w", opts.Name, err)
	}
	return c, nil
}

// failed stops what a failed start started, keeps the directory (the error
// names logs in it) and says so in *err.
func (c *Cluster) failed(err *error) {
	c.keepDir = true
	_ = c.Stop() // its error would repeat *err
	*err = fmt.Errorf("edgecluster %s: %w (cluster files kept in %s)", c.Name, *err, c.Dir)
}

// setUp picks a free port for each of ports, makes the certificates and
// writes the admin kubeconfig; Config is then the admin's.
func (c *Cluster) setUp(ports ...string) error {
	portList, err := freePorts(len(ports))
	if err != nil {
		return err
	}
	c.ports = map[string]int{}
	for i, name := range ports {
		c.ports[name] = portList[i]
	}
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", c.ports["kube-apiserver"])
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.Name, "admin", server, c.pki.caCertPEM, c.pki.AdminCertPEM, c.pki.AdminKeyPEM); err != nil {
		return err
	}
	c.Config = &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: c.pki.caCertPEM, CertData: c.pki.AdminCertPEM, KeyData: c.pki.AdminKeyPEM,
		},
		QPS:   50,
		Burst: 100,
	}
	return nil
}

// startAPIServer starts kube-apiserver with the harness's flags and then
// extra (its storage flags first), and waits for its /readyz.
func (c *Cluster) startAPIServer(ctx context.Context, env []string, extra ...string) (*process, error) {
	argv := append([]string{c.bins.ControlPlane, "kube-apiserver"}, c.apiServerArgs()...)
	apiserver, err := c.start("kube-apiserver", env, append(argv, extra...)...)
	if err != nil {
		return nil, err
	}
	secure, err := c.pki.httpClient()
	if err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "kube-apiserver to be ready", apiserver, func(ctx context.Context) error {
		return getOK(ctx, secure, c.Config.Host+"/readyz")
	}); err != nil {
		return nil, err
	}
	return apiserver, nil
}

// apiServerArgs are kube-apiserver's flags but for its storage: those of a
// real deployment's (RBAC, service accounts, the kubelet client), on the
// loopback interface; the watch cache and everything else as defaulted.
func (c *Cluster) apiServerArgs() []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The endpoint reconciler refuses a loopback advertise address; the
		// "kubernetes" Service then has no endpoints, which no fake pod needs.
		"--endpoint-reconciler-type=none",
		fmt.Sprintf("--secure-port=%d", c.ports["kube-apiserver"]),
		"--tls-cert-file=" + c.pki.ServingCert,
		"--tls-private-key-file=" + c.pki.ServingKey,
		"--client-ca-file=" + c.pki.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.ServiceAccountPub,
		"--service-account-signing-key-file=" + c.pki.ServiceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		// The nodes' kubelet API is kwok's server, on the loopback address
		// kwok gives every node, with the cluster's serving certificate.
		"--kubelet-client-certificate=" + c.pki.KubeletClientCert,
		"--kubelet-client-key=" + c.pki.KubeletClientKey,
		"--kubelet-certificate-authority=" + c.pki.CACert,
		"--kubelet-preferred-address-types=InternalIP",
	}
}
