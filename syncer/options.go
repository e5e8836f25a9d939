// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/jointoken"
)

// Options configure a syncer.
type Options struct {
	// Server is the center's URL, https://HOST:PORT, or several servers of
	// one cluster, comma-separated: the syncer uses one and moves to the
	// next when it cannot reach it.
	Server string
	// Token is the join token `kubestellar synctarget create` printed.
	Token string
	// TokenFile holds Token instead, keeping it out of the process list.
	TokenFile string
	// SyncTarget is the name of the SyncTarget this syncer serves.
	SyncTarget string
	// Kubeconfig is the edge cluster's kubeconfig ("" for the usual
	// resolution: $KUBECONFIG, ~/.kube/config, in-cluster).
	Kubeconfig string
	// Context is the kubeconfig context to use ("" for the current one).
	Context string
	// EdgeConfig, when set, is the edge cluster's client configuration,
	// used instead of Kubeconfig and Context: for a caller that holds the
	// cluster itself (the bench's simulated edges, each a cluster in
	// memory). No flag sets it.
	EdgeConfig *rest.Config
	// CertificateAuthority is a PEM file with the center's CA, needed only
	// for a token without the CA hash.
	CertificateAuthority string
	// Proxy is the HTTP proxy for every connection to the server (""
	// for $HTTPS_PROXY and $NO_PROXY).
	Proxy string
	// DataDir keeps the syncer's saved state.
	DataDir string
	// HeartbeatInterval is how often the syncer looks whether the
	// SyncTarget's status has changed, and writes it if so; while its
	// tunnel is closed, how often it writes it anyway.
	HeartbeatInterval time.Duration
	// StatusRefresh is how often the status is written while the tunnel
	// is open and nothing changed: at most
	// edgev2alpha1.SyncerStatusRefresh, by which the server judges it.
	StatusRefresh time.Duration
	// Workers is the number of objects kept in step in parallel. Each
	// apply waits on the edge's datastore (etcd commits before it
	// answers): with more in flight the edge cluster stays busy.
	Workers int
	// EdgeQPS and EdgeBurst bound the syncer's requests to its edge
	// cluster's API (a token bucket in the client; a negative EdgeQPS
	// leaves the edge's own API Priority and Fairness as the only bound).
	// A placement of a thousand objects is applied in a burst.
	EdgeQPS   float32
	EdgeBurst int
	// HealthAddress, when set, serves /livez and /readyz there (health.go),
	// for the kubelet's probes when the syncer runs in a pod.
	HealthAddress string
	// ServiceAccountDir holds the pod's service account token, the edge
	// API's CA and the pod's namespace: the in-cluster configuration used
	// when no kubeconfig is given or found and $KUBERNETES_SERVICE_HOST is
	// set, as client-go's in-cluster configuration, but at a path a pod
	// (or a test) may choose.
	ServiceAccountDir string
	// OnReady, if set, is called once the syncer keeps the edge: when it has
	// connected to the center, or loaded its saved state before that.
	OnReady func(status string)
}

// TokenEnv is the environment variable that holds the join token when
// neither --token nor --token-file is given, as k3s's agent reads
// K3S_TOKEN: it keeps the token out of the process list, which every user
// of the machine reads (the service's EnvironmentFile= sets it).
const TokenEnv = "KUBESTELLAR_TOKEN"

// DefaultServiceAccountDir is where the kubelet mounts a pod's service
// account token.
const DefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// DefaultDataDir is where the syncer of syncTarget keeps its state.
func DefaultDataDir(syncTarget string) string {
	if os.Geteuid() == 0 {
		return filepath.Join("/var/lib/kubestellar-syncer", syncTarget)
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".kubestellar-syncer", syncTarget)
	}
	return filepath.Join(".kubestellar-syncer", syncTarget)
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{HeartbeatInterval: 10 * time.Second, StatusRefresh: edgev2alpha1.SyncerStatusRefresh, Workers: 16, EdgeQPS: 500, EdgeBurst: 1000, ServiceAccountDir: DefaultServiceAccountDir}
}

// AddFlags binds the options to flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Server, "server", o.Server, "URL of the kubestellar server (https://HOST:PORT); several servers of one cluster comma-separated, to fail over between them")
	fs.StringVar(&o.Token, "token", o.Token, "join token printed by 'kubestellar synctarget create' or 'kubestellar token create' (visible in the process list: prefer --token-file or $"+TokenEnv+")")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "file holding the join token, instead of --token (default: $"+TokenEnv+" when set)")
	fs.StringVar(&o.SyncTarget, "sync-target", o.SyncTarget, "name of the SyncTarget this edge cluster is")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the edge cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&o.Context, "context", o.Context, "kubeconfig context of the edge cluster (default: the current one)")
	fs.StringVar(&o.CertificateAuthority, "certificate-authority", o.CertificateAuthority, "PEM file with the server's CA; only for a token without the CA hash (K10...)")
	fs.StringVar(&o.Proxy, "proxy", o.Proxy, "HTTP proxy (http://HOST:PORT) for every connection to the server, tunnel included (default: $HTTPS_PROXY, except hosts in $NO_PROXY)")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory for the syncer's saved state (default /var/lib/kubestellar-syncer/SYNC-TARGET as root, else ~/.kubestellar-syncer/SYNC-TARGET)")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "how often a change of the SyncTarget's status is written at most; while the tunnel is closed, how often the status is written anyway")
	fs.DurationVar(&o.StatusRefresh, "status-refresh", o.StatusRefresh, "how often the SyncTarget's status is written while the tunnel is open and nothing changed (at most "+edgev2alpha1.SyncerStatusRefresh.String()+")")
	fs.IntVar(&o.Workers, "workers", o.Workers, "objects kept in step in parallel")
	fs.Float32Var(&o.EdgeQPS, "edge-qps", o.EdgeQPS, "requests per second the syncer sends to its edge cluster's API at most, over a burst of --edge-burst (-1: no limit but the edge's API Priority and Fairness)")
	fs.IntVar(&o.EdgeBurst, "edge-burst", o.EdgeBurst, "requests the syncer may send to its edge cluster's API at once, above --edge-qps")
	fs.StringVar(&o.HealthAddress, "health-address", o.HealthAddress, "HOST:PORT to serve /livez and /readyz on, for a kubelet's probes (default: none)")
	fs.StringVar(&o.ServiceAccountDir, "service-account-dir", o.ServiceAccountDir, "directory with the pod's service account token, ca.crt and namespace: the edge cluster's credentials in a pod, when no kubeconfig is given or found")
}

// Complete fills in defaults that depend on other options.
func (o *Options) Complete() {
	o.Server = strings.Join(o.Servers(), ",")
	if o.DataDir == "" && o.SyncTarget != "" {
		o.DataDir = DefaultDataDir(o.SyncTarget)
	}
}

// LoadToken settles the join token: --token, else the contents of
// --token-file, else $KUBESTELLAR_TOKEN from getenv (an empty variable
// counts as unset). It returns where the token came from ("" for nowhere,
// which Validate reports).
func (o *Options) LoadToken(getenv func(string) string) (from string, err error) {
	switch {
	case o.Token != "" && o.TokenFile != "":
		return "", fmt.Errorf("--token and --token-file exclude each other: give one")
	case o.Token != "":
		return "--token", nil
	case o.TokenFile != "":
		data, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		if o.Token = strings.TrimSpace(string(data)); o.Token == "" {
			return "", fmt.Errorf("--token-file %s is empty: it must hold the join token printed by `kubestellar synctarget create`", o.TokenFile)
		}
		return "--token-file", nil
	}
	if o.Token = getenv(TokenEnv); o.Token != "" {
		return "$" + TokenEnv, nil
	}
	return "", nil
}

// Validate says what is wrong with the options, naming the flag.
func (o *Options) Validate() error {
	if o.Server == "" {
		return fmt.Errorf("--server is required: the URL of the kubestellar server, e.g. https://center:6443")
	}
	for _, server := range o.Servers() {
		u, err := url.Parse(server)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--server %q must be an https URL such as https://center:6443", server)
		}
		if u.Path != "" {
			return fmt.Errorf("--server %q must not have a path: give the server's base URL, not a space's", server)
		}
	}
	if o.Token == "" {
		return fmt.Errorf("--token is required (or --token-file, or $%s): the join token printed by `kubestellar synctarget create`", TokenEnv)
	}
	tok, err := jointoken.Parse(o.Token)
	if err != nil {
		return fmt.Errorf("--token: %w", err)
	}
	if tok.CAHash == "" && o.CertificateAuthority == "" {
		return fmt.Errorf("--token has no CA hash (K10<hash>::...), so --certificate-authority must name the server's CA file")
	}
	if o.Proxy != "" {
		if p, err := url.Parse(o.Proxy); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("--proxy %q must be an http:// or https:// URL of an HTTP proxy, e.g. http://proxy:3128", o.Proxy)
		}
	}
	if o.SyncTarget == "" {
		return fmt.Errorf("--sync-target is required: the name of the SyncTarget this edge cluster is")
	}
	if errs := validation.IsDNS1123Subdomain(o.SyncTarget); len(errs) > 0 {
		return fmt.Errorf("--sync-target %q is not a valid name: %s", o.SyncTarget, strings.Join(errs, "; "))
	}
	if o.HeartbeatInterval < time.Second {
		return fmt.Errorf("--heartbeat-interval must be at least 1s, not %s", o.HeartbeatInterval)
	}
	if o.StatusRefresh < o.HeartbeatInterval || o.StatusRefresh > edgev2alpha1.SyncerStatusRefresh {
		return fmt.Errorf("--status-refresh must be from --heartbeat-interval (%s) to %s, not %s: the server counts a syncer silent for longer as late", o.HeartbeatInterval, edgev2alpha1.SyncerStatusRefresh, o.StatusRefresh)
	}
	if o.Workers < 1 {
		return fmt.Errorf("--workers must be at least 1, not %d", o.Workers)
	}
	if o.EdgeQPS == 0 {
		return fmt.Errorf("--edge-qps must be positive, or -1 for no limit in the syncer")
	}
	if o.EdgeQPS > 0 && o.EdgeBurst < 1 {
		return fmt.Errorf("--edge-burst must be at least 1, not %d", o.EdgeBurst)
	}
	if o.HealthAddress != "" {
		if _, port, err := net.SplitHostPort(o.HealthAddress); err != nil || port == "" {
			return fmt.Errorf("--health-address %q must be HOST:PORT or :PORT, e.g. :8081", o.HealthAddress)
		}
	}
	return nil
}

// ProxyFunc picks the proxy for connections to the server.
func (o *Options) ProxyFunc() func(*http.Request) (*url.URL, error) {
	if o.Proxy == "" {
		return http.ProxyFromEnvironment
	}
	u, err := url.Parse(o.Proxy)
	if err != nil {
		return http.ProxyFromEnvironment
	}
	return http.ProxyURL(u)
}

// Servers returns the server URLs, without trailing slashes.
func (o *Options) Servers() []string {
	var out []string
	for _, s := range strings.Split(o.Server, ",") {
		if s = strings.TrimRight(strings.TrimSpace(s), "/"); s != "" {
			out = append(out, s)
		}
	}
	return out
}
