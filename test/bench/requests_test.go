// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"reflect"
	"testing"
)

func TestParseLabels(t *testing.T) {
	got := parseLabels(`code="429",component="apiserver",resource="configmaps",subresource="",verb="PATCH",x="a\"b"`)
	want := map[string]string{"code": "429", "component": "apiserver", "resource": "configmaps", "subresource": "", "verb": "PATCH", "x": `a"b`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseLabels = %v, want %v", got, want)
	}
}

func TestBusiest(t *testing.T) {
	before := map[string]float64{"GET a 200": 10, "PATCH b 429": 1}
	after := map[string]float64{"GET a 200": 12, "PATCH b 429": 101, "PUT c 409": 5}
	got := busiest(before, after, 2)
	want := []string{"      100  PATCH b 429", "        5  PUT c 409"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("busiest = %q, want %q", got, want)
	}
}
