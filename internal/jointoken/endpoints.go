// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package jointoken

// The server endpoints a syncer uses to join, beside the Kubernetes API.
const (
	// CACertsPath serves the server's CA certificate PEM to anyone, without
	// a token; a syncer checks its hash against the token's CAHash before it
	// trusts the certificate (as k3s agents do).
	CACertsPath = "/cacerts"
	// SyncerInfoPath tells a syncer, authenticated by its token, who it is:
	// a SyncerInfo as JSON.
	SyncerInfoPath = "/kubestellar/v1/syncer"
	// TunnelPath is where a syncer, authenticated by its token, opens its
	// reverse tunnel (a WebSocket; see package tunnel).
	TunnelPath = "/kubestellar/v1/tunnel"
	// EdgesPrefix is where users reach edge clusters through their
	// syncers' tunnels: EdgesPrefix + INVENTORY/SYNCTARGET/proxy/PATH,
	// authorized as the subresource synctargets/proxy in INVENTORY.
	EdgesPrefix = "/kubestellar/v1/edges/"
)

// SyncerInfo is what SyncerInfoPath returns.
type SyncerInfo struct {
	// InventorySpace and SyncTarget name the SyncTarget the token is for.
	InventorySpace string `json:"inventorySpace"`
	SyncTarget     string `json:"syncTarget"`
	// MailboxSpace is the space holding what goes to the SyncTarget's
	// cluster; empty until the server has made it (poll until it is set).
	MailboxSpace string `json:"mailboxSpace"`
}
