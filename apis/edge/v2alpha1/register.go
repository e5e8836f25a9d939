// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v2alpha1

import (
	"time"

	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// ServerGroup says whether group is one of kubestellar's own, whose CRDs
// the server installs in every space and alone writes, and which no
// placement places.
func ServerGroup(group string) bool { return group == GroupName || group == tenancyv1alpha1.GroupName }

// GroupName is the API group of the edge kinds.
const GroupName = "edge.kubestellar.io"

// SyncerHeartbeatTimeout is how long a syncer whose tunnel is closed may
// stay silent before its SyncTarget's Heartbeat condition turns False: a
// few of its default ten-second heartbeats. (SyncerConnected follows the
// syncer's tunnel.)
const SyncerHeartbeatTimeout = 45 * time.Second

// SyncerStatusRefresh is the longest a syncer whose tunnel is open leaves
// its SyncTarget's status unwritten. It writes the status when something
// in it changes, and at least this often; meanwhile its tunnel, which the
// server pings every few seconds, shows it alive, as a kubelet's Lease
// does while its Node's status is written every five minutes. A heartbeat
// that changes nothing costs the datastore no write.
const SyncerStatusRefresh = 5 * time.Minute

// HeartbeatDeadline is when a SyncTarget's syncer, silent since its last
// heartbeat, is late: SyncerStatusRefresh and SyncerHeartbeatTimeout after
// that heartbeat while the tunnel is open; SyncerHeartbeatTimeout after the
// heartbeat or the tunnel's close, whichever came later, otherwise. ok is
// false when the syncer has never reported.
func HeartbeatDeadline(status *SyncTargetStatus) (deadline time.Time, ok bool) {
	if status.LastSyncerHeartbeatTime == nil {
		return time.Time{}, false
	}
	last := status.LastSyncerHeartbeatTime.Time
	for _, c := range status.Conditions {
		if c.Type != SyncTargetSyncerConnected {
			continue
		}
		if c.Status == metav1.ConditionTrue {
			return last.Add(SyncerStatusRefresh + SyncerHeartbeatTimeout), true
		}
		if c.LastTransitionTime.Time.After(last) {
			last = c.LastTransitionTime.Time
		}
	}
	return last.Add(SyncerHeartbeatTimeout), true
}

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v2alpha1"}

// Resource returns the group-qualified resource of this version.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder collects the functions that add this package's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&SyncTarget{}, &SyncTargetList{},
		&Location{}, &LocationList{},
		&EdgePlacement{}, &EdgePlacementList{},
		&SinglePlacementSlice{}, &SinglePlacementSliceList{},
		&Customizer{}, &CustomizerList{},
		&SyncerConfig{}, &SyncerConfigList{},
		&StatusCollector{}, &StatusCollectorList{},
		&CombinedStatus{}, &CombinedStatusList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// Annotations and labels the edge machinery reads and writes.
const (
	// CustomizerAnnotation on a workload object names the Customizer that
	// customizes it ("NAME" in the object's namespace, or "NS/NAME").
	CustomizerAnnotation = "edge.kubestellar.io/customizer"
	// ExpandParametersAnnotation "true" on a workload object or a Customizer
	// expands %(key) in every leaf string from the destination's labels and
	// annotations.
	ExpandParametersAnnotation = "edge.kubestellar.io/expand-parameters"
	// ExecutingCountLabel on a workload object says how many edge clusters
	// run it, when its placement wants the singleton reported state.
	ExecutingCountLabel = "kubestellar.io/executing-count"
	// PlacedByAnnotation on an EdgePlacement records who last wrote its
	// spec (JSON: user, uid, groups, extra). The server sets it; the
	// placement translator copies only what that identity may read in the
	// WDS.
	PlacedByAnnotation = "edge.kubestellar.io/placed-by"
	// CreateOnlyAnnotation "true" on a mailbox copy tells the syncer to
	// create the object once and then leave it alone.
	CreateOnlyAnnotation = "edge.kubestellar.io/create-only"
	// SourceSpaceAnnotation on a mailbox copy names the WDS it comes from.
	SourceSpaceAnnotation = "edge.kubestellar.io/source-space"
	// UpsyncedFromAnnotation on an upsynced object in a WDS names the
	// SyncTarget it came from ("inventory-space/name").
	UpsyncedFromAnnotation = "edge.kubestellar.io/upsynced-from"
	// PlacementsAnnotation on a mailbox copy lists (comma-separated) the
	// EdgePlacements of its WDS that select it for this destination.
	PlacementsAnnotation = "edge.kubestellar.io/placements"
	// StatusCollectorsAnnotation on a mailbox copy maps, as JSON, each
	// placement to the StatusCollectors its selecting clauses name.
	StatusCollectorsAnnotation = "edge.kubestellar.io/status-collectors"
	// WantSingletonAnnotation "true" on a mailbox copy says a placement
	// selecting it wants the singleton reported state.
	WantSingletonAnnotation = "edge.kubestellar.io/want-singleton"
	// AssociatedStateAnnotation on a mailbox copy holds the state of the
	// object's descendants at the edge (ReplicaSets, Pods) as JSON, written
	// by the syncer (see AssociatedState).
	AssociatedStateAnnotation = "edge.kubestellar.io/associated-state"
	// SyncErrorAnnotation on a mailbox copy says why the syncer cannot
	// keep it in step at the edge ("Reason: message"); absent when it can.
	SyncErrorAnnotation = "edge.kubestellar.io/sync-error"
	// RevisionAnnotation on a mailbox copy of a Progressive placement is
	// the rollout revision it was made from.
	RevisionAnnotation = "edge.kubestellar.io/revision"
	// AppliedAnnotation on a mailbox copy that carries a revision is the
	// syncer's word on it, as JSON (see Applied): that the edge object has
	// the copy's content, and whether it is healthy.
	AppliedAnnotation = "edge.kubestellar.io/applied"
	// ContentHashAnnotation on a mailbox copy is the hash of its content as
	// the translator wrote it, which tells it whether the copy must be
	// written again, and tells a syncer's CopiesDigest which content it
	// reads.
	ContentHashAnnotation = "edge.kubestellar.io/content-hash"
	// SyncerOwnerLabel marks the objects a syncer made in its edge cluster;
	// its value identifies the SyncTarget (see syncer.OwnerValue). A syncer
	// updates and deletes only objects that carry its value.
	SyncerOwnerLabel = "edge.kubestellar.io/syncer"
	// PlacementCopyLabel "true" marks the objects of a mailbox that the
	// server's placement translator made. Only the server sets it.
	PlacementCopyLabel = "edge.kubestellar.io/placement-copy"
	// UpsyncedLabel "true" marks objects a syncer copied from its edge
	// cluster into its mailbox, and their copies in WDSes.
	UpsyncedLabel = "edge.kubestellar.io/upsynced"
	// Labels on a mailbox Space name the SyncTarget it serves; only the
	// server sets them.
	MailboxSyncTargetSpaceLabel = "edge.kubestellar.io/sync-target-space"
	MailboxSyncTargetNameLabel  = "edge.kubestellar.io/sync-target-name"
	MailboxSyncTargetUIDLabel   = "edge.kubestellar.io/sync-target-uid"
	// MailboxFinalizer holds a deleted SyncTarget until its mailbox space
	// is gone. The server gives it to every SyncTarget it creates.
	MailboxFinalizer = "edge.kubestellar.io/mailbox"
	// SyncedConditionType is the condition a syncer adds to the status of a
	// mailbox copy whose kind has conditions, when it cannot keep it in step.
	SyncedConditionType = "EdgeSynced"
)

// IsKubestellarKey reports whether a label or annotation key is in one of
// kubestellar's domains (kubestellar.io and its subdomains), whose keys
// the server writes and interprets.
func IsKubestellarKey(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	return prefix == "kubestellar.io" || strings.HasSuffix(prefix, ".kubestellar.io")
}

// MaxAppliedLength bounds AppliedAnnotation, in bytes.
const MaxAppliedLength = 1024

// Applied is the value of AppliedAnnotation: the syncer's report on an
// edge object made from a copy that carries a revision.
type Applied struct {
	// Revision is the copy's revision the edge object has.
	Revision string `json:"revision"`
	// Healthy is whether the edge object is healthy by its kind (a
	// Deployment, StatefulSet or DaemonSet updated and available at its
	// current generation, a Job complete, anything else applied).
	Healthy bool `json:"healthy"`
	// Message says what it waits for, when it is not.
	Message string `json:"message,omitempty"`
	// Generation is the edge object's metadata.generation, which its
	// status.observedGeneration is compared with.
	Generation int64 `json:"generation,omitempty"`
}
