// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v2alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusCollector summarizes the reported state of a workload object across
// its destinations with CEL expressions. Each expression sees:
// obj (the workload object in the WDS), returned.status (the status the
// edge reported), returned.associated (the state of its descendants at the
// edge: see AssociatedState), and inventory.name (the SyncTarget's name).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=scol,categories=kubestellar
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StatusCollector struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec StatusCollectorSpec `json:"spec"`
	// +optional
	Status StatusCollectorStatus `json:"status,omitempty"`
}

// Expression is a CEL expression.
type Expression string

// StatusCollectorSpec is a query over the destinations' reports: keep the
// rows filter accepts, group them by groupBy and aggregate combinedFields
// per group — or, without aggregation, list select per row — at most limit
// rows.
type StatusCollectorSpec struct {
	// +optional
	Filter *Expression `json:"filter,omitempty"`
	// +optional
	GroupBy []NamedExpression `json:"groupBy,omitempty"`
	// +optional
	CombinedFields []NamedAggregator `json:"combinedFields,omitempty"`
	// +optional
	Select []NamedExpression `json:"select,omitempty"`
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=0
	// +optional
	Limit int64 `json:"limit"`
}

// NamedExpression is an expression and the column it fills.
type NamedExpression struct {
	Name string     `json:"name"`
	Def  Expression `json:"def"`
}

// AggregationType is how a column combines rows.
// +kubebuilder:validation:Enum=COUNT;SUM;AVG;MIN;MAX
type AggregationType string

// Aggregations.
const (
	AggregationCount AggregationType = "COUNT"
	AggregationSum   AggregationType = "SUM"
	AggregationAvg   AggregationType = "AVG"
	AggregationMin   AggregationType = "MIN"
	AggregationMax   AggregationType = "MAX"
)

// NamedAggregator aggregates Subject over each group's rows (COUNT needs none).
type NamedAggregator struct {
	Name string          `json:"name"`
	Type AggregationType `json:"type"`
	// +optional
	Subject *Expression `json:"subject,omitempty"`
}

// Condition types of a StatusCollector.
const (
	StatusCollectorReady = "Ready"
)

// StatusCollectorStatus reports whether the expressions compile.
type StatusCollectorStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StatusCollectorList is a list of StatusCollectors.
//
// +kubebuilder:object:root=true
type StatusCollectorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StatusCollector `json:"items"`
}

// CombinedStatus holds the summaries of one workload object under one
// EdgePlacement, one result per StatusCollector. It lives in the object's
// namespace (in "default" for cluster-scoped objects) and is named
// <placement>.<resource>.<object-name>.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=cstat,categories=kubestellar
// +kubebuilder:printcolumn:name="Object",type=string,JSONPath=`.objectRef.name`
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.placement`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CombinedStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// ObjectRef is the workload object summarized.
	ObjectRef ObjectReference `json:"objectRef"`
	// Placement is the EdgePlacement whose destinations are summarized.
	Placement string `json:"placement"`
	// +optional
	Results []NamedStatusCombination `json:"results,omitempty"`
}

// ObjectReference names a workload object.
type ObjectReference struct {
	Group    string `json:"group"`
	Resource string `json:"resource"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// NamedStatusCombination is the table one StatusCollector produced.
type NamedStatusCombination struct {
	Name        string                 `json:"name"`
	ColumnNames []string               `json:"columnNames"`
	Rows        []StatusCombinationRow `json:"rows,omitempty"`
}

// StatusCombinationRow is one row of a result table.
type StatusCombinationRow struct {
	Columns []apiextensionsv1.JSON `json:"columns"`
}

// CombinedStatusList is a list of CombinedStatuses.
//
// +kubebuilder:object:root=true
type CombinedStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CombinedStatus `json:"items"`
}

// AssociatedState is the state of a workload object's descendants at the
// edge, as the syncer reports it in the AssociatedStateAnnotation of the
// mailbox copy.
type AssociatedState struct {
	// PodPhases counts the object's pods by phase.
	// +optional
	PodPhases map[string]int64 `json:"podPhases,omitempty"`
	// NotReadyPods lists pods that are not ready, with why: at most
	// MaxNotReadyPods, so a full list may have been cut.
	// +optional
	NotReadyPods []NotReadyPod `json:"notReadyPods,omitempty"`
	// ReplicaSets counts the object's ReplicaSets.
	// +optional
	ReplicaSets int64 `json:"replicaSets,omitempty"`
}

// MaxNotReadyPods is how many not-ready pods a syncer lists at most in an
// AssociatedState.
const MaxNotReadyPods = 20

// Bounds on what a syncer writes into the copies of its mailbox, which the
// server holds and reads for every copy: the server refuses more, and the
// syncer cuts what it writes to fit.
const (
	// MaxNotReadyReasonLength is the longest NotReadyPod reason, in bytes.
	MaxNotReadyReasonLength = 256
	// MaxAssociatedStateLength is the longest AssociatedStateAnnotation
	// (an AssociatedState in JSON), in bytes: room for MaxNotReadyPods pods
	// with the longest names and reasons of plain characters (a syncer
	// leaves the pods out of a state that does not fit, and the phases
	// still count them).
	MaxAssociatedStateLength = 16 * 1024
	// MaxSyncErrorLength is the longest SyncErrorAnnotation, in bytes.
	MaxSyncErrorLength = 2 * 1024
	// MaxCopyStatusLength is the longest status, in JSON, a syncer writes
	// into a copy: the status of a Deployment, a Job or most custom
	// resources is a few KiB. The controllers hold every copy's status, and
	// return it into the workload description space.
	MaxCopyStatusLength = 64 * 1024
)

// NotReadyPod is a pod that is not ready.
type NotReadyPod struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}
