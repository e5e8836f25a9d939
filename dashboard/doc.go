// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dashboard serves the fleet dashboard at /dashboard/ on the
// server's one port: plain HTML, CSS and a small hand-written script,
// embedded in the binary (nothing is fetched at run time).
//
// Login: `kubestellar dashboard` POSTs, with its bearer token, to
// LoginCodesPath; the API server authenticates it, and Sessions records a
// one-time code (CodeTTL) bound to that identity. The printed link
// exchanges the code for a session cookie (HttpOnly, Secure,
// SameSite=Strict). Codes and sessions live in memory, bounded (MaxCodes,
// MaxSessions): a restart logs everyone out.
//
// Data: one Store watches SyncTargets, EdgePlacements,
// SinglePlacementSlices (across spaces, through the wildcard space) and
// Spaces, reduced to what the views show; and, for each resource a
// mailbox's SyncerConfig names, the placement translator's copies in every
// mailbox, reduced to the annotations that say which placements of which
// WDS they come from and what the syncer reports of them (a sync error,
// the state of their pods and ReplicaSets at the edge): see copies.go.
// From those it counts, per placement and destination, the copies synced,
// failed, missing or waiting for the edge. Each event stream computes its
// page of a view server-side, filtered by what the session's identity may
// list in each space (the server's own authorizer), and sends it again
// only when it changed. The workload view reads the object with the
// session's identity through impersonation, and shows, per edge, its copy
// and its pods as the syncer reports them.
package dashboard
