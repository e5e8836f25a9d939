// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/version"
)

var syncTargetsGVR = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")

// heartbeatLoop refreshes the SyncTarget's status every interval, and
// soon after reportSoon asks (at most once a second). A failed heartbeat
// means the center is unreachable: that is said once, the edge is left as
// it is, and heartbeats are retried with backoff and jitter. On the first
// heartbeat after an outage everything is reported again.
func (s *Syncer) heartbeatLoop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	backoff := s.heartbeatBackoff()
	for {
		last := time.Now()
		err := s.heartbeat(ctx)
		next := s.opts.HeartbeatInterval
		switch {
		case err == nil && !s.connected.Load():
			s.connected.Store(true)
			backoff = s.heartbeatBackoff()
			s.progress("reconnected to the center; reporting what changed meanwhile")
			logger.Info("reconnected to the center")
			s.reportAll()
		case err != nil && ctx.Err() == nil:
			if s.connected.Load() {
				s.connected.Store(false)
				s.progress("lost the center: %v; the edge keeps running what it has", err)
				logger.Info("lost the center; the edge keeps running what it has", "err", err)
			}
			next = backoff.Step()
		}
		var soon <-chan struct{}
		if s.connected.Load() {
			soon = s.statusNow
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		case <-soon:
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(last.Add(time.Second))):
			}
		}
	}
}

// reportSoon asks for the SyncTarget's status to be written soon rather
// than at the next heartbeat.
func (s *Syncer) reportSoon() {
	select {
	case s.statusNow <- struct{}{}:
	default:
	}
}

func (s *Syncer) heartbeatBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: s.opts.HeartbeatInterval}
}

// reportAll queues every copy for reporting.
func (s *Syncer) reportAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.desired {
		s.reportQ.Add(k)
	}
}

// heartbeat writes the SyncTarget's status, reading it again if another
// writer was first.
func (s *Syncer) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return s.writeStatus(ctx) })
}

// writeStatus writes the SyncTarget's status once.
func (s *Syncer) writeStatus(ctx context.Context) error {
	rc := s.inventory.Resource(syncTargetsGVR)
	u, err := rc.Get(ctx, s.id.SyncTarget, metav1.GetOptions{})
	if err != nil {
		return err
	}
	st := &edgev2alpha1.SyncTarget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st); err != nil {
		return err
	}
	now := metav1.Now()
	s.mu.Lock()
	synced := int32(len(s.inStep))
	var conflicts int32
	problems := make([]edgev2alpha1.SyncProblem, 0, len(s.problems))
	for k, p := range s.problems {
		if p.Reason == edgev2alpha1.SyncReasonConflict {
			conflicts++
		}
		problems = append(problems, edgev2alpha1.SyncProblem{Group: k.GVR.Group, Resource: k.GVR.Resource,
			Namespace: k.Namespace, Name: k.Name, Reason: p.Reason, Message: p.Message})
	}
	// The count goes on from what the status says, across restarts.
	drift := s.drift.apply(&st.Status)
	s.mu.Unlock()
	sort.Slice(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		return fmt.Sprint(a.Group, a.Resource, a.Namespace, a.Name) < fmt.Sprint(b.Group, b.Resource, b.Namespace, b.Name)
	})
	total := len(problems)
	if len(problems) > edgev2alpha1.MaxSyncProblems {
		problems = problems[:edgev2alpha1.MaxSyncProblems]
	}
	host, _ := os.Hostname()
	meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: edgev2alpha1.SyncTargetHeartbeat, Status: metav1.ConditionTrue,
		Reason: "Heartbeat", Message: fmt.Sprintf("syncer %s on %s reports every %s", version.Version, host, s.opts.HeartbeatInterval), ObservedGeneration: st.Generation})
	cond := metav1.Condition{Type: edgev2alpha1.SyncTargetSynced, Status: metav1.ConditionTrue, Reason: "InStep",
		Message: fmt.Sprintf("%d objects in step", synced), ObservedGeneration: st.Generation}
	if total > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, problems[0].Reason
		cond.Message = fmt.Sprintf("%d objects cannot be kept in step; first: %s %s/%s: %s", total, problems[0].Resource, problems[0].Namespace, problems[0].Name, problems[0].Message)
	}
	meta.SetStatusCondition(&st.Status.Conditions, cond)
	st.Status.LastSyncerHeartbeatTime = &now
	st.Status.SyncerVersion = version.Version
	st.Status.SyncerMode, st.Status.SyncerImage = s.where(ctx)
	s.setWindows(ctx, st.Spec.UpdateWindows)
	st.Status.Hold = s.holdStatus()
	st.Status.UpdateWindow = s.windowStatus()
	st.Status.SyncedObjects = synced
	st.Status.Conflicts = conflicts
	st.Status.Problems = problems
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return err
	}
	if _, err = rc.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return err
	}
	s.mu.Lock()
	s.drift.reported(drift)
	s.mu.Unlock()
	return nil
}
