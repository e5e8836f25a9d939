// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/version"
)

var syncTargetsGVR = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")

// heartbeatLoop refreshes the SyncTarget's status every interval, and
// soon after reportSoon asks (at most once a second). A heartbeat reads the
// SyncTarget (from the syncer's own cache of it, self) and writes its status only when
// something in it changed, when the last write is StatusRefresh old, or
// while the tunnel is closed: an open tunnel shows the center the syncer
// is alive (edgev2alpha1.SyncerStatusRefresh), so that a fleet at rest
// costs the datastore no write. A failed heartbeat means the center is
// unreachable: that is said once, the edge is left as it is, and
// heartbeats are retried with backoff and jitter. On the first heartbeat
// after an outage everything is reported again, and the status written.
func (s *Syncer) heartbeatLoop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	backoff := s.heartbeatBackoff()
	for {
		last := time.Now()
		err := s.heartbeat(ctx, !s.connected.Load())
		// Jittered: syncers started together (a site powered up, a
		// server restarted) do not stay in step, every heartbeat of the
		// fleet at the same moment.
		next := wait.Jitter(s.opts.HeartbeatInterval, 0.2)
		switch {
		case err == nil && !s.connected.Load():
			s.connected.Store(true)
			s.progress("reconnected to the center; reporting what changed meanwhile")
			logger.Info("reconnected to the center")
			s.reportAll()
		case apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err) || errors.Is(err, errRetry) ||
			errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && s.tunnelOpen.Load():
			// The center answered: other writers (the server's tunnel
			// condition) were first, more than RetryOnConflict's tries;
			// or it is busy, and says when to come back, or is slow to
			// fill the syncer's cache; or the heartbeat ran out of time
			// (a 429's Retry-After outlasts it) while the tunnel, which
			// the server answers every few seconds, is open. Nothing is
			// lost; the next heartbeat comes after a backoff.
			next = backoff.Step()
		case err != nil && ctx.Err() == nil:
			if s.connected.Load() {
				s.connected.Store(false)
				s.progress("lost the center: %v; the edge keeps running what it has", err)
				logger.Info("lost the center; the edge keeps running what it has", "err", err)
			}
			next = backoff.Step()
		}
		if err == nil {
			backoff = s.heartbeatBackoff()
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

// heartbeat writes the SyncTarget's status if it must (heartbeatLoop
// says when; force: now), reading it again if another writer was first.
//
// It reads the SyncTarget from the syncer's cache, and waits for it (to
// fill at a connect, to catch up after a conflict) as long as the
// heartbeat may take: when 3,000 syncers connect at once, a read from the
// server meanwhile only queues behind the cache's own list (it was three
// reads per edge, each waiting for a seat, some from the datastore). A
// cache that has not filled or caught up is errRetry: the center
// answers, slowly.
func (s *Syncer) heartbeat(ctx context.Context, force bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fresh, read := false, ""
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if read != "" {
			// A conflict: the copy read was behind (at a connect, the
			// server's SyncerConnected condition was first).
			if !s.hasSelf() {
				fresh = true // no cache to wait for: the datastore's copy
			} else if !s.awaitSelfPast(ctx, read) {
				return fmt.Errorf("%w: the cache of SyncTarget %s has not caught up with the server's write", errRetry, s.id.SyncTarget)
			}
		}
		var err error
		read, err = s.writeStatus(ctx, force, fresh)
		return err
	})
}

// awaitSelf waits, within ctx, until the cache of the SyncTarget has
// synced and cond accepts what it holds, looking every selfPoll.
func (s *Syncer) awaitSelf(ctx context.Context, cond func(*unstructured.Unstructured) bool) bool {
	look := func(context.Context) (bool, error) {
		s.mu.Lock()
		self := s.self
		s.mu.Unlock()
		if self == nil {
			return false, errNoCache
		}
		if !self.synced() {
			return false, nil
		}
		obj, ok, _ := self.store().GetByKey(s.id.SyncTarget)
		u, _ := obj.(*unstructured.Unstructured)
		return cond(u) || !ok, nil
	}
	// Nearly always so at once: a look costs no poll's timer.
	if done, err := look(ctx); done || err != nil {
		return err == nil
	}
	return wait.PollUntilContextCancel(ctx, selfPoll, false, look) == nil
}

// selfPoll is how often a heartbeat looks at a cache it waits for: a
// tenth of a second, as client-go's WaitForCacheSync. Every 20 ms, a
// simulator's 2,500 syncers waiting for their caches at a connect spent a
// seventh of its CPU looking.
const selfPoll = 100 * time.Millisecond

// hasSelf says whether the cache of the SyncTarget is started.
func (s *Syncer) hasSelf() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.self != nil
}

var errNoCache = errors.New("no cache of the SyncTarget")

// awaitSelfPast waits until the cache holds a version of the SyncTarget
// other than rv.
func (s *Syncer) awaitSelfPast(ctx context.Context, rv string) bool {
	return s.awaitSelf(ctx, func(u *unstructured.Unstructured) bool { return u != nil && u.GetResourceVersion() != rv })
}

// startSelf starts the cache of the syncer's SyncTarget, from one watch
// of that name (the server's watch cache sends it that SyncTarget's
// events only, and its authorizer allows it no other): a fleet at rest
// costs the server no request per heartbeat. A change of the spec (its
// update windows) or the server's verdict that heartbeats stopped is
// answered soon, not at the next heartbeat; a verdict on a write of the
// last heartbeat interval is left to the next heartbeat (an edge whose
// clock is behind the server's by more than the verdict's grace would
// otherwise write every second). s.mu is held.
func (s *Syncer) startSelf(ctx context.Context) *running {
	name := s.id.SyncTarget
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
	}
	return s.startInformer(ctx, s.inventoryCaches, syncTargetsGVR, byName, nil, cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*unstructured.Unstructured)
			after, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 {
				return
			}
			sinceWrite := s.now().Sub(time.Unix(0, s.wroteAt.Load()))
			if before.GetGeneration() != after.GetGeneration() || missed(after) && !missed(before) && sinceWrite > s.opts.HeartbeatInterval {
				s.reportSoon()
			}
		},
	})
}

// missed says whether the SyncTarget's status shows heartbeatMissed.
func missed(u *unstructured.Unstructured) bool {
	st := &edgev2alpha1.SyncTarget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st); err != nil {
		return false
	}
	return heartbeatMissed(&st.Status)
}

// readSelf reads the SyncTarget, typed. Fresh, from the datastore.
// Otherwise from the syncer's cache, waiting for it to fill (errRetry if
// it does not within ctx); from the server's cache when the syncer has no
// cache yet, or its cache does not hold the SyncTarget.
//
// A version read before is not converted again: nearly every heartbeat
// reads the version the last one read, and has nothing to say. Converting
// it each time (a deep copy of the cache's object, then reflection over
// every field) was a quarter of the CPU of a simulator's thousand
// syncers at rest. It returns the status as sameStatus compares it, too.
func (s *Syncer) readSelf(ctx context.Context, fresh bool) (*edgev2alpha1.SyncTarget, []byte, error) {
	u, err := s.selfObject(ctx, fresh)
	if err != nil {
		return nil, nil, err
	}
	last := s.lastRead
	if last.st != nil && last.uid == u.GetUID() && last.rv != "" && last.rv == u.GetResourceVersion() {
		return last.st.DeepCopy(), last.status, nil
	}
	st := &edgev2alpha1.SyncTarget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st); err != nil {
		return nil, nil, err
	}
	status, err := statusKey(&st.Status)
	if err != nil {
		return nil, nil, err
	}
	s.lastRead = lastRead{uid: st.UID, rv: st.ResourceVersion, st: st.DeepCopy(), status: status}
	return st, status, nil
}

// selfObject reads the SyncTarget as readSelf says, as the cache or the
// server holds it: not to be changed.
func (s *Syncer) selfObject(ctx context.Context, fresh bool) (*unstructured.Unstructured, error) {
	if !fresh && s.hasSelf() {
		if !s.awaitSelf(ctx, func(*unstructured.Unstructured) bool { return true }) {
			return nil, fmt.Errorf("%w: the cache of SyncTarget %s is filling", errRetry, s.id.SyncTarget)
		}
		s.mu.Lock()
		self := s.self
		s.mu.Unlock()
		if self != nil {
			if obj, ok, _ := self.store().GetByKey(s.id.SyncTarget); ok {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					return u, nil
				}
			}
		}
		// Not in the cache: gone, or not yet seen; the center says which.
	}
	opts := metav1.GetOptions{ResourceVersion: "0"}
	if fresh {
		opts.ResourceVersion = ""
	}
	return s.inventory.Resource(syncTargetsGVR).Get(ctx, s.id.SyncTarget, opts)
}

// lastRead is the version of the SyncTarget the heartbeat last read,
// typed (not to be changed), and its status as statusKey gives it.
type lastRead struct {
	uid    types.UID
	rv     string
	st     *edgev2alpha1.SyncTarget
	status []byte
}

// writeStatus writes the SyncTarget's status once, if it must (forced:
// whatever the copy read says). It reads the SyncTarget from the syncer's
// cache; without one, after a conflict (fresh), from the datastore.
// Forced, after an outage, the cache may be behind the
// server: the write then meets a conflict, and the cache catches up (a
// server restarted under 10,000 edges is not asked for 10,000 reads).
// It returns the resourceVersion of the copy it read.
func (s *Syncer) writeStatus(ctx context.Context, force, fresh bool) (string, error) {
	st, beforeKey, err := s.readSelf(ctx, fresh)
	if err != nil {
		return "", err
	}
	read := st.ResourceVersion
	before := st.Status.DeepCopy()
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
	rollouts := s.rollouts
	s.mu.Unlock()
	// The status says the syncer reports its rollouts there from its
	// first write; the reports themselves once computed in this run (the
	// status keeps those it holds until then). Said only with the
	// reports, it was a second write of every SyncTarget at a connect, a
	// second after the first.
	inStatus := !s.reportsInConfig.Load()
	reportRollouts := rollouts.set && inStatus
	if inStatus {
		st.Status.ReportsRollouts = true
	}
	if reportRollouts {
		st.Status.Rollouts = rollouts.reports
	}
	sort.Slice(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		return fmt.Sprint(a.Group, a.Resource, a.Namespace, a.Name) < fmt.Sprint(b.Group, b.Resource, b.Namespace, b.Name)
	})
	total := len(problems)
	if len(problems) > edgev2alpha1.MaxSyncProblems {
		problems = problems[:edgev2alpha1.MaxSyncProblems]
	}
	if s.host == "" {
		s.host, _ = os.Hostname()
	}
	meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: edgev2alpha1.SyncTargetHeartbeat, Status: metav1.ConditionTrue,
		Reason: "Heartbeat", Message: fmt.Sprintf("syncer %s on %s reports changes within %s, and at least every %s", version.Version, s.host, s.opts.HeartbeatInterval, s.opts.StatusRefresh), ObservedGeneration: st.Generation})
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
	report := syncerReport(&st.Status)
	// Nothing new: the copy read says it already, or (a cache behind the
	// syncer's own writes, as a server busy with a fan-out keeps it) this
	// syncer wrote it last, and the server has not said it missed a
	// heartbeat since.
	after, err := statusKey(&st.Status)
	if err != nil {
		return read, err
	}
	unchanged := bytes.Equal(beforeKey, after) ||
		s.lastReport.uid == st.UID && s.lastReport.status != nil && sameStatus(s.lastReport.status, report) && !heartbeatMissed(before)
	if !force && s.tunnelOpen.Load() && s.now().Sub(s.lastStatusWrite) < s.opts.StatusRefresh && unchanged {
		// Nothing to say: the tunnel says the syncer is alive.
		klog.FromContext(ctx).V(4).Info("heartbeat: nothing new to report")
		if reportRollouts {
			s.mu.Lock()
			s.reported = rollouts // the status holds them already
			s.mu.Unlock()
		}
		return read, nil
	}
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("heartbeat: writing the status", "forced", force, "tunnelOpen", s.tunnelOpen.Load(),
			"lastWrite", s.lastStatusWrite, "changed", changedFields(beforeKey, after))
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return read, err
	}
	written, err := s.inventory.Resource(syncTargetsGVR).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return read, err
	}
	if inStatus {
		if kept, _, _ := unstructured.NestedBool(written.Object, "status", "reportsRollouts"); !kept {
			// A server before these reports dropped them: they go in the
			// SyncerConfig's status from now on.
			klog.FromContext(ctx).Info("the center keeps no rollout reports in the SyncTarget's status: reporting in the SyncerConfig's")
			s.reportsInConfig.Store(true)
			s.rolloutsSoon()
		} else if reportRollouts {
			s.mu.Lock()
			s.reported = rollouts
			s.mu.Unlock()
		}
	}
	s.lastStatusWrite = s.now()
	s.wroteAt.Store(s.lastStatusWrite.UnixNano())
	s.lastReport = lastReport{uid: st.UID, status: report}
	s.mu.Lock()
	s.drift.reported(drift)
	s.mu.Unlock()
	return read, nil
}

// sameStatus says whether two statuses say the same, but for the time of
// the heartbeat.
func sameStatus(a, b *edgev2alpha1.SyncTargetStatus) bool {
	x, errA := statusKey(a)
	y, errB := statusKey(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// statusKey is what a status says but for the time of the heartbeat, as
// the server stores it (JSON, to the second), for sameStatus.
func statusKey(st *edgev2alpha1.SyncTargetStatus) ([]byte, error) {
	c := *st // shallow: only the copy's own field is changed
	c.LastSyncerHeartbeatTime = nil
	return json.Marshal(&c)
}

// changedFields names the fields of a status that differ between two
// statusKeys, for the log of a write.
func changedFields(before, after []byte) []string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal(before, &a) != nil || json.Unmarshal(after, &b) != nil {
		return nil
	}
	var out []string
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			out = append(out, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// syncerReport is the part of a SyncTarget's status the syncer reports
// (the fields admission lets it write: server/admission/edge.go), without
// the heartbeat's time and the conditions' transition times.
func syncerReport(st *edgev2alpha1.SyncTargetStatus) *edgev2alpha1.SyncTargetStatus {
	out := &edgev2alpha1.SyncTargetStatus{SyncerVersion: st.SyncerVersion, SyncerMode: st.SyncerMode, SyncerImage: st.SyncerImage,
		Hold: st.Hold, UpdateWindow: st.UpdateWindow, SyncedObjects: st.SyncedObjects, Conflicts: st.Conflicts,
		Problems: st.Problems, Drift: st.Drift, ReportsRollouts: st.ReportsRollouts, Rollouts: st.Rollouts}
	for _, c := range st.Conditions {
		if c.Type == edgev2alpha1.SyncTargetHeartbeat || c.Type == edgev2alpha1.SyncTargetSynced {
			c.LastTransitionTime = metav1.Time{}
			out.Conditions = append(out.Conditions, c)
		}
	}
	return out.DeepCopy()
}

// lastReport is what the heartbeat last wrote of the syncer's own, to
// which SyncTarget (a SyncTarget made again under its name is another).
type lastReport struct {
	uid    types.UID
	status *edgev2alpha1.SyncTargetStatus
}

// heartbeatMissed says whether a status shows the server's verdict that
// the syncer's heartbeats stopped, which only a write of the syncer undoes.
func heartbeatMissed(st *edgev2alpha1.SyncTargetStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, edgev2alpha1.SyncTargetHeartbeat)
	return c != nil && c.Status != metav1.ConditionTrue
}
