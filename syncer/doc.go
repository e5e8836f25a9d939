// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package syncer is the edge agent that `kubestellar syncer join` runs: it
// keeps one edge cluster in step with its SyncTarget's mailbox space at the
// center, and reports back.
//
// Every connection is opened from the edge toward the center. The syncer
//   - downsyncs: it watches the mailbox (its SyncerConfig, the copies it
//     names and the CRDs it lists) and makes the edge match, Namespaces and
//     CRDs first, by server-side apply under its own field manager. Every
//     object it makes carries its owner label; it updates and deletes only
//     those, and reports an edge object of the same name that it does not
//     own as a conflict instead of overwriting it;
//   - returns status: the status of each downsynced object, and the state of
//     the descendants (ReplicaSets, Pods) of workloads, are written to the
//     mailbox copy;
//   - reports rollouts: for each revision of a Progressive placement the
//     SyncerConfig lists, whether the edge holds its copies and whether
//     they are healthy, in the SyncerConfig's status (rollouts.go);
//   - upsyncs: edge objects that the SyncerConfig's upsync clauses select are
//     copied into the mailbox and kept in step;
//   - reverts drift: a change made at the edge to what it applied (a field
//     its server-side apply owns, or the object itself) is put back as soon
//     as its watch of the edge sees it, and counted in the SyncTarget's
//     status.drift; fields others set there (an annotation, the status) are
//     left alone (drift.go);
//   - heartbeats: its SyncTarget's status says it is connected, with its
//     version and counts of synced objects, problems and reverted drift.
//
// The syncer keeps its last desired state in its data directory. When the
// center is unreachable the edge keeps what it runs: nothing is deleted
// until the mailbox has been read again, and a syncer restarted meanwhile
// works from the saved state. Objects are applied only when their content
// changed, or once after a restart to check them (a no-op for the edge
// cluster unless they drifted meanwhile), so catching up after an outage
// restarts nothing.
package syncer
