// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/kubestellar/kubestellar/spaces"
)

// requestsSince takes the server's request counts now and returns what
// prints, through progress, its busiest requests from then until it is
// called (what: during what).
func requestsSince(ctx context.Context, s *server, progress func(string, ...any)) (func(what string), error) {
	before, err := requestCounts(ctx, s)
	if err != nil {
		return nil, err
	}
	return func(what string) {
		now, err := requestCounts(ctx, s)
		if err != nil {
			progress("%v", err)
			return
		}
		progress("the server's busiest requests during %s:", what)
		for _, line := range busiest(before, now, 12) {
			progress("%s", line)
		}
	}, nil
}

// requestCounts reads the server's apiserver_request_total, summed by
// verb, resource and code (what the server was asked to do), the time it
// took over them (by verb and resource), the requests each priority level
// refused and why, and its work queues' adds and working time: for the
// sections that explain
// where a figure's time went.
func requestCounts(ctx context.Context, s *server) (map[string]float64, error) {
	data, err := kubernetes.NewForConfigOrDie(s.config(spaces.Root)).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the server's metrics: %w", err)
	}
	return countsOf(data)
}

// countedMetrics are the metrics requestCounts reads.
var countedMetrics = []string{"apiserver_request_total", "apiserver_request_duration_seconds_sum", "apiserver_flowcontrol_request_wait_duration_seconds_sum",
	"apiserver_flowcontrol_rejected_requests_total", "workqueue_adds_total", "workqueue_work_duration_seconds_sum"}

// countsOf sums a Prometheus text exposition's countedMetrics as
// requestCounts says.
func countsOf(data []byte) (map[string]float64, error) {
	counts := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Text()
		metric, rest, ok := strings.Cut(line, "{")
		if !ok || !slices.Contains(countedMetrics, metric) {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := parseLabels(rest[:end])
		// The in-process controllers' work, which makes no request: how
		// often each queue's items were added, and for how long its
		// workers worked (in ms).
		switch metric {
		case "workqueue_adds_total":
			counts["queued "+labels["name"]] += v
			continue
		case "apiserver_flowcontrol_rejected_requests_total":
			// Why a level refused (429): its queues full (queue-full),
			// a request queued past its time (time-out), or its
			// concurrency shrunk under it (concurrency-limit).
			counts["refused by priority level "+labels["priority_level"]+": "+labels["reason"]] += v
			continue
		case "apiserver_flowcontrol_request_wait_duration_seconds_sum":
			counts["ms waiting in priority level "+labels["priority_level"]] += 1000 * v
			continue
		case "workqueue_work_duration_seconds_sum":
			counts["ms working "+labels["name"]] += 1000 * v
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		if metric == "apiserver_request_duration_seconds_sum" {
			// How long the server took over them, in ms (all codes):
			// with the queues' working time, whether a controller's
			// time went in its requests or in waiting for them. Not a
			// watch's: that is how long it was held, not worked on, and
			// it would crowd every count out of the busiest.
			if labels["verb"] != "WATCH" {
				counts["ms serving "+key] += 1000 * v
			}
			continue
		}
		counts[key+" "+labels["code"]] += v
	}
	return counts, sc.Err()
}

// parseLabels parses a Prometheus label set: a="x",b="y".
func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		name, rest := s[:eq], s[eq+2:]
		var value strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			value.WriteByte(rest[i])
		}
		labels[name] = value.String()
		s = strings.TrimPrefix(rest[min(i+1, len(rest)):], ",")
	}
	return labels
}

// busiest returns the n largest increases from before to after, as
// "count  VERB resource code" lines.
func busiest(before, after map[string]float64, n int) []string {
	type delta struct {
		key string
		v   float64
	}
	var ds []delta
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			ds = append(ds, delta{k, d})
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].v > ds[j].v || ds[i].v == ds[j].v && ds[i].key < ds[j].key })
	var lines []string
	for _, d := range ds[:min(n, len(ds))] {
		lines = append(lines, fmt.Sprintf("%9.0f  %s", d.v, d.key))
	}
	return lines
}
