// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncTarget is one edge cluster, in an inventory space.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=st,categories=kubestellar
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Connected",type=string,JSONPath=`.status.conditions[?(@.type=="SyncerConnected")].status`
// +kubebuilder:printcolumn:name="Mailbox",type=string,JSONPath=`.status.mailboxSpace`
// +kubebuilder:printcolumn:name="Syncer",type=string,JSONPath=`.status.syncerVersion`,priority=1
// +kubebuilder:printcolumn:name="Runs",type=string,JSONPath=`.status.syncerMode`,priority=1
// +kubebuilder:printcolumn:name="Held",type=date,JSONPath=`.status.hold.since`,priority=1
// +kubebuilder:printcolumn:name="Synced",type=integer,JSONPath=`.status.syncedObjects`,priority=1
// +kubebuilder:printcolumn:name="Drift",type=integer,JSONPath=`.status.drift.reverted`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SyncTarget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SyncTargetSpec `json:"spec,omitempty"`
	// +optional
	Status SyncTargetStatus `json:"status,omitempty"`
}

// SyncTargetSpec is what the user asks of an edge cluster.
type SyncTargetSpec struct {
	// Unschedulable keeps new placements off this cluster; what is placed
	// there already is withdrawn too.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
	// UpdateWindows are when the edge takes changes. Outside every window
	// its syncer writes nothing to its cluster (as during a hold: no create,
	// update or delete from the mailbox, no revert of drift) and brings
	// what waited in step when one opens. None: at any time. The syncer
	// keeps the last windows it read, so they hold while the center is
	// unreachable.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	UpdateWindows []UpdateWindow `json:"updateWindows,omitempty"`
}

// UpdateWindow is a recurring time when an edge takes changes.
type UpdateWindow struct {
	// Schedule is when the window opens, in cron's five fields (minute
	// hour day-of-month month day-of-week: "0 2 * * 1-5" is 02:00 on
	// weekdays) or a descriptor (@daily, @weekly...).
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`
	// Duration is how long it stays open (at most 168h).
	Duration metav1.Duration `json:"duration"`
	// TimeZone of the schedule, an IANA name such as Europe/Paris
	// (default UTC).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// UpdateWindowStatus is the syncer's view of its windows.
type UpdateWindowStatus struct {
	// Open is whether the edge takes changes now.
	Open bool `json:"open"`
	// NextChange is when that changes: when the window closes, or when the
	// next one opens.
	// +optional
	NextChange *metav1.Time `json:"nextChange,omitempty"`
	// Waiting counts the edge objects with a change that waits for a
	// window.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
}

// Condition types of a SyncTarget.
const (
	SyncTargetReady = "Ready"
	// SyncTargetSynced is True when the syncer keeps every object of the
	// mailbox in step, False with the reason of the first problem.
	SyncTargetSynced          = "Synced"
	SyncTargetSyncerConnected = "SyncerConnected"
	SyncTargetHeartbeat       = "Heartbeat"
)

// EdgeHold is a hold the edge put on changes: `kubestellar syncer hold`
// at the edge, remembered in the syncer's data directory across restarts
// and kept while the center is unreachable.
type EdgeHold struct {
	// Since is when the hold began.
	Since metav1.Time `json:"since"`
	// Until is when it ends by itself; absent, it lasts until released.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
	// Reason is what the edge's operator gave.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
	// Waiting counts the edge objects with a change held back: a create,
	// an update or a delete from the mailbox, or a revert of drift.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
}

// MaxHoldReasonLength bounds EdgeHold.Reason, in bytes.
const MaxHoldReasonLength = 256

// SyncTargetStatus is what the server and the syncer report.
type SyncTargetStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastSyncerHeartbeatTime is when the syncer last reported.
	// +optional
	LastSyncerHeartbeatTime *metav1.Time `json:"lastSyncerHeartbeatTime,omitempty"`
	// SyncerVersion is the version of the syncer serving this cluster.
	// +optional
	SyncerVersion string `json:"syncerVersion,omitempty"`
	// SyncerMode is where the syncer runs: in-cluster (a pod of the edge
	// cluster, from the kubestellar image) or host (a process beside the
	// cluster, `syncer join` or its systemd service).
	// +optional
	// +kubebuilder:validation:Enum=in-cluster;host
	SyncerMode string `json:"syncerMode,omitempty"`
	// SyncerImage is the image an in-cluster syncer's pod runs, as its
	// pod spec names it, with the digest the kubelet resolved when it
	// reports one (IMAGE@sha256:...).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	SyncerImage string `json:"syncerImage,omitempty"`
	// Hold is set while the edge holds back every change from its mailbox
	// (kubestellar syncer hold, at the edge): the syncer writes nothing to
	// its cluster until the hold ends. Reported by the syncer.
	// +optional
	Hold *EdgeHold `json:"hold,omitempty"`
	// UpdateWindow is, when the SyncTarget has update windows, whether the
	// edge takes changes now, as its syncer reports it.
	// +optional
	UpdateWindow *UpdateWindowStatus `json:"updateWindow,omitempty"`
	// TunnelServer is the server (its advertised URL) that holds the
	// syncer's tunnel while SyncerConnected is True. Another server of the
	// same cluster forwards edge requests there.
	// +optional
	TunnelServer string `json:"tunnelServer,omitempty"`
	// MailboxSpace is the space holding what goes to this cluster. The
	// server names it as it stores the SyncTarget (from its space and
	// UID), and makes the space moments later.
	// +optional
	MailboxSpace string `json:"mailboxSpace,omitempty"`
	// SyncedObjects counts the objects the syncer keeps in step.
	// +optional
	SyncedObjects int32 `json:"syncedObjects,omitempty"`
	// Conflicts counts edge objects the syncer would overwrite but does not own.
	// +optional
	Conflicts int32 `json:"conflicts,omitempty"`
	// Problems lists (the first few of) the objects the syncer cannot keep
	// in step, and why.
	// +optional
	// +listType=atomic
	Problems []SyncProblem `json:"problems,omitempty"`
	// Drift counts the changes made at the edge to what the syncer manages
	// there, which it put back.
	// +optional
	Drift *SyncDrift `json:"drift,omitempty"`
	// ReportsRollouts is set by a syncer that reports on its mailbox's
	// rollout records (its SyncerConfig's spec.rollouts) in Rollouts,
	// with its heartbeat. The server then reads its reports here, not in
	// the SyncerConfig's status (where syncers before these reports
	// wrote them, at the cost of a write of their own).
	// +optional
	ReportsRollouts bool `json:"reportsRollouts,omitempty"`
	// Rollouts are the syncer's reports, one per rollout record of its
	// mailbox (at most MaxRolloutReports).
	// +optional
	// +listType=atomic
	Rollouts []RolloutReport `json:"rollouts,omitempty"`
}

// MaxRolloutReports bounds a SyncTarget's status.rollouts: the
// Progressive placements one edge takes part in at once.
const MaxRolloutReports = 100

// SyncDrift counts the changes made at the edge cluster to objects the
// syncer keeps there, which it reverted. What the syncer manages is what it
// applies (the fields its server-side apply owns, as field manager
// kubestellar-syncer), and the objects themselves: a change there, or the
// deletion of the object, is reverted as soon as the syncer's watch sees
// it. Fields the syncer does not set (an annotation added at the edge,
// status) are left as they are. The syncer's own applies (the first one,
// and those that carry a change made at the center) are not drift; nor are
// create-only objects, which the syncer only makes again if they go.
type SyncDrift struct {
	// Reverted is how many times the syncer has reverted a change made at
	// the edge, since the SyncTarget was made.
	Reverted int64 `json:"reverted"`
	// Last is the latest of them.
	// +optional
	Last *DriftRevert `json:"last,omitempty"`
}

// What a reverted change at the edge was.
const (
	// DriftChanged: fields the syncer manages were changed or removed.
	DriftChanged = "Changed"
	// DriftDeleted: the object was deleted; the syncer made it again.
	DriftDeleted = "Deleted"
)

// MaxDriftFields is how many fields a DriftRevert names at most.
const MaxDriftFields = 10

// DriftRevert is one change at the edge that the syncer reverted.
type DriftRevert struct {
	// Group, Resource, Namespace and Name identify the object.
	// +optional
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Reason is Changed or Deleted.
	Reason string `json:"reason"`
	// Fields are (the first few of) the fields that were changed, as
	// paths such as .spec.replicas or
	// .spec.template.spec.containers[name="web"].image; empty when the
	// object was deleted.
	// +optional
	// +listType=atomic
	Fields []string `json:"fields,omitempty"`
	// Time is when the syncer reverted it.
	Time metav1.Time `json:"time"`
}

// Where a syncer runs (SyncTargetStatus.SyncerMode).
const (
	SyncerModeInCluster = "in-cluster"
	SyncerModeHost      = "host"
)

// Reasons a syncer gives for an object it cannot keep in step.
const (
	// SyncReasonConflict: an edge object of the same name exists that the
	// syncer does not own; it is left as it is.
	SyncReasonConflict = "Conflict"
	// SyncReasonRejected: the edge cluster refused the object (invalid,
	// denied by admission...); retried with backoff.
	SyncReasonRejected = "Rejected"
	// SyncReasonResourceNotServed: the object's resource is not (yet)
	// served at the edge, for example its CRD is not established.
	SyncReasonResourceNotServed = "ResourceNotServed"
	// SyncReasonKeptInUse: a namespace or CRD the syncer made has left the
	// mailbox, but the syncer leaves it at the edge because deleting it
	// would delete objects the syncer did not make (the namespace's, or the
	// CRD's instances); the message names them. It goes once they are gone.
	SyncReasonKeptInUse = "KeptInUse"
	// SyncReasonMissingPermission: the syncer's credentials at the edge do
	// not allow what keeping the object needs (an in-cluster syncer with
	// least-privilege RBAC, and a kind placed after its manifest was
	// made); the message names the permission. Retried with backoff, so
	// granting it is enough.
	SyncReasonMissingPermission = "MissingPermission"
	// SyncReasonStatusTooLarge: the edge object's status is longer than
	// MaxCopyStatusLength; the copy keeps its last status, with the
	// EdgeSynced condition saying so.
	SyncReasonStatusTooLarge = "StatusTooLarge"
)

// MaxSyncProblems is how many problems a SyncTarget's status lists at most.
const MaxSyncProblems = 20

// SyncProblem is an object a syncer cannot keep in step.
type SyncProblem struct {
	// Group, Resource, Namespace and Name identify the object.
	// +optional
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Reason is one of Conflict, Rejected, ResourceNotServed, KeptInUse,
	// MissingPermission, StatusTooLarge.
	Reason string `json:"reason"`
	// +optional
	Message string `json:"message,omitempty"`
}

// SyncTargetList is a list of SyncTargets.
//
// +kubebuilder:object:root=true
type SyncTargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SyncTarget `json:"items"`
}

// Location selects SyncTargets of its inventory space; EdgePlacements
// select Locations by label, and customization reads a Location's labels and
// annotations.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=loc,categories=kubestellar
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.spec.resource.resource`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Location struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec LocationSpec `json:"spec"`
}

// LocationSpec says which inventory objects a Location stands for.
type LocationSpec struct {
	// Resource is the inventory kind the Location selects: SyncTargets.
	Resource GroupVersionResource `json:"resource"`
	// InstanceSelector selects objects of Resource in the Location's space.
	InstanceSelector *metav1.LabelSelector `json:"instanceSelector"`
}

// GroupVersionResource names a resource.
type GroupVersionResource struct {
	// +optional
	Group    string `json:"group,omitempty"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

// LocationList is a list of Locations.
//
// +kubebuilder:object:root=true
type LocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Location `json:"items"`
}
