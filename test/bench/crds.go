// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The CRDs section (issue 52): what CRDs cost the server in each of its
// two layouts, measured the same way on a fresh server each, in one run:
// stored once and bound to the spaces that create them (the default), and
// each space's own (--crds-per-space). For each layout:
//
//   - -crd-spaces spaces install the same 10 CRDs: the server's RSS per
//     space, once everything is established and the server has settled;
//   - -crd-own-spaces spaces install 10 CRDs of their own (a group each):
//     RSS per space, as above;
//   - in one space, -crd-objects custom resources created by one client
//     (latency of each create) and listed (latency of a list of them all).
//
// The ratios per-space / bound follow, from the same run.

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// crdOptions size the CRDs section.
type crdOptions struct {
	// spaces install the same CRDs; own install CRDs of their own.
	spaces, own int
	// objects are the custom resources created and listed in one space.
	objects int
}

// crdsPerSpace is how many CRDs each space installs.
const crdsPerSpace = 10

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// layoutFigures are one layout's figures.
type layoutFigures struct {
	sharedPerSpace, ownPerSpace int64 // bytes of RSS
	creates, lists              []time.Duration
}

func crdsBench(ctx context.Context, bin string, o crdOptions, progress func(string, ...any)) ([]row, error) {
	progress = prefixed(progress, "crds: ")
	layouts := []struct {
		name string
		args []string
	}{{"bound", []string{"--crds-per-space=false"}}, {"per space", []string{"--crds-per-space"}}}
	figures := make([]layoutFigures, len(layouts))
	var rows []row
	for i, l := range layouts {
		f, err := crdLayout(ctx, bin, o, l.args, prefixed(progress, l.name+": "))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		figures[i] = f
		rows = append(rows,
			row{fmt.Sprintf("%s: RSS per space, %d spaces × the same %d CRDs", l.name, o.spaces, crdsPerSpace), kib(f.sharedPerSpace), "(RSS after − before) / spaces, settled"},
			row{fmt.Sprintf("%s: RSS per space, %d spaces × %d CRDs of their own", l.name, o.own, crdsPerSpace), kib(f.ownPerSpace), "(RSS after − before) / spaces, settled"},
			row{fmt.Sprintf("%s: custom resource create p50 / p99", l.name), ms(percentile(f.creates, 50)) + " / " + ms(percentile(f.creates, 99)), fmt.Sprintf("%d creates, one client", len(f.creates))},
			row{fmt.Sprintf("%s: list of %d custom resources p50 / p99", l.name, o.objects), ms(percentile(f.lists, 50)) + " / " + ms(percentile(f.lists, 99)), fmt.Sprintf("%d lists", len(f.lists))},
		)
	}
	bound, own := figures[0], figures[1]
	ratio := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	rows = append(rows,
		row{"per space / bound: RSS per space, same CRDs", ratio(float64(own.sharedPerSpace), float64(bound.sharedPerSpace)), "same run"},
		row{"per space / bound: RSS per space, own CRDs", ratio(float64(own.ownPerSpace), float64(bound.ownPerSpace)), "same run"},
		row{"per space / bound: create p50", ratio(float64(percentile(own.creates, 50)), float64(percentile(bound.creates, 50))), "same run"},
		row{"per space / bound: list p50", ratio(float64(percentile(own.lists, 50)), float64(percentile(bound.lists, 50))), "same run; a space's own custom resources are listed from the datastore, the bound ones from the watch cache"},
	)
	return rows, nil
}

// crdLayout measures one layout on a fresh server started with args.
func crdLayout(ctx context.Context, bin string, o crdOptions, args []string, progress func(string, ...any)) (layoutFigures, error) {
	var f layoutFigures
	s, err := start(ctx, bin, "", args...)
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(s.dataDir)
	defer s.stop()
	pid := s.cmd.Process.Pid
	settled := func() (int64, error) {
		if _, err := settle(ctx, pid, 2*time.Minute); err != nil {
			return 0, err
		}
		return s.rss(), nil
	}
	perSpace := func(prefix string, n int, group func(space int) string) (int64, error) {
		before, err := settled()
		if err != nil {
			return 0, err
		}
		progress("creating %d spaces, each with %d CRDs", n, crdsPerSpace)
		if err := createSpaces(ctx, s, prefix, n); err != nil {
			return 0, err
		}
		if _, err := parallel(16, n*crdsPerSpace, func(i int) error {
			space := fmt.Sprintf("%s%04d", prefix, i/crdsPerSpace)
			crd := benchCRD(group(i/crdsPerSpace), i%crdsPerSpace)
			_, err := dynamic.NewForConfigOrDie(s.config(space)).Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
			return err
		}); err != nil {
			return 0, err
		}
		progress("waiting for the %d CRDs to be established", n*crdsPerSpace)
		for i := range n {
			if err := crdsEstablished(ctx, dynamic.NewForConfigOrDie(s.config(fmt.Sprintf("%s%04d", prefix, i)))); err != nil {
				return 0, err
			}
		}
		after, err := settled()
		if err != nil {
			return 0, err
		}
		return (after - before) / int64(n), nil
	}
	if f.sharedPerSpace, err = perSpace("crd-", o.spaces, func(int) string { return "bench.example.com" }); err != nil {
		return f, err
	}
	if f.ownPerSpace, err = perSpace("own-", o.own, func(i int) string { return fmt.Sprintf("s%04d.bench.example.com", i) }); err != nil {
		return f, err
	}

	progress("creating and listing %d custom resources in one space", o.objects)
	dyn := dynamic.NewForConfigOrDie(s.config("crd-0000"))
	gvr := schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "thing0s"}
	for i := range o.objects {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bench.example.com/v1", "kind": "Thing0",
			"metadata": map[string]any{"name": fmt.Sprintf("t-%d", i), "namespace": "default"},
			"spec":     map[string]any{"size": int64(i), "color": "red", "labels": []any{"a", "b"}}}}
		began := time.Now()
		if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return f, err
		}
		f.creates = append(f.creates, time.Since(began))
	}
	for range 30 {
		began := time.Now()
		list, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return f, err
		}
		if len(list.Items) != o.objects {
			return f, fmt.Errorf("listed %d custom resources, not %d", len(list.Items), o.objects)
		}
		f.lists = append(f.lists, time.Since(began))
	}
	return f, nil
}

// crdsEstablished waits until every CRD of a space is established.
func crdsEstablished(ctx context.Context, dyn dynamic.Interface) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, crd := range list.Items {
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conditions {
				if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
					n++
				}
			}
		}
		return n >= crdsPerSpace, nil
	})
}

// benchCRD is the i-th of a space's CRDs in group: a namespaced kind with
// a schema of a few fields, a status subresource and a printer column.
func benchCRD(group string, i int) *unstructured.Unstructured {
	kind := fmt.Sprintf("Thing%d", i)
	plural := fmt.Sprintf("thing%ds", i)
	field := func(t string) map[string]any { return map[string]any{"type": t} }
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "properties": map[string]any{
			"size": field("integer"), "color": field("string"),
			"labels": map[string]any{"type": "array", "items": field("string")}}},
		"status": map[string]any{"type": "object", "properties": map[string]any{"ready": field("boolean")}}}}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": fmt.Sprintf("thing%d", i), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema":                   map[string]any{"openAPIV3Schema": schema},
				"subresources":             map[string]any{"status": map[string]any{}},
				"additionalPrinterColumns": []any{map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}}}}}}}
}

func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/1024) }
