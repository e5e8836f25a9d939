// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package kubeconfig

import (
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ForEdge returns a kubeconfig whose server is the path on the center that
// reaches SyncTarget inventorySpace/syncTarget's edge cluster through its
// syncer's tunnel (edgesPrefix is tunnel.EdgesPrefix). The context is named
// "edge-SYNCTARGET".
func ForEdge(baseURL, edgesPrefix, inventorySpace, syncTarget string, caPEM []byte, token string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	name := "edge-" + syncTarget
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   strings.TrimSuffix(baseURL, "/") + edgesPrefix + inventorySpace + "/" + syncTarget + "/proxy",
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: AdminUser}
	cfg.CurrentContext = name
	return cfg
}
