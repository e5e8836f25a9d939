// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package syncerconnected makes each SyncTarget's SyncerConnected
// condition, and its status.tunnelServer, follow its syncer's reverse
// tunnel.
//
// Every server runs a Controller for the tunnels it holds: the tunnel
// server tells it when a SyncTarget's first tunnel opens or its last one
// closes (Changed), and its workers write what the tunnel server says now,
// so that a change that came and went before its write is never written
// out of order. It also hears the server's cache of SyncTargets
// (SyncTargetHandler) and writes again a record that disagrees with the
// tunnels held here, whoever wrote it. A server that stops says its tunnels are closing while its
// API still serves (Closing); one that was killed cannot, so:
//
//   - a server that starts again looks, once its syncers have had time to
//     come back, for SyncTargets still said connected to it without a
//     tunnel (the start-up sweep);
//   - when several servers share a datastore, each keeps a Lease of its own
//     (KeepServerLease, Kubernetes' own lease controller, as kube-apiserver
//     keeps its identity Lease), and the leader says the tunnels of a
//     server whose Lease ran out are closed (SweepDeadServers).
package syncerconnected
