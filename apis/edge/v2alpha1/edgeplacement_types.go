// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v2alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EdgePlacement says which workload objects of its workload description
// space (WDS) go to which Locations.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=epl,categories=kubestellar
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Locations",type=integer,JSONPath=`.status.matchingLocationCount`
// +kubebuilder:printcolumn:name="Problem",type=string,JSONPath=`.status.conditions[?(@.type=="Misconfigured")].message`,priority=1
// +kubebuilder:printcolumn:name="Dependencies",type=integer,JSONPath=`.status.dependencyCount`,priority=1
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.phase`,priority=1
// +kubebuilder:printcolumn:name="Edges-Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EdgePlacement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EdgePlacementSpec `json:"spec"`
	// +optional
	Status EdgePlacementStatus `json:"status,omitempty"`
}

// EdgePlacementSpec is where (locationSelectors) and what (downsync, upsync).
type EdgePlacementSpec struct {
	// LocationSelectors select Locations, in any inventory space, by label; a
	// Location matches if any selector matches it.
	LocationSelectors []metav1.LabelSelector `json:"locationSelectors"`
	// Downsync selects the workload objects to place; an object matches if
	// any clause matches it.
	// +optional
	Downsync []DownsyncClause `json:"downsync,omitempty"`
	// WantSingletonReportedState asks, for objects placed on exactly one
	// cluster, that the WDS object's status be the edge's exact status.
	// +optional
	WantSingletonReportedState bool `json:"wantSingletonReportedState,omitempty"`
	// Upsync selects objects created at the edge to copy back to the WDS.
	// +optional
	Upsync []UpsyncClause `json:"upsync,omitempty"`
	// Dependencies says whether what the selected workloads reference in
	// the WDS goes with them. None (the default) places only what the
	// downsync clauses select. Follow also places, with each selected
	// workload, what it cannot run without: the ConfigMaps, Secrets,
	// PersistentVolumeClaims, ServiceAccount and image pull Secrets its pod
	// template references, an Ingress's TLS Secrets and backend Services,
	// and a custom resource's CRD. They follow it in step, leave with it,
	// and are listed in status.dependencies; a reference to an object the
	// WDS does not hold (and does not mark optional) is a problem on the
	// Propagated condition. Only what the placement's writer may read is
	// placed.
	// +optional
	// +kubebuilder:validation:Enum=None;Follow
	Dependencies DependencyPolicy `json:"dependencies,omitempty"`
	// Rollout says how a change of what the placement selects reaches its
	// destinations: all at once (strategy All, the default), or in waves
	// that each wait for the edges before them to be healthy (Progressive).
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// RolloutStrategy is an EdgePlacement's spec.rollout.strategy.
type RolloutStrategy string

const (
	// RolloutAll gives every destination each change at once.
	RolloutAll RolloutStrategy = "All"
	// RolloutProgressive gives a change to the destinations wave by wave.
	RolloutProgressive RolloutStrategy = "Progressive"
)

// DisconnectedPolicy says what a rollout does with an edge whose syncer is
// not connected, or that holds or is outside its update windows.
type DisconnectedPolicy string

const (
	// DisconnectedWait keeps the wave waiting for the edge.
	DisconnectedWait DisconnectedPolicy = "Wait"
	// DisconnectedSkip lets the wave finish without the edge, which gets
	// the change when it is back (as its wave's turn has passed).
	DisconnectedSkip DisconnectedPolicy = "Skip"
)

// Rollout is how a change reaches the destinations of a placement. A
// change is a new revision: what the placement selects in its WDS (each
// object without its status, and the Customizers it names) and its
// downsync and dependencies. While a revision rolls out, a destination not
// yet reached keeps the copies of the previous revision in its mailbox,
// exactly; a newer change starts again from the first wave.
type Rollout struct {
	// Strategy is All (every destination at once: no revisions are kept)
	// or Progressive (in waves).
	// +optional
	// +kubebuilder:validation:Enum=All;Progressive
	Strategy RolloutStrategy `json:"strategy,omitempty"`
	// Waves are taken in order; each takes the destinations whose
	// SyncTarget its selector matches and no earlier wave took. The
	// destinations of no wave form a last wave.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Waves []RolloutWave `json:"waves,omitempty"`
	// MaxConcurrency bounds the destinations of a wave that update at once
	// (updated but not yet healthy for minSuccessTime): a number, or a
	// percentage of the wave's destinations (rounded up). Default: 100%.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`
	// MinSuccessTime is how long a destination stays healthy before it
	// counts as done (and its wave may end). Default: 0.
	// +optional
	MinSuccessTime *metav1.Duration `json:"minSuccessTime,omitempty"`
	// ProgressDeadline is how long an updated destination has to become
	// healthy before it has failed. Default: 10m.
	// +optional
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
	// MaxFailures is how many destinations may fail before the rollout
	// pauses by itself. Default: 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxFailures int32 `json:"maxFailures,omitempty"`
	// Paused stops the rollout from reaching more destinations; false
	// continues where it stopped.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Disconnected says what a wave does with an edge that cannot take the
	// change now (its syncer disconnected, holding, or outside its update
	// windows): Wait for it (the default) or Skip it.
	// +optional
	// +kubebuilder:validation:Enum=Wait;Skip
	Disconnected DisconnectedPolicy `json:"disconnected,omitempty"`
	// HealthCheck replaces the syncer's judgement of health (per kind) by
	// the placement's own.
	// +optional
	HealthCheck *RolloutHealthCheck `json:"healthCheck,omitempty"`
}

// RolloutHealthCheck is a placement's own test of a healthy copy.
type RolloutHealthCheck struct {
	// CEL is an expression over obj, the workload object as its edge
	// reports it (apiVersion, kind, metadata with the edge object's
	// generation, spec as the WDS holds it, status as the edge reports
	// it), true when it is healthy; false, or an error (a field not
	// reported yet), is not. It is costed and bounded as a
	// StatusCollector's expressions are. Namespaces are not tested.
	// +kubebuilder:validation:MaxLength=5120
	CEL Expression `json:"cel"`
}

// RolloutWave is one wave of a rollout.
type RolloutWave struct {
	// Name names the wave in status.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Selector selects SyncTargets by label.
	Selector metav1.LabelSelector `json:"selector"`
}

// Progressive reports whether the placement rolls changes out in waves.
func (s *EdgePlacementSpec) Progressive() bool {
	return s.Rollout != nil && s.Rollout.Strategy == RolloutProgressive
}

// Rollout phases (status.rollout.phase).
const (
	RolloutPhaseProgressing = "Progressing"
	RolloutPhasePaused      = "Paused"
	RolloutPhaseComplete    = "Complete"
)

// Destination states of a rollout (RolloutDestination.State).
const (
	// RolloutStateFailed: the edge refused a copy, or the destination was
	// not healthy by the progress deadline.
	RolloutStateFailed = "Failed"
	// RolloutStateWaitingWindow: outside the edge's update windows.
	RolloutStateWaitingWindow = "Waiting (window)"
	// RolloutStateHeld: the edge holds (kubestellar syncer hold).
	RolloutStateHeld = "Held by edge"
	// RolloutStateDisconnected: the edge's syncer is not connected.
	RolloutStateDisconnected = "Disconnected"
)

// RolloutStatus is where a Progressive rollout is.
type RolloutStatus struct {
	// Revision is the revision rolling out (or rolled out).
	Revision string `json:"revision"`
	// CompletedRevision is the last revision every destination took.
	// +optional
	CompletedRevision string `json:"completedRevision,omitempty"`
	// Phase is Progressing, Paused or Complete.
	Phase string `json:"phase"`
	// Message says why it is paused, or what it waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// CurrentWave names the first wave not done.
	// +optional
	CurrentWave string `json:"currentWave,omitempty"`
	// StartTime is when this revision began rolling out.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// Waves count, per wave, the destinations in each state.
	// +optional
	Waves []RolloutWaveStatus `json:"waves,omitempty"`
	// Destinations are those failed or waiting, at most
	// MaxListedRolloutDestinations of them.
	// +optional
	Destinations []RolloutDestination `json:"destinations,omitempty"`
}

// MaxListedRolloutDestinations bounds status.rollout.destinations.
const MaxListedRolloutDestinations = 20

// RolloutWaveStatus counts a wave's destinations.
type RolloutWaveStatus struct {
	Name string `json:"name"`
	// Destinations is how many the wave has.
	Destinations int32 `json:"destinations"`
	// Updated have the revision in their mailboxes.
	Updated int32 `json:"updated"`
	// Healthy report every copy of the revision applied and healthy.
	Healthy int32 `json:"healthy"`
	// Failed and Waiting are as RolloutDestination's states say.
	Failed  int32 `json:"failed"`
	Waiting int32 `json:"waiting"`
}

// RolloutDestination is a destination that failed or waits.
type RolloutDestination struct {
	// SyncTarget is INVENTORY-SPACE/NAME.
	SyncTarget string `json:"syncTarget"`
	Wave       string `json:"wave"`
	State      string `json:"state"`
	// +optional
	Message string `json:"message,omitempty"`
}

// DependencyPolicy is an EdgePlacement's spec.dependencies.
type DependencyPolicy string

const (
	DependenciesNone   DependencyPolicy = "None"
	DependenciesFollow DependencyPolicy = "Follow"
)

// DependencyReasonNotFound is the reason of an EdgePlacement's Propagated
// condition when a selected workload references an object the WDS does not
// hold (spec.dependencies: Follow).
const DependencyReasonNotFound = "DependencyNotFound"

// MaxListedDependencies bounds status.dependencies; DependencyCount counts
// them all.
const MaxListedDependencies = 100

// DependencyReference names an object placed because a selected workload
// references it.
type DependencyReference struct {
	// APIGroup of the object ("" for the core group).
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Resource is the lower-case plural resource name.
	Resource string `json:"resource"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// DownsyncClause selects workload objects; every field given must hold.
// "*" in a list matches anything.
type DownsyncClause struct {
	// APIGroup of the objects ("" for the core group, "*" for any).
	// +optional
	APIGroup *string `json:"apiGroup,omitempty"`
	// Resources are lower-case plural resource names.
	Resources []string `json:"resources"`
	// Namespaces the objects are in; empty or "*" means any. Cluster-scoped
	// objects match only when Namespaces is empty or "*" and there are no
	// NamespaceSelectors.
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelectors select the namespaces, by their labels.
	// +optional
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors,omitempty"`
	// ObjectNames are the names of the objects.
	// +optional
	ObjectNames []string `json:"objectNames,omitempty"`
	// LabelSelectors select the objects by label; any may match.
	// +optional
	LabelSelectors []metav1.LabelSelector `json:"labelSelectors,omitempty"`
	// CreateOnly objects are created at the edge once and never overwritten
	// (unless another clause that selects them for the same destination is
	// not create-only).
	// +optional
	CreateOnly bool `json:"createOnly,omitempty"`
	// StatusCollectors name StatusCollectors that summarize the reported
	// state of the objects this clause selects.
	// +optional
	StatusCollectors []string `json:"statusCollectors,omitempty"`
}

// UpsyncClause selects edge objects to copy back to the WDS.
type UpsyncClause struct {
	APIGroup  string   `json:"apiGroup"`
	Resources []string `json:"resources"`
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// +optional
	Names []string `json:"names,omitempty"`
}

// Selects reports whether the clause selects an object of a resource:
// every field given must hold, "*" matches anything, and empty Namespaces
// or Names match any.
func (c UpsyncClause) Selects(group, resource, namespace, name string) bool {
	in := func(list []string, v string) bool {
		return len(list) == 0 || slices.Contains(list, "*") || slices.Contains(list, v)
	}
	return (c.APIGroup == "*" || c.APIGroup == group) &&
		slices.ContainsFunc(c.Resources, func(r string) bool { return r == "*" || r == resource }) &&
		in(c.Namespaces, namespace) && in(c.Names, name)
}

// Condition types and reasons of an EdgePlacement.
const (
	EdgePlacementReady         = "Ready"
	EdgePlacementMisconfigured = "Misconfigured"
	// EdgePlacementConflicted is True while, at some destination, an
	// object the placement selects is placed from another source and this
	// placement's copy is not written; its message names each such object,
	// the destination and the source that holds it. It is absent when there
	// is no conflict. The rule: the source whose copy a mailbox holds keeps
	// it while it still selects the object there; when none holds it, the
	// older EdgePlacement wins (creationTimestamp, then WDS, then name).
	EdgePlacementConflicted = "Conflicted"
	// EdgePlacementSynced is False while a syncer reports that it cannot
	// keep a copy of the placement in step at its edge (the reason is the
	// syncer's, such as MissingPermission or Rejected; the message names
	// the SyncTarget and the object), True when none does.
	EdgePlacementSynced = "Synced"
	// ConflictReasonOtherSpace: another WDS places an object of the same
	// group, resource, namespace and name at the same destination.
	ConflictReasonOtherSpace = "PlacedFromAnotherSpace"
	// ConflictReasonCustomization: another placement of the same WDS places
	// the same object at the same destination, customized differently (its
	// parameters come from another Location).
	ConflictReasonCustomization = "CustomizedDifferently"
	// ConflictReasonDefinition: with CRDs per space, the placements that
	// place a custom resource at one destination come from WDSs that
	// define it differently. The destination serves one definition (the
	// rule above, by WDS: the one whose CRD the mailbox holds keeps it
	// while a placement of it still needs it there), and every placement
	// involved reports the conflict: the others' objects of the resource
	// are not written there.
	ConflictReasonDefinition = "DefinedDifferently"
)

// MailboxLimitReason is the reason of an EdgePlacement's Propagated
// condition when a copy was not written because the mailboxes of the
// destination's inventory space hold what its limit allows (a SpaceQuota's
// mailboxObjects or mailboxBytes). The server's refusal of the write names
// it as the type of a cause, so that the translator can tell it from other
// failures.
const MailboxLimitReason = "MailboxLimitExceeded"

// SourcePlacementAnnotation on a mailbox copy names the EdgePlacement (of
// the space SourceSpaceAnnotation names) whose copy it is. Only the server
// sets it; with the source space it decides who keeps a copy that several
// sources place (see EdgePlacementConflicted).
const SourcePlacementAnnotation = "edge.kubestellar.io/source-placement"

// EdgePlacementStatus reports how the placement is carried out.
type EdgePlacementStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// MatchingLocationCount is how many Locations the selectors match.
	// +optional
	MatchingLocationCount int32 `json:"matchingLocationCount"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Dependencies are the objects placed at some destination only because
	// a selected workload references them (spec.dependencies: Follow),
	// sorted, at most MaxListedDependencies (100) of them.
	// +optional
	Dependencies []DependencyReference `json:"dependencies,omitempty"`
	// DependencyCount is how many such objects there are.
	// +optional
	DependencyCount int32 `json:"dependencyCount,omitempty"`
	// Rollout is where a Progressive rollout is (spec.rollout).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// EdgePlacementList is a list of EdgePlacements.
//
// +kubebuilder:object:root=true
type EdgePlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgePlacement `json:"items"`
}

// SinglePlacementSlice lists the destinations of an EdgePlacement. The
// scheduler keeps one beside each EdgePlacement, of the same name, owned by it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=sps,categories=kubestellar
// +kubebuilder:printcolumn:name="Destinations",type=integer,JSONPath=`.destinationCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SinglePlacementSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Destinations []SinglePlacement `json:"destinations,omitempty"`
	// DestinationCount is len(destinations), for printing.
	// +optional
	DestinationCount int32 `json:"destinationCount"`
}

// SinglePlacement is one destination: a SyncTarget reached through a Location.
type SinglePlacement struct {
	// Space is the inventory space of the Location and SyncTarget.
	Space          string    `json:"space"`
	LocationName   string    `json:"locationName"`
	SyncTargetName string    `json:"syncTargetName"`
	SyncTargetUID  types.UID `json:"syncTargetUID"`
}

// SinglePlacementSliceList is a list of SinglePlacementSlices.
//
// +kubebuilder:object:root=true
type SinglePlacementSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SinglePlacementSlice `json:"items"`
}
