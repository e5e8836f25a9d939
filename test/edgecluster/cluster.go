// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package edgecluster runs throwaway Kubernetes clusters on the loopback
// interface, for tests of code that must talk to real clusters.
//
// A cluster is real kube-apiserver, kube-controller-manager and
// kube-scheduler processes backed by a real etcd, with kwok faking the nodes
// and the pods' lifecycle: pods are scheduled, become Running and Ready, and
// Deployments report available replicas, but no container runs. The
// binaries are built from Go modules (see the tools module beside this
// package) once per machine, by EnsureBinaries; this package only starts
// them as child processes, so it does not depend on k8s.io/kubernetes.
//
// Tests use Start; commands use StartCluster and Stop.
package edgecluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KwokNodeAnnotation marks the nodes that kwok manages; kwok is told to
// manage only nodes that have it, with the value "fake".
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Options configures a cluster. The zero value gives a cluster named
// "edgecluster" with one node.
type Options struct {
	// Name names the cluster, its kubeconfig context and its directory.
	// Default "edgecluster".
	Name string
	// Nodes is the number of fake nodes, all Ready before Start returns.
	// Default 1.
	Nodes int
	// Dir, if set, holds the cluster's files (certificates, kubeconfigs,
	// etcd data, logs) and is kept after Stop. By default a new temporary
	// directory is used and removed by Stop, unless the start failed or
	// KeepDir is set.
	Dir string
	// KeepDir keeps the cluster's directory after Stop.
	KeepDir bool
	// Binaries to run. Default: EnsureBinaries.
	Binaries *Binaries
	// Logf receives progress lines. Nil discards them (Start uses t.Logf).
	Logf Logf
	// StartTimeout bounds the start, from the first process to the cluster
	// being ready (building the binaries is not counted). Default 2 minutes.
	StartTimeout time.Duration
	// StopTimeout bounds how long each process may take to exit after
	// SIGTERM before it is killed. Default 15 seconds.
	StopTimeout time.Duration
}

func (o *Options) defaults() error {
	if o.Logf == nil {
		o.Logf = discard
	}
	if o.Name == "" {
		o.Name = "edgecluster"
	}
	if !validName.MatchString(o.Name) {
		return fmt.Errorf("edgecluster: invalid cluster name %q: want lower-case letters, digits and '-'", o.Name)
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 0 {
		return fmt.Errorf("edgecluster: invalid number of nodes %d", o.Nodes)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 15 * time.Second
	}
	return nil
}

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$`)

// Cluster is a running cluster.
type Cluster struct {
	// Name is the cluster's name, also its kubeconfig context's.
	Name string
	// Dir holds the cluster's files and the processes' logs.
	Dir string
	// KubeconfigPath is a kubeconfig file with admin (system:masters)
	// credentials.
	KubeconfigPath string
	// Config has the same admin credentials. Copy it (rest.CopyConfig)
	// before changing it.
	Config *rest.Config
	// NodeNames are the fake nodes.
	NodeNames []string
	// PodLogPath is the log that every container of every pod shows
	// (`kubectl logs`), in the CRI log format; AppendPodLog adds to it.
	// `kubectl exec` runs its command on this machine, in Dir, with
	// EDGECLUSTER set to the cluster's name. kwok serves both.
	PodLogPath string

	bins    *Binaries
	logf    Logf
	keepDir bool
	stopTO  time.Duration
	procs   []*process     // in start order
	ports   map[string]int // by what listens on it
	pki     *pki

	stopOnce sync.Once
	stopErr  error
}

// Start starts a cluster for a test and stops it when the test ends. It
// fails the test if the cluster cannot start. If the test failed, the
// cluster's directory, with the processes' logs, is kept and its path
// logged.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := StartCluster(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting test cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.keepDir = true
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping test cluster %s: %v", c.Name, err)
		}
	})
	return c
}

// StartCluster starts a cluster and returns once it is ready: the API
// server answers, the controllers and scheduler are healthy, the nodes are
// Ready and the default ServiceAccount exists. The caller must Stop it.
// ctx bounds the start only; the cluster runs until Stop.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.prepare(ctx); err != nil {
		return nil, err
	}
	return startRetrying(ctx, opts, startOnce)
}

// prepare completes opts for a start: the defaults, the binaries (built if
// need be) and a check that a given directory is new or empty.
func (o *Options) prepare(ctx context.Context) error {
	if err := o.defaults(); err != nil {
		return err
	}
	if o.Binaries == nil {
		bins, err := EnsureBinaries(ctx, o.Logf)
		if err != nil {
			return err
		}
		o.Binaries = bins
	}
	if o.Dir != "" {
		entries, err := os.ReadDir(o.Dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("edgecluster %s: %w", o.Name, err)
		}
		if len(entries) > 0 {
			return fmt.Errorf("edgecluster %s: directory %s is not empty; give a new or empty one", o.Name, o.Dir)
		}
	}
	return nil
}

// startRetrying calls once until it starts the cluster, up to three times
// when a port it picked was taken meanwhile.
func startRetrying(ctx context.Context, opts Options, once func(context.Context, Options) (*Cluster, error)) (*Cluster, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		c, err := once(ctx, opts)
		if err == nil {
			return c, nil
		}
		var exit *exitError
		if errors.As(err, &exit) && exit.portInUse() && attempt < attempts && ctx.Err() == nil && c != nil {
			// Free ports are picked by binding and closing them; another
			// process on the machine can take one in between.
			opts.Logf("edgecluster %s: a port was taken meanwhile, retrying with new ports", opts.Name)
			if err := os.RemoveAll(c.Dir); err != nil {
				return nil, err
			}
			continue
		}
		return nil, err
	}
}

// startOnce makes one attempt to start the cluster. On failure it stops what
// it started and returns the cluster too, for its directory.
func startOnce(ctx context.Context, opts Options) (_ *Cluster, err error) {
	started := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.failed(&err)
		}
	}()

	if err := c.setUp("etcd-client", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"); err != nil {
		return c, err
	}
	server := c.Config.Host
	cmKubeconfig := filepath.Join(c.Dir, "kube-controller-manager.kubeconfig")
	schedKubeconfig := filepath.Join(c.Dir, "kube-scheduler.kubeconfig")
	for _, kc := range []struct {
		path, user    string
		cert, keyData []byte
	}{
		{cmKubeconfig, "kube-controller-manager", c.pki.ControllerManagerCertPEM, c.pki.ControllerManagerKeyPEM},
		{schedKubeconfig, "kube-scheduler", c.pki.SchedulerCertPEM, c.pki.SchedulerKeyPEM},
	} {
		if err := writeKubeconfig(kc.path, c.Name, kc.user, server, c.pki.caCertPEM, kc.cert, kc.keyData); err != nil {
			return c, err
		}
	}
	bins := opts.Binaries
	env := os.Environ()
	step := time.Now()

	// etcd.
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", c.ports["etcd-client"])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", c.ports["etcd-peer"])
	etcd, err := c.start("etcd", env, bins.Etcd,
		"--name=edgecluster",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=edgecluster="+peerURL,
		"--unsafe-no-fsync", // throwaway data: trade durability for speed
	)
	if err != nil {
		return c, err
	}
	plain := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if err := c.waitFor(ctx, "etcd to be healthy", etcd, func(ctx context.Context) error {
		var health struct{ Health string }
		if err := getJSON(ctx, plain, etcdURL+"/health", &health); err != nil {
			return err
		}
		if health.Health != "true" {
			return fmt.Errorf("health is %q", health.Health)
		}
		return nil
	}); err != nil {
		return c, err
	}
	c.logf("edgecluster %s: etcd healthy (%s)", c.Name, since(step))
	step = time.Now()

	// kube-apiserver.
	if _, err := c.startAPIServer(ctx, env, "--etcd-servers="+etcdURL); err != nil {
		return c, err
	}
	c.logf("edgecluster %s: kube-apiserver ready at %s (%s)", c.Name, server, since(step))
	step = time.Now()
	secure, err := c.pki.httpClient()
	if err != nil {
		return c, err
	}

	// kube-controller-manager and kube-scheduler. They serve only /healthz
	// to this harness, which is allowed without authentication, so they are
	// not given the delegated authentication and authorization kubeconfigs.
	cm, err := c.start("kube-controller-manager", env, bins.ControlPlane, "kube-controller-manager",
		"--kubeconfig="+cmKubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.ports["kube-controller-manager"]),
		"--tls-cert-file="+c.pki.ServingCert,
		"--tls-private-key-file="+c.pki.ServingKey,
		"--leader-elect=false",
		// One identity for all controllers (in system:masters, see pki).
		// Per-controller service-account credentials would follow
		// production more closely but add about 5 s to every start.
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+c.pki.ServiceAccountKey,
		"--root-ca-file="+c.pki.CACert,
		"--cluster-signing-cert-file="+c.pki.CACert,
		"--cluster-signing-key-file="+c.pki.CAKey,
		"--cluster-name="+c.Name,
		// Its default is under /usr/libexec, which it would create.
		"--flex-volume-plugin-dir="+filepath.Join(c.Dir, "flexvolume"),
		"--profiling=false",
	)
	if err != nil {
		return c, err
	}
	sched, err := c.start("kube-scheduler", env, bins.ControlPlane, "kube-scheduler",
		"--kubeconfig="+schedKubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.ports["kube-scheduler"]),
		"--tls-cert-file="+c.pki.ServingCert,
		"--tls-private-key-file="+c.pki.ServingKey,
		"--leader-elect=false",
		"--profiling=false",
	)
	if err != nil {
		return c, err
	}
	for _, p := range []*process{cm, sched} {
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", c.ports[p.name])
		if err := c.waitFor(ctx, p.name+" to be healthy", p, func(ctx context.Context) error {
			return getOK(ctx, secure, url)
		}); err != nil {
			return c, err
		}
	}
	c.logf("edgecluster %s: kube-controller-manager and kube-scheduler healthy (%s)", c.Name, since(step))
	step = time.Now()

	// kwok, and the nodes it fakes.
	kwokDir := filepath.Join(c.Dir, "kwok")
	if err := os.MkdirAll(kwokDir, 0o755); err != nil {
		return c, err
	}
	debugging, err := c.writeKwokDebugging(kwokDir)
	if err != nil {
		return c, err
	}
	kwok, err := c.start("kwok", append(env, "KWOK_WORKDIR="+kwokDir), bins.Kwok,
		"--kubeconfig="+c.KubeconfigPath,
		"--config="+bins.KwokStages,
		"--config="+debugging,
		// The kubelet API of every node: logs and exec.
		fmt.Sprintf("--server-address=127.0.0.1:%d", c.ports["kwok"]),
		fmt.Sprintf("--node-port=%d", c.ports["kwok"]),
		"--tls-cert-file="+c.pki.ServingCert,
		"--tls-private-key-file="+c.pki.ServingKey,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--node-lease-duration-seconds=40",
		"--node-ip=127.0.0.1",
		"--cidr=10.244.0.0/16",
	)
	if err != nil {
		return c, err
	}
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return c, err
	}
	for i := range opts.Nodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		if _, err := client.CoreV1().Nodes().Create(ctx, fakeNode(name), metav1.CreateOptions{}); err != nil {
			return c, fmt.Errorf("creating node %s: %w", name, err)
		}
		c.NodeNames = append(c.NodeNames, name)
	}
	for _, name := range c.NodeNames {
		if err := c.waitFor(ctx, "node "+name+" to be Ready and untainted", kwok, func(ctx context.Context) error {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return nodeReady(node)
		}); err != nil {
			return c, err
		}
	}
	kwokHealth := fmt.Sprintf("https://127.0.0.1:%d/healthz", c.ports["kwok"])
	if err := c.waitFor(ctx, "kwok's kubelet API to be healthy", kwok, func(ctx context.Context) error {
		return getOK(ctx, secure, kwokHealth)
	}); err != nil {
		return c, err
	}
	c.logf("edgecluster %s: %d node(s) Ready (%s)", c.Name, len(c.NodeNames), since(step))

	// The ServiceAccount admission plugin rejects pods until the service
	// account controller has made the namespace's default ServiceAccount.
	if err := c.waitFor(ctx, "the default ServiceAccount in namespace default", cm, func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return c, err
	}
	c.logf("edgecluster %s: ready in %s; KUBECONFIG=%s", c.Name, since(started), c.KubeconfigPath)
	return c, nil
}

func (c *Cluster) start(name string, env []string, argv ...string) (*process, error) {
	p, err := startProcess(name, filepath.Join(c.Dir, name+".log"), env, argv...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// waitFor polls check until it succeeds. It fails early if any process of
// the cluster exits, and on timeout it shows the end of the log of the
// process most likely at fault.
func (c *Cluster) waitFor(ctx context.Context, what string, suspect *process, check func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for _, p := range c.procs {
			if p.exited() {
				return fmt.Errorf("waiting for %s: %w", what, p.exitError())
			}
		}
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(checkCtx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s (last error: %v); see %s, which ends with:\n%s",
				what, last, suspect.logPath, logTail(suspect.logPath, 20))
		case <-tick.C:
		}
	}
}

// Stop stops the cluster's processes (SIGTERM, then SIGKILL past the stop
// timeout), waits for them and removes the cluster's directory unless it is
// to be kept. It returns an error if a process had exited before Stop was
// called; the directory, with the logs, is then kept. Calling it again
// returns the first result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	started := time.Now()
	var errs []error
	for _, p := range c.procs {
		if p.exited() {
			errs = append(errs, p.exitError())
		}
	}
	// Clients first, then the API server, then its storage.
	phases := [][]string{{"kwok", "kube-scheduler", "kube-controller-manager"}, {"kube-apiserver"}, {"etcd"}}
	var mu sync.Mutex
	for _, phase := range phases {
		var wg sync.WaitGroup
		for _, p := range c.procs {
			if !slices.Contains(phase, p.name) {
				continue
			}
			wg.Go(func() {
				killed, err := p.stop(c.stopTO)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if killed {
					c.logf("edgecluster %s: %s did not exit within %s of SIGTERM and was killed; see %s", c.Name, p.name, c.stopTO, p.logPath)
				}
			})
		}
		wg.Wait()
	}
	if len(errs) > 0 {
		// The errors name log files in the directory.
		c.keepDir = true
		errs = append(errs, fmt.Errorf("cluster files kept in %s", c.Dir))
	}
	if c.keepDir {
		c.logf("edgecluster %s: stopped in %s; its files are kept in %s", c.Name, since(started), c.Dir)
	} else {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", c.Dir, err))
		}
		c.logf("edgecluster %s: stopped in %s", c.Name, since(started))
	}
	return errors.Join(errs...)
}

// Wait blocks until ctx is done, returning nil, or until a process of the
// cluster exits, returning an error that names its log.
func (c *Cluster) Wait(ctx context.Context) error {
	exited := make(chan *process, len(c.procs))
	for _, p := range c.procs {
		go func() {
			<-p.done
			exited <- p
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case p := <-exited:
		return p.exitError()
	}
}

// binVersions says what the cluster runs, when its binaries record it.
func (c *Cluster) binVersions() Versions { return c.bins.Versions }

// PIDs returns the process ids of the cluster's processes.
func (c *Cluster) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range c.procs {
		out[p.name] = p.pid()
	}
	return out
}

// Ports returns the loopback TCP ports the cluster's processes listen on.
func (c *Cluster) Ports() map[string]int {
	out := make(map[string]int, len(c.ports))
	for k, v := range c.ports {
		out[k] = v
	}
	return out
}

// LogFiles returns the paths of the processes' logs.
func (c *Cluster) LogFiles() map[string]string {
	out := map[string]string{}
	for _, p := range c.procs {
		out[p.name] = p.logPath
	}
	return out
}

// ResidentMemory returns the resident memory of each running process of the
// cluster, in bytes (Linux only).
func (c *Cluster) ResidentMemory() (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, p := range c.procs {
		if p.exited() {
			continue
		}
		rss, err := residentMemory(p.pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[p.name] = rss
	}
	return out, nil
}

// writeKwokDebugging writes kwok's configuration of the kubelet API's
// debugging handlers: every container logs PodLogPath, and exec runs the
// command here. It returns the file's path.
func (c *Cluster) writeKwokDebugging(dir string) (string, error) {
	c.PodLogPath = filepath.Join(dir, "pods.log")
	if err := c.AppendPodLog("edgecluster " + c.Name + ": container started"); err != nil {
		return "", err
	}
	config := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: edgecluster-logs
spec:
  logs:
  - logsFile: %[1]q
    follow: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: edgecluster-exec
spec:
  execs:
  - local:
      workDir: %[2]q
      envs:
      - name: EDGECLUSTER
        value: %[3]q
`, c.PodLogPath, dir, c.Name)
	path := filepath.Join(dir, "debugging.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return "", fmt.Errorf("writing kwok configuration: %w", err)
	}
	return path, nil
}

// AppendPodLog adds a line to the log that every container shows.
func (c *Cluster) AppendPodLog(line string) error {
	f, err := os.OpenFile(c.PodLogPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// The CRI log format: time, stream, full-line tag, the line.
	_, err = fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func fakeNode(name string) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources},
	}
}

// nodeReady reports why a node cannot take pods yet, if it cannot.
func nodeReady(node *corev1.Node) error {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return errors.New("node is not Ready")
	}
	for _, taint := range node.Spec.Taints {
		if strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
			return fmt.Errorf("node has taint %s", taint.ToString())
		}
	}
	return nil
}

func writeKubeconfig(path, cluster, user, server string, ca, cert, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = cluster
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// httpClient returns a client that trusts the cluster's CA and presents the
// admin certificate, for health checks.
func (p *pki) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.caCertPEM) {
		return nil, errors.New("parsing the cluster CA certificate")
	}
	cert, err := tls.X509KeyPair(p.AdminCertPEM, p.AdminKeyPEM)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		},
	}, nil
}

func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func getJSON(ctx context.Context, client *http.Client, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(into)
}

// freePorts picks n distinct free TCP ports on 127.0.0.1, by binding them
// all at once and closing them.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("picking a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	sort.Ints(ports)
	return ports, nil
}
