// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package clientconfig finds the server a client command talks to: the
// kubeconfig of --kubeconfig, else of $KUBECONFIG, else the admin
// kubeconfig of the default data directory; its current context names a
// space of some server, whose root the space commands address.
package clientconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/kubeconfig"
	"github.com/kubestellar/kubestellar/spaces"
)

// Options are the flags every client command takes.
type Options struct {
	Kubeconfig string
	Context    string
}

// AddFlags binds the options to flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig (default: $KUBECONFIG, then the admin kubeconfig of "+server.DefaultDataDir()+").")
	fs.StringVar(&o.Context, "context", "", "Kubeconfig context to use (default: the current context).")
}

// Loaded is a kubeconfig and the server it addresses.
type Loaded struct {
	// Path is the kubeconfig file, where new contexts are written.
	Path   string
	Config *clientcmdapi.Config
	// BaseURL is the server's URL without any space path.
	BaseURL string
	CAData  []byte
	Token   string
	root    *rest.Config
}

// Path returns the kubeconfig file the options select.
func (o *Options) Path() string {
	if o.Kubeconfig != "" {
		return o.Kubeconfig
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return filepath.SplitList(env)[0]
	}
	return filepath.Join(server.DefaultDataDir(), kubeconfig.AdminFile)
}

// Load reads the kubeconfig and works out the server's root.
func (o *Options) Load() (*Loaded, error) {
	path := o.Path()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w (is the server running? pass --kubeconfig)", path, err)
	}
	contextName := o.Context
	if contextName == "" {
		contextName = cfg.CurrentContext
	}
	kctx, ok := cfg.Contexts[contextName]
	if !ok {
		return nil, fmt.Errorf("kubeconfig %s has no context %q (use --context)", path, contextName)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("kubeconfig %s: context %q names missing cluster %q", path, contextName, kctx.Cluster)
	}
	base := cluster.Server
	if i := strings.Index(base, spaces.PathPrefix); i >= 0 {
		base = base[:i]
	}
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 && cluster.CertificateAuthority != "" {
		if ca, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			return nil, err
		}
	}
	var token string
	if user, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
		token = user.Token
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: contextName, ClusterInfo: clientcmdapi.Cluster{Server: base}}
	root, err := clientcmd.NewNonInteractiveClientConfig(*cfg, contextName, overrides, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return &Loaded{Path: path, Config: cfg, BaseURL: strings.TrimSuffix(base, "/"), CAData: ca, Token: token, root: root}, nil
}

// RESTConfig returns a client configuration for a space of the server.
func (l *Loaded) RESTConfig(space string) *rest.Config {
	cfg := rest.CopyConfig(l.root)
	cfg.Host = l.BaseURL + spaces.URLPath(space)
	return cfg
}

// Dynamic returns a dynamic client for a space of the server.
func (l *Loaded) Dynamic(space string) (dynamic.Interface, error) {
	return dynamic.NewForConfig(l.RESTConfig(space))
}
