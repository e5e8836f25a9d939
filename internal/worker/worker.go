// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package worker runs the work loop every controller in kubestellar shares:
// take a key from a rate-limited queue, process it, and requeue or forget it.
//
// The controllers run inside the API server's process, so the loop isolates
// each key: a panic while processing one is recovered, logged with the key
// and the stack, counted in kubestellar_controller_panics_total and retried
// with the queue's backoff, and the other keys go on being processed.
//
// The queues' own metrics (depth, adds, latency, work duration, retries,
// unfinished work, longest running processor) are client-go's: any queue
// made with a Name reports them, through the provider that
// k8s.io/component-base/metrics/prometheus/workqueue sets, on the server's
// /metrics.
package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Loop is the work loop of one queue.
type Loop[K comparable] struct {
	// Name names the queue in logs and in the panics metric: give the
	// queue's own name, so that the metric lines up with client-go's.
	Name string
	// Queue holds the keys. Its rate limiter spaces the retries of a key.
	Queue workqueue.TypedRateLimitingInterface[K]
	// Process handles one key. An error is a failure: logged (with
	// Failure) and retried with backoff. requeue, without an error, asks
	// to look again later, also with backoff, without it being a failure
	// (a cache the key needs has not synced yet). Neither forgets the
	// key's backoff; success does. A wait that is a deadline rather than
	// a retry (look again at a given time) is the process's own
	// Queue.AddAfter.
	Process func(ctx context.Context, key K) (requeue bool, err error)
	// Failure is the message an error is logged with, such as
	// "scheduling failed, will retry".
	Failure string
	// Quiet, when set, says which errors are expected (a conflict, when
	// the cache will deliver the newer object): those are logged at V(4)
	// only. A panic is never quiet.
	Quiet func(error) bool
}

// Run is the whole of a controller's Run for a controller with one queue:
// it names the controller in ctx's logger, logs its start and stop, calls
// start (when given: it starts the controller's informers) with that
// context, waits for synced, runs workers until ctx is done, and shuts the
// queue down.
func (l Loop[K]) Run(ctx context.Context, workers int, start func(context.Context), synced ...cache.InformerSynced) {
	defer utilruntime.HandleCrash()
	defer l.Queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", l.Name)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("starting controller")
	defer logger.Info("stopped controller")
	if start != nil {
		start(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	l.Start(ctx, workers)
	<-ctx.Done()
}

// Start starts workers goroutines on the queue. They stop when it shuts down.
func (l Loop[K]) Start(ctx context.Context, workers int) {
	registerMetrics()
	// The series exists from the start, at 0, so that an alert on its
	// increase needs no special case for a controller that never panicked.
	panicsTotal.WithLabelValues(l.name()).Add(0)
	for range workers {
		go l.Work(ctx)
	}
}

// Work processes keys until the queue shuts down, in the calling goroutine:
// for callers that run and wait for their workers themselves (the syncer).
func (l Loop[K]) Work(ctx context.Context) {
	registerMetrics()
	for l.processNext(ctx) {
	}
}

// Conflicts are expected errors: another writer was first, or a cache is
// behind the server (an update from an old version, a create of what the
// cache does not show yet). The retry reads the newer object.
func Conflicts(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

func (l Loop[K]) name() string {
	if l.Name == "" {
		return "unnamed"
	}
	return l.Name
}

// processNext processes one key; it returns false once the queue shuts down.
func (l Loop[K]) processNext(ctx context.Context) bool {
	key, shutdown := l.Queue.Get()
	if shutdown {
		return false
	}
	defer l.Queue.Done(key)
	logger := klog.FromContext(ctx)
	requeue, err := l.process(ctx, key)
	var recovered *panicError
	switch {
	case errors.As(err, &recovered):
		// Logged with its stack where it was recovered.
		l.Queue.AddRateLimited(key)
	case err != nil:
		if l.Quiet != nil && l.Quiet(err) {
			logger.V(4).Info("expected failure, will retry", "queue", l.name(), "key", key, "err", err.Error())
		} else {
			logger.Error(err, l.Failure, "queue", l.name(), "key", key)
		}
		l.Queue.AddRateLimited(key)
	case requeue:
		logger.V(4).Info("not ready to process yet, will look again with backoff", "queue", l.name(), "key", key,
			"requeues", l.Queue.NumRequeues(key))
		l.Queue.AddRateLimited(key)
	default:
		l.Queue.Forget(key)
	}
	return true
}

// process runs Process on one key, turning a panic into a *panicError
// after logging and counting it.
func (l Loop[K]) process(ctx context.Context, key K) (requeue bool, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		panicsTotal.WithLabelValues(l.name()).Inc()
		err = &panicError{value: r}
		klog.FromContext(ctx).Error(err, "recovered from a panic while processing a key, will retry with backoff",
			"queue", l.name(), "key", key, "requeues", l.Queue.NumRequeues(key), "stack", string(debug.Stack()))
	}()
	return l.Process(ctx, key)
}

// panicError is a panic recovered from Process.
type panicError struct{ value any }

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v [recovered]", e.value) }

// panicsTotal is registered in the legacy registry because that is what
// the API server's /metrics serves (client-go's queue metrics are there
// too); it is the one piece of package state, as metrics must be.
var (
	panicsTotal = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Namespace:      "kubestellar",
		Subsystem:      "controller",
		Name:           "panics_total",
		Help:           "Panics recovered while processing a work-queue item, by queue name. Each one is logged with its key and stack, and the key retried with backoff.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"name"})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(panicsTotal) })
}
