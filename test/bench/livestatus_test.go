// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubestellar/kubestellar/test/memedge"
)

// TestStatusPlayerMakesEveryDeploymentAvailable: told to, the player gives
// every Deployment of the status namespace in each cluster an available
// status through the cluster's API, leaves other namespaces alone, counts
// what it set and what the clusters hold, and refuses no line but its own.
func TestStatusPlayerMakesEveryDeploymentAvailable(t *testing.T) {
	ctx := context.Background()
	p := &statusPlayer{}
	for range 2 {
		c := memedge.New()
		c.OnChange = p.onChange
		p.clusters = append(p.clusters, c)
	}
	deploy := func(c *memedge.Cluster, ns, name string) dynamic.ResourceInterface {
		client := dynamic.NewForConfigOrDie(c.Config())
		nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		_, _ = client.Resource(namespacesGVR).Create(ctx, nsObj, metav1.CreateOptions{})
		d := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"replicas": int64(3)}}}
		rc := client.Resource(deploymentsGVR).Namespace(ns)
		if _, err := rc.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return rc
	}
	for _, c := range p.clusters {
		deploy(c, liveStatusNamespace, "a")
		deploy(c, liveStatusNamespace, "b")
	}
	other := deploy(p.clusters[0], "elsewhere", "c")
	if got := p.held.Load(); got != 4 {
		t.Fatalf("the clusters hold %d Deployments of %s, want 4", got, liveStatusNamespace)
	}

	var errs []error
	p.serve(ctx, strings.NewReader("something else\n"+simPlayStatus+"\n"), func(err error) { errs = append(errs, err) })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := p.set.Load(); got != 4 {
		t.Errorf("statuses set: %d, want 4", got)
	}
	if p.doneAt.Load() == 0 {
		t.Error("no time of the end of the play")
	}
	for _, c := range p.clusters {
		list, err := dynamic.NewForConfigOrDie(c.Config()).Resource(deploymentsGVR).Namespace(liveStatusNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Items {
			if n, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas"); n != 3 {
				t.Errorf("%s: availableReplicas %d, want the spec's 3", d.GetName(), n)
			}
		}
	}
	c, err := other.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found := c.Object["status"]; found {
		t.Errorf("a Deployment outside %s was given a status: %v", liveStatusNamespace, c.Object["status"])
	}
}

// TestAvailableCountReadsTheCollectorsRow: the count is the collector's
// one cell; another collector's, a grouped table or an empty one is none.
func TestAvailableCountReadsTheCollectorsRow(t *testing.T) {
	cs := func(results ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "CombinedStatus",
			"metadata": map[string]any{"name": "x"}, "objectRef": map[string]any{}, "placement": "p", "results": results}}
	}
	row := func(cells ...any) any { return map[string]any{"columns": cells} }
	for _, tc := range []struct {
		name  string
		u     *unstructured.Unstructured
		want  int64
		found bool
	}{
		{"the collector's count", cs(map[string]any{"name": liveCollector, "columnNames": []any{"edges"}, "rows": []any{row(int64(7))}}), 7, true},
		{"zero", cs(map[string]any{"name": liveCollector, "columnNames": []any{"edges"}, "rows": []any{row(int64(0))}}), 0, true},
		{"another collector", cs(map[string]any{"name": "other", "columnNames": []any{"edges"}, "rows": []any{row(int64(7))}}), 0, false},
		{"grouped", cs(map[string]any{"name": liveCollector, "columnNames": []any{"g", "edges"}, "rows": []any{row("a", int64(7))}}), 0, false},
		{"no rows", cs(map[string]any{"name": liveCollector, "columnNames": []any{"edges"}}), 0, false},
		{"no results", cs(), 0, false},
	} {
		got, found := availableCount(tc.u)
		if got != tc.want || found != tc.found {
			t.Errorf("%s: got %d, %v; want %d, %v", tc.name, got, found, tc.want, tc.found)
		}
	}
}
