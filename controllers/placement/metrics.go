// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"sync"

	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The rollouts' metrics, in the legacy registry that the server's /metrics
// serves (as internal/worker's are): how many Progressive placements are
// in each phase, how long a revision takes to complete, and how many
// destinations fail one. They are counted over every space: /metrics is
// the server admin's, and no label names a space or a placement.
var (
	rolloutPlacements = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Namespace:      "kubestellar",
		Subsystem:      "rollout",
		Name:           "placements",
		Help:           "Progressive EdgePlacements, by the phase of their rollout (Progressing, Paused, Complete).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"phase"})
	rolloutDuration = k8smetrics.NewHistogram(&k8smetrics.HistogramOpts{
		Namespace: "kubestellar",
		Subsystem: "rollout",
		Name:      "duration_seconds",
		Help:      "From the start of a revision's rollout (the change, or the last restart of the server) to its completion.",
		// 1 s to about 9 h.
		Buckets:        k8smetrics.ExponentialBuckets(1, 2, 16),
		StabilityLevel: k8smetrics.ALPHA,
	})
	rolloutFailures = k8smetrics.NewCounter(&k8smetrics.CounterOpts{
		Namespace:      "kubestellar",
		Subsystem:      "rollout",
		Name:           "destination_failures_total",
		Help:           "Destinations found failed (refused by the edge, or not healthy by the progress deadline), once per destination and revision.",
		StabilityLevel: k8smetrics.ALPHA,
	})
	registerMetricsOnce sync.Once
)

func registerMetrics() {
	registerMetricsOnce.Do(func() {
		legacyregistry.MustRegister(rolloutPlacements, rolloutDuration, rolloutFailures)
	})
}
