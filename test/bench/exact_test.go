// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func TestUnlike(t *testing.T) {
	src := soakGauge("ns-0", "g-1", 3)
	src.SetAnnotations(map[string]string{"team": "x", edgev2alpha1.CustomizerAnnotation: "c"})
	src.SetLabels(map[string]string{"app": "soak", edgev2alpha1.ExecutingCountLabel: "2"})
	src.Object["status"] = map[string]any{"value": int64(1)}
	want := &wantedCopy{source: src, placements: map[string]bool{"ep-1": true, "ep-0": true}, singleton: true}
	good := func() *unstructured.Unstructured {
		cp := soakGauge("ns-0", "g-1", 3)
		cp.SetLabels(map[string]string{"app": "soak", edgev2alpha1.PlacementCopyLabel: "true"})
		cp.SetAnnotations(map[string]string{"team": "x", edgev2alpha1.SourceSpaceAnnotation: "wds",
			edgev2alpha1.PlacementsAnnotation: "ep-0,ep-1", edgev2alpha1.WantSingletonAnnotation: "true", contentHashAnnotation: "h"})
		cp.Object["status"] = map[string]any{"value": int64(3)}
		return cp
	}
	for _, tc := range []struct {
		desc   string
		change func(cp *unstructured.Unstructured)
		want   string // a part of the reason; "" for none
	}{
		{"as the translator makes it", func(*unstructured.Unstructured) {}, ""},
		{"an older spec", func(cp *unstructured.Unstructured) {
			cp.Object["spec"] = map[string]any{"unit": "soak", "version": int64(2)}
		}, "spec is"},
		{"a field the source lacks", func(cp *unstructured.Unstructured) { cp.Object["data"] = "x" }, "data is"},
		{"a center-only label leaked", func(cp *unstructured.Unstructured) {
			cp.SetLabels(map[string]string{"app": "soak", edgev2alpha1.PlacementCopyLabel: "true", edgev2alpha1.ExecutingCountLabel: "2"})
		}, "labels are"},
		{"not labelled a copy", func(cp *unstructured.Unstructured) { cp.SetLabels(map[string]string{"app": "soak"}) }, "labels are"},
		{"a user annotation lost", func(cp *unstructured.Unstructured) {
			a := cp.GetAnnotations()
			delete(a, "team")
			cp.SetAnnotations(a)
		}, "annotations other than"},
		{"one placement missing", func(cp *unstructured.Unstructured) {
			a := cp.GetAnnotations()
			a[edgev2alpha1.PlacementsAnnotation] = "ep-0"
			cp.SetAnnotations(a)
		}, edgev2alpha1.PlacementsAnnotation},
		{"another WDS", func(cp *unstructured.Unstructured) {
			a := cp.GetAnnotations()
			a[edgev2alpha1.SourceSpaceAnnotation] = "other"
			cp.SetAnnotations(a)
		}, edgev2alpha1.SourceSpaceAnnotation},
		{"no content hash", func(cp *unstructured.Unstructured) {
			a := cp.GetAnnotations()
			delete(a, contentHashAnnotation)
			cp.SetAnnotations(a)
		}, "content hash"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cp := good()
			tc.change(cp)
			got := unlike(cp, want, "wds")
			if tc.want == "" {
				require.Empty(t, got)
			} else {
				require.Contains(t, got, tc.want)
			}
		})
	}
}

func TestDestinationsAndSelects(t *testing.T) {
	loc := func(name, zone string) edgev2alpha1.Location {
		return edgev2alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}},
			Spec: edgev2alpha1.LocationSpec{InstanceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}}}}
	}
	st := func(name string, unschedulable bool) edgev2alpha1.SyncTarget {
		return edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"name": name}},
			Spec: edgev2alpha1.SyncTargetSpec{Unschedulable: unschedulable}}
	}
	ep := placementObject("ep-0", map[string]string{"zone": "a"},
		edgev2alpha1.DownsyncClause{APIGroup: ptr.To(gaugesGVR.Group), Resources: []string{"gauges"}, Namespaces: []string{"ns-0"}})
	dests, err := destinations(ep, []edgev2alpha1.Location{loc("e1", "a"), loc("e2", "b"), loc("e3", "a"), loc("e4", "a")},
		[]edgev2alpha1.SyncTarget{st("e1", false), st("e2", false), st("e3", true), st("e4", false)})
	require.NoError(t, err)
	require.Equal(t, []string{"e1", "e4"}, dests, "zone a, schedulable")

	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want bool
	}{{soakGauge("ns-0", "g", 1), true}, {soakGauge("ns-1", "g", 1), false}} {
		got, err := selects(ep, gaugesGVR, tc.obj)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, objectKey(tc.obj))
	}
	cms := placementObject("cms", nil, edgev2alpha1.DownsyncClause{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{"chaos"}})
	for name, want := range map[string]bool{"obj-1": true, "kube-root-ca.crt": false} {
		cm := &unstructured.Unstructured{}
		cm.SetNamespace("chaos")
		cm.SetName(name)
		got, err := selects(cms, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, cm)
		require.NoError(t, err)
		require.Equal(t, want, got, "%s: the namespace's own root CA is never placed", name)
	}
	ep.Spec.Downsync[0].LabelSelectors = []metav1.LabelSelector{{}}
	_, err = selects(ep, gaugesGVR, soakGauge("ns-0", "g", 1))
	require.Error(t, err, "a clause the check does not model is refused")
}
