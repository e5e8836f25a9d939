// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestControllerQueueMetrics checks that every controller's work queue
// reports client-go's queue metrics, and the worker's panics counter, on
// the server's /metrics: they are how an operator sees a controller
// falling behind or failing.
func TestControllerQueueMetrics(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	queues := []string{
		"space", "namespace", "crd-instances", // the spaces' own
		"scheduler", "mailbox", "placement-translator", "placement-translator-status",
		"status", "status-collectors", "upsync",
	}
	series := []string{
		"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_count",
		"workqueue_work_duration_seconds_count", "workqueue_retries_total", "workqueue_unfinished_work_seconds",
		"workqueue_longest_running_processor_seconds", "kubestellar_controller_panics_total",
	}
	// A Space to make, so that the space controller's queue sees work.
	createSpace(t, s, "metrics1")
	rest := kube(t, s, spaces.Root).Discovery().RESTClient()
	var body []byte
	// The workload-management controllers start once their caches have
	// synced, which may be after the server is ready.
	eventually(t, 30*time.Second, func() (bool, error) {
		var err error
		body, err = rest.Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		var missing []string
		for _, q := range queues {
			for _, name := range series {
				if !hasSeries(string(body), name, q) {
					missing = append(missing, fmt.Sprintf("%s{name=%q}", name, q))
				}
			}
		}
		if len(missing) > 0 {
			return false, fmt.Errorf("missing %s", strings.Join(missing, ", "))
		}
		return true, nil
	}, "every controller's queue metrics on /metrics")
	// The space controller's queue saw the new Space; nothing panicked.
	require.NotEqual(t, "0", seriesValue(string(body), "workqueue_adds_total", "space"), "the space queue counts no adds")
	for _, q := range queues {
		require.Equal(t, "0", seriesValue(string(body), "kubestellar_controller_panics_total", q), "queue %s", q)
	}
}

// seriesValue returns the value of a series of a metric for one queue
// name, as written in the Prometheus text format, or "" when it is absent.
func seriesValue(body, metric, queue string) string {
	values := seriesValues(body, metric, fmt.Sprintf("name=%q", queue))
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// seriesValues returns the values of the series of a metric, in the
// Prometheus text format, whose labels include every one of labels
// (each written name="value").
func seriesValues(body, metric string, labels ...string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		set, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		have := map[string]bool{}
		for _, l := range strings.Split(set, ",") {
			have[l] = true
		}
		matches := true
		for _, l := range labels {
			matches = matches && have[l]
		}
		if matches {
			out = append(out, strings.TrimSpace(value))
		}
	}
	return out
}

func hasSeries(body, metric, queue string) bool { return seriesValue(body, metric, queue) != "" }
