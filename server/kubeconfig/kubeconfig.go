// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubeconfig writes the kubeconfig files kubestellar hands out: the
// admin kubeconfig of the data directory, with one context per space, and
// single-space kubeconfigs.
package kubeconfig

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/spaces"
)

const (
	// AdminFile is the admin kubeconfig's name in the data directory.
	AdminFile = "admin.kubeconfig"
	// AdminUser is the user entry the admin token is kept under.
	AdminUser = "kubestellar-admin"
)

// ForSpace returns a kubeconfig whose only context, named after the space,
// addresses one space of the server at baseURL.
func ForSpace(baseURL, space string, caPEM []byte, token string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	AddSpace(cfg, baseURL, space, caPEM, token)
	cfg.CurrentContext = space
	return cfg
}

// AddSpace adds (or updates) the cluster and context of a space, and the
// admin user holding token when token is set.
func AddSpace(cfg *clientcmdapi.Config, baseURL, space string, caPEM []byte, token string) {
	if token != "" {
		cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: token}
	}
	AddSpaceContext(cfg, baseURL, space, caPEM, AdminUser)
}

// AddSpaceContext adds (or updates) a cluster and a context, both named
// after the space, that reach the space as the kubeconfig user authInfo.
func AddSpaceContext(cfg *clientcmdapi.Config, baseURL, space string, caPEM []byte, authInfo string) {
	cfg.Clusters[space] = &clientcmdapi.Cluster{Server: strings.TrimSuffix(baseURL, "/") + spaces.URLPath(space), CertificateAuthorityData: caPEM}
	cfg.Contexts[space] = &clientcmdapi.Context{Cluster: space, AuthInfo: authInfo}
}

// RemoveSpaceContext removes what AddSpaceContext added.
func RemoveSpaceContext(cfg *clientcmdapi.Config, space string) {
	delete(cfg.Clusters, space)
	delete(cfg.Contexts, space)
	if cfg.CurrentContext == space {
		cfg.CurrentContext = spaces.Root
	}
}

// UpdateAdmin writes the admin kubeconfig at path: it keeps the contexts a
// user added (one per space), points every space cluster at baseURL, and
// makes root the current context when there is none.
func UpdateAdmin(path, baseURL string, caPEM []byte, token string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		cfg = clientcmdapi.NewConfig()
	} else if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	oldBase := ""
	if root, ok := cfg.Clusters[spaces.Root]; ok {
		oldBase = root.Server
	}
	for name, cluster := range cfg.Clusters {
		if oldBase != "" && strings.HasPrefix(cluster.Server, oldBase+spaces.PathPrefix) {
			AddSpace(cfg, baseURL, name, caPEM, "")
		}
	}
	AddSpace(cfg, baseURL, spaces.Root, caPEM, token)
	if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok {
		cfg.CurrentContext = spaces.Root
	}
	return Write(path, cfg)
}

// Write writes a kubeconfig atomically, readable only by its owner.
func Write(path string, cfg *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return certs.WriteFileAtomic(path, data, 0o600)
}
