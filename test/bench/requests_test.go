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

// TestCountsOf: the metrics the busiest requests are read from, each
// summed under its key, the rest of the exposition ignored, and no
// watch's duration (how long it was held).
func TestCountsOf(t *testing.T) {
	data := []byte(`# HELP apiserver_request_total x
apiserver_request_total{code="200",component="apiserver",resource="deployments",subresource="status",verb="PUT"} 7
apiserver_request_total{code="200",component="apiserver",resource="deployments",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_duration_seconds_sum{resource="configmaps",subresource="",verb="LIST"} 0.25
apiserver_request_duration_seconds_sum{resource="synctargets",subresource="",verb="WATCH"} 170264.2
apiserver_request_total{code="200",resource="synctargets",subresource="",verb="WATCH"} 486
apiserver_flowcontrol_rejected_requests_total{flow_schema="kubestellar-syncers",priority_level="kubestellar-syncers",reason="queue-full"} 411
apiserver_flowcontrol_rejected_requests_total{flow_schema="other",priority_level="kubestellar-syncers",reason="queue-full"} 9
apiserver_flowcontrol_rejected_requests_total{flow_schema="kubestellar-syncers",priority_level="kubestellar-syncers",reason="time-out"} 2
workqueue_adds_total{name="status"} 5
apiserver_storage_objects{resource="pods"} 99
`)
	got, err := countsOf(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"PUT deployments/status 200":                                10,
		"ms serving LIST configmaps":                                250,
		"WATCH synctargets 200":                                     486,
		"refused by priority level kubestellar-syncers: queue-full": 420,
		"refused by priority level kubestellar-syncers: time-out":   2,
		"queued status":                                             5,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("countsOf = %v, want %v", got, want)
	}
}
