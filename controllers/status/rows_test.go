// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// recordIn is copyIn's copy as the shared caches hold it (a Copy record,
// which the controller reads without expanding).
func recordIn(syncTarget string, status map[string]any, annotations map[string]string) placedCopy {
	cp := copyIn(syncTarget, status, annotations)
	u := cp.obj.(*unstructured.Unstructured)
	a := u.GetAnnotations()
	a[spaces.Annotation] = cp.mailbox
	u.SetAnnotations(a)
	cp.obj = crossspace.Record(u)
	return cp
}

// The rows of copies read as records are those of the same copies
// expanded, each associated state decoded once per text and each copy
// given its own.
func TestRowsOfRecords(t *testing.T) {
	ready := map[string]string{edgev2alpha1.AssociatedStateAnnotation: `{"phases":{"Running":2}}`}
	pending := map[string]string{edgev2alpha1.AssociatedStateAnnotation: `{"phases":{"Pending":1}}`}
	broken := map[string]string{edgev2alpha1.AssociatedStateAnnotation: `not json`}
	status := map[string]any{"availableReplicas": int64(2)}
	build := func(in func(string, map[string]any, map[string]string) placedCopy) []placedCopy {
		return []placedCopy{in("edge1", status, ready), in("edge2", nil, pending), in("edge3", status, ready), in("edge4", status, broken), in("edge5", nil, nil)}
	}
	records, expanded := rowsOf(build(recordIn)), rowsOf(build(copyIn))
	require.Equal(t, expanded, records)
	require.Equal(t, []row{
		{Inventory: "edge1", Status: status, Associated: map[string]any{"phases": map[string]any{"Running": float64(2)}}},
		{Inventory: "edge2", Associated: map[string]any{"phases": map[string]any{"Pending": float64(1)}}},
		{Inventory: "edge3", Status: status, Associated: map[string]any{"phases": map[string]any{"Running": float64(2)}}},
		{Inventory: "edge4", Status: status},
		{Inventory: "edge5"},
	}, records)
	require.Equal(t, fmt.Sprintf("%p", records[0].Associated), fmt.Sprintf("%p", records[2].Associated), "one text, decoded once")
}

// BenchmarkRowsOf: the rows of one object's copies on 1,000 SyncTargets,
// read from the caches' records, against the same copies expanded into
// unstructured objects first (what a reconcile read before).
func BenchmarkRowsOf(b *testing.B) {
	annotations := map[string]string{
		edgev2alpha1.AssociatedStateAnnotation:  `{"phases":{"Running":2}}`,
		edgev2alpha1.StatusCollectorsAnnotation: `{"ep":["available"]}`,
		edgev2alpha1.PlacementsAnnotation:       "ep",
	}
	var copies []placedCopy
	for i := range 1000 {
		copies = append(copies, recordIn(fmt.Sprintf("edge%04d", i), map[string]any{"availableReplicas": int64(2), "replicas": int64(2)}, annotations))
	}
	b.Run("records", func(b *testing.B) {
		for b.Loop() {
			rowsOf(copies)
		}
	})
	b.Run("expanded", func(b *testing.B) {
		for b.Loop() {
			expanded := make([]placedCopy, len(copies))
			for i, cp := range copies {
				cp.obj = cp.obj.(*crossspace.Copy).Unstructured()
				expanded[i] = cp
			}
			rowsOf(expanded)
		}
	})
}
