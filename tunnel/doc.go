// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package tunnel is the reverse tunnel between syncers and the server.
//
// A syncer opens one long-lived tunnel to the server (on its one HTTPS
// port, through any HTTP proxy or load balancer in between, authenticated
// by its token) and keeps it open, reconnecting with backoff and jitter:
// a stream of its HTTP/2 API connection where it can (stream.go), else a
// WebSocket of its own.
// The tunnel is multiplexed (github.com/rancher/remotedialer, as k3s uses):
// the server opens connections through it to the syncer, which serves them
// from its edge cluster's API with its own edge credentials. So the center
// reaches edges it could never connect to, and an admin can use kubectl on
// an edge cluster through the center: Server.EdgeProxy serves
// /kubestellar/v1/edges/INVENTORY/SYNCTARGET/proxy/... from that edge.
//
// The server side is plain http.Handlers behind the API server's
// authentication and authorization: only a syncer's token opens a tunnel,
// and only for its own SyncTarget; only admins use the edge proxy.
//
// A tunnel is bound to the token that opened it and to its SyncTarget's
// UID: the edge proxy uses only a tunnel of the SyncTarget as it is now
// (one deleted and made again under the same name is another), and the API
// server ends the tunnel, with every other request of the token, once the
// token is revoked or expires or its SyncTarget goes (auth.Revoker).
//
// What a syncer sends is bounded: one token holds MaxTunnelsPerToken
// tunnels at most (429 beyond), each WebSocket message is at most
// MaxMessageBytes, checked at the frame header before its payload is read,
// and remotedialer messages that no syncer sends (opening connections,
// announcing peers) close the tunnel (see frameMeter). A tunnel silent for
// DeadAfter is dropped.
package tunnel

import (
	"time"

	"github.com/kubestellar/kubestellar/internal/jointoken"
)

const (
	// Path is where syncers open their tunnel.
	Path = jointoken.TunnelPath
	// EdgesPrefix is where users reach edge clusters through their
	// tunnels: EdgesPrefix + INVENTORY/SYNCTARGET/proxy/<edge API path>,
	// authorized as synctargets/proxy in INVENTORY.
	EdgesPrefix = jointoken.EdgesPrefix
	// EdgeAPIAddress is the one address the server dials through a tunnel:
	// the syncer serves it from its edge cluster's API.
	EdgeAPIAddress = "kubestellar-edge-api:80"
	// DeadAfter is how long a tunnel may be silent before either side
	// drops it: remotedialer pings every 5 s, but only gives up after a
	// minute on its own.
	DeadAfter = 15 * time.Second
)
