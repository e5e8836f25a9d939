// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// recordingLimiter is a real exponential rate limiter that records the
// delays it hands out and the keys it is told to forget.
type recordingLimiter struct {
	workqueue.TypedRateLimiter[string]
	mu     sync.Mutex
	delays map[string][]time.Duration
	forgot map[string]int
}

func newRecordingLimiter() *recordingLimiter {
	return &recordingLimiter{
		TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second),
		delays:           map[string][]time.Duration{},
		forgot:           map[string]int{},
	}
}

func (r *recordingLimiter) When(key string) time.Duration {
	d := r.TypedRateLimiter.When(key)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delays[key] = append(r.delays[key], d)
	return d
}

func (r *recordingLimiter) Forget(key string) {
	r.mu.Lock()
	r.forgot[key]++
	r.mu.Unlock()
	r.TypedRateLimiter.Forget(key)
}

func (r *recordingLimiter) record(key string) ([]time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.delays[key]...), r.forgot[key]
}

// counter counts calls per key.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// testLogger returns a context whose logger keeps every entry, up to V(4).
func testLogger(t *testing.T) (context.Context, ktesting.Buffer) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4), ktesting.BufferLogs(true)))
	return klog.NewContext(context.Background(), logger), logger.GetSink().(ktesting.Underlier).GetBuffer()
}

// entriesFor returns the log entries whose "key" is key.
func entriesFor(buf ktesting.Buffer, key string) []ktesting.LogEntry {
	var out []ktesting.LogEntry
	for _, e := range buf.Data() {
		if kv(e, "key") == key {
			out = append(out, e)
		}
	}
	return out
}

// kv returns the value of a key/value pair of a log entry, as a string.
func kv(e ktesting.LogEntry, name string) string {
	for i := 0; i+1 < len(e.ParameterKVList); i += 2 {
		if e.ParameterKVList[i] == name {
			return fmt.Sprint(e.ParameterKVList[i+1])
		}
	}
	return ""
}

const failures = 4 // how many times the troublesome key fails before it succeeds

// TestOutcomes checks, for each way processing can fail, that the key is
// retried through the rate limiter with growing delays, forgotten once it
// succeeds, logged as it should be, and counted when it panicked; and that
// a single worker goes on processing the other keys meanwhile (so a panic
// did not end it).
func TestOutcomes(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name string
		// fail makes the troublesome key fail once.
		fail func() (bool, error)
		// wantType, wantMessage and wantVerbosity describe the log
		// entry of each failure.
		wantType      ktesting.LogType
		wantMessage   string
		wantVerbosity int
		wantPanics    float64
	}{{
		name:        "panic",
		fail:        func() (bool, error) { panic("unexpected object shape") },
		wantType:    ktesting.LogError,
		wantMessage: "recovered from a panic while processing a key, will retry with backoff",
		wantPanics:  failures,
	}, {
		name:        "error",
		fail:        func() (bool, error) { return false, errBoom },
		wantType:    ktesting.LogError,
		wantMessage: "processing failed, will retry",
	}, {
		name:          "quiet error",
		fail:          func() (bool, error) { return false, fmt.Errorf("expected: %w", errBoom) },
		wantType:      ktesting.LogInfo,
		wantMessage:   "expected failure, will retry",
		wantVerbosity: 4,
	}, {
		name:          "requeue",
		fail:          func() (bool, error) { return true, nil },
		wantType:      ktesting.LogInfo,
		wantMessage:   "not ready to process yet, will look again with backoff",
		wantVerbosity: 4,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, buf := testLogger(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			name := "test-" + strings.ReplaceAll(tc.name, " ", "-")
			limiter := newRecordingLimiter()
			queue := workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
			defer queue.ShutDown()
			calls := &counter{}
			// The counter is the process's: count from here (go test -count).
			registerMetrics()
			panicsBefore, err := testutil.GetCounterMetricValue(panicsTotal.WithLabelValues(name))
			require.NoError(t, err)
			others := []string{"a", "b", "c", "d", "e", "f", "g", "h"}

			Loop[string]{
				Name:  name,
				Queue: queue,
				Process: func(_ context.Context, key string) (bool, error) {
					if calls.inc(key) <= failures && key == "trouble" {
						return tc.fail()
					}
					return false, nil
				},
				Failure: "processing failed, will retry",
				Quiet:   func(err error) bool { return strings.HasPrefix(err.Error(), "expected") },
			}.Start(ctx, 1)
			queue.Add("trouble")
			for _, k := range others {
				queue.Add(k)
			}

			require.Eventually(t, func() bool {
				_, forgot := limiter.record("trouble")
				return forgot == 1
			}, 10*time.Second, time.Millisecond, "the troublesome key is never processed successfully")
			require.Equal(t, failures+1, calls.get("trouble"), "processed once per failure, plus the success")
			delays, _ := limiter.record("trouble")
			require.Len(t, delays, failures, "each failure goes through the rate limiter")
			for i := 1; i < len(delays); i++ {
				require.Greater(t, delays[i], delays[i-1], "retries back off: %v", delays)
			}
			require.Eventually(t, func() bool {
				for _, k := range others {
					if _, forgot := limiter.record(k); forgot != 1 {
						return false
					}
				}
				return true
			}, 10*time.Second, time.Millisecond, "the other keys are not all processed")
			for _, k := range others {
				delays, _ := limiter.record(k)
				require.Empty(t, delays, "key %s succeeded: it is never rate limited", k)
				require.Equal(t, 1, calls.get(k), "key %s succeeded: it is processed once", k)
			}

			entries := entriesFor(buf, "trouble")
			require.Len(t, entries, failures, "one log entry per failure:\n%s", buf.String())
			for _, e := range entries {
				require.Equal(t, tc.wantType, e.Type)
				require.Equal(t, tc.wantMessage, e.Message)
				require.Equal(t, tc.wantVerbosity, e.Verbosity)
				require.Equal(t, name, kv(e, "queue"))
			}
			if tc.wantPanics > 0 {
				stack := kv(entries[0], "stack")
				require.Contains(t, stack, "worker_test.go", "the stack shows where the panic happened")
				require.Contains(t, entries[0].Err.Error(), "unexpected object shape")
			}
			panics, err := testutil.GetCounterMetricValue(panicsTotal.WithLabelValues(name))
			require.NoError(t, err)
			require.Equal(t, tc.wantPanics, panics-panicsBefore, "panics counted")
		})
	}
}

// TestWorkEndsWithQueue checks that a worker stops when its queue shuts
// down, and that a loop with no Name still works.
func TestWorkEndsWithQueue(t *testing.T) {
	ctx, _ := testLogger(t)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	processed := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop[string]{Queue: queue, Failure: "processing failed", Process: func(_ context.Context, key string) (bool, error) {
			processed <- key
			return false, nil
		}}.Work(ctx)
	}()
	queue.Add("x")
	select {
	case key := <-processed:
		require.Equal(t, "x", key)
	case <-time.After(10 * time.Second):
		t.Fatal("key not processed")
	}
	queue.ShutDown()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Work did not return after its queue shut down")
	}
}

// TestRun: Run starts the informers with a context that names the
// controller, processes nothing until the caches sync, then processes, and
// when ctx is done returns with the queue shut down.
func TestRun(t *testing.T) {
	ctx, buf := testLogger(t)
	ctx, cancel := context.WithCancel(ctx)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	queue.Add("x")
	var synced atomic.Bool
	started := make(chan struct{})
	processed := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop[string]{Name: "test", Queue: queue, Failure: "processing failed", Process: func(_ context.Context, _ string) (bool, error) {
			processed <- synced.Load()
			return false, nil
		}}.Run(ctx, 1, func(ctx context.Context) {
			klog.FromContext(ctx).Info("informers started")
			close(started)
		}, synced.Load)
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("informers not started")
	}
	synced.Store(true)
	select {
	case wasSynced := <-processed:
		require.True(t, wasSynced, "a key processed before the caches synced")
	case <-time.After(10 * time.Second):
		t.Fatal("key not processed")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	require.True(t, queue.ShuttingDown())
	var informers []string
	for _, e := range buf.Data() {
		if e.Message == "informers started" {
			informers = append(informers, kv(ktesting.LogEntry{ParameterKVList: e.WithKVList}, "controller"))
		}
	}
	require.Equal(t, []string{"test"}, informers, "the informers' logger names the controller")
}
