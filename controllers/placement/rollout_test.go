// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/statuscel"
	"github.com/kubestellar/kubestellar/spaces"
)

// fleet is a rollout's destinations, by name, for step.
type fleet map[string]*rolloutDest

func newFleet(waves map[string]int) fleet {
	f := fleet{}
	for name, w := range waves {
		f[name] = &rolloutDest{key: "inv|" + name, name: "inv/" + name, wave: w, message: "its mailbox does not hold the revision yet"}
	}
	return f
}

// list is the fleet sorted by name, as reconcileRollout gives it.
func (f fleet) list() []*rolloutDest {
	var out []*rolloutDest
	for _, d := range f {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// take makes the admitted destinations hold the revision, healthy or not.
func (f fleet) take(admit []string, healthy bool) {
	for _, k := range admit {
		for _, d := range f {
			if d.key == k {
				d.updated, d.healthy = true, healthy
				if !healthy {
					d.message = "1 of 2 replicas updated"
				}
			}
		}
	}
}

func names(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k[len("inv|"):]
	}
	return out
}

func TestRolloutStep(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	waves := []edgev2alpha1.RolloutWave{{Name: "canary", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}}
	one := intstr.FromInt32(1)
	half := intstr.FromString("50%")

	t.Run("waves in order, maxConcurrency within a wave, minSuccessTime before the next", func(t *testing.T) {
		ro := &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive, Waves: waves, MaxConcurrency: &half, MinSuccessTime: &metav1.Duration{Duration: 2 * time.Minute}}
		f := newFleet(map[string]int{"c1": 0, "e1": 1, "e2": 1, "e3": 1, "e4": 1})
		s := &rolloutState{revision: "r2", started: t0, admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}}
		admit, _ := s.step(ro, f.list(), t0)
		require.Equal(t, []string{"c1"}, names(admit), "the canary alone")
		require.Equal(t, edgev2alpha1.RolloutPhaseProgressing, s.status.Phase)
		require.Equal(t, "canary", s.status.CurrentWave)

		f.take(admit, true)
		admit, requeue := s.step(ro, f.list(), t0.Add(time.Second))
		require.Empty(t, admit, "the canary is healthy, not for minSuccessTime yet")
		require.Equal(t, 2*time.Minute, requeue)

		admit, _ = s.step(ro, f.list(), t0.Add(2*time.Minute+time.Second))
		require.Equal(t, []string{"e1", "e2"}, names(admit), "half of the last wave at once")
		require.Equal(t, lastWaveName, s.status.CurrentWave)

		f.take(admit[:1], true)
		admit, _ = s.step(ro, f.list(), t0.Add(3*time.Minute))
		require.Empty(t, admit, "e1 healthy since now, e2 updating: two in flight")
		admit, _ = s.step(ro, f.list(), t0.Add(5*time.Minute+time.Second))
		require.Equal(t, []string{"e3"}, names(admit), "e1 done: a slot")

		f.take([]string{"inv|e2", "inv|e3"}, true)
		admit, _ = s.step(ro, f.list(), t0.Add(6*time.Minute))
		require.Empty(t, admit, "e2 and e3 healthy, in flight until minSuccessTime")
		admit, _ = s.step(ro, f.list(), t0.Add(8*time.Minute))
		require.Equal(t, []string{"e4"}, names(admit))
		f.take(admit, true)
		s.step(ro, f.list(), t0.Add(9*time.Minute))
		require.Equal(t, edgev2alpha1.RolloutPhaseProgressing, s.status.Phase, "not before minSuccessTime")
		s.step(ro, f.list(), t0.Add(11*time.Minute))
		require.Equal(t, edgev2alpha1.RolloutPhaseComplete, s.status.Phase)
		require.Equal(t, "r2", s.status.CompletedRevision)
		require.True(t, s.complete)
	})

	t.Run("past the deadline a destination fails; past maxFailures the rollout pauses and names it", func(t *testing.T) {
		ro := &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive, Waves: waves, MaxConcurrency: &one,
			ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}
		f := newFleet(map[string]int{"c1": 0, "e1": 1, "e2": 1})
		s := &rolloutState{revision: "r2", completed: "r1", admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}}
		admit, _ := s.step(ro, f.list(), t0)
		f.take(admit, false)
		admit, requeue := s.step(ro, f.list(), t0.Add(time.Minute))
		require.Empty(t, admit)
		require.Equal(t, 4*time.Minute, requeue, "looked at again at the deadline")
		admit, _ = s.step(ro, f.list(), t0.Add(5*time.Minute))
		require.Empty(t, admit, "no more destinations after a failure past maxFailures (0)")
		require.Equal(t, edgev2alpha1.RolloutPhasePaused, s.status.Phase)
		require.Contains(t, s.status.Message, "1 destinations failed, more than maxFailures (0): inv/c1")
		require.Equal(t, []edgev2alpha1.RolloutDestination{{SyncTarget: "inv/c1", Wave: "canary", State: edgev2alpha1.RolloutStateFailed,
			Message: "not healthy within the progress deadline (5m0s): 1 of 2 replicas updated"}}, s.status.Destinations)
		require.Equal(t, "r1", s.status.CompletedRevision)

		// maxFailures 1 lets it go on; an edge's refusal is a failure too.
		ro.MaxFailures = 1
		admit, _ = s.step(ro, f.list(), t0.Add(6*time.Minute))
		require.Equal(t, []string{"e1"}, names(admit))
		f.take(admit, true)
		f["e1"].problem = "configmaps default/cm: Conflict: the edge cluster already has it"
		admit, _ = s.step(ro, f.list(), t0.Add(7*time.Minute))
		require.Empty(t, admit)
		require.Equal(t, edgev2alpha1.RolloutPhasePaused, s.status.Phase)
		require.Contains(t, s.status.Message, "inv/c1, inv/e1")
	})

	t.Run("paused by hand admits nothing; resumed, it goes on where it stopped", func(t *testing.T) {
		ro := &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive, Waves: waves, MaxConcurrency: &one}
		f := newFleet(map[string]int{"c1": 0, "e1": 1})
		s := &rolloutState{revision: "r2", admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}}
		admit, _ := s.step(ro, f.list(), t0)
		f.take(admit, true)
		ro.Paused = true
		admit, _ = s.step(ro, f.list(), t0.Add(time.Minute))
		require.Empty(t, admit)
		require.Equal(t, edgev2alpha1.RolloutPhasePaused, s.status.Phase)
		require.Equal(t, "paused by spec.rollout.paused", s.status.Message)
		ro.Paused = false
		admit, _ = s.step(ro, f.list(), t0.Add(2*time.Minute))
		require.Equal(t, []string{"e1"}, names(admit))
	})

	t.Run("an edge that cannot take a change waits (Wait) or is passed (Skip); it is never failed for it", func(t *testing.T) {
		for _, policy := range []edgev2alpha1.DisconnectedPolicy{"", edgev2alpha1.DisconnectedSkip} {
			ro := &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive, Waves: waves, Disconnected: policy,
				ProgressDeadline: &metav1.Duration{Duration: time.Minute}}
			f := newFleet(map[string]int{"c1": 0, "c2": 0, "e1": 1})
			f["c2"].waiting = edgev2alpha1.RolloutStateWaitingWindow
			s := &rolloutState{revision: "r2", admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}}
			admit, _ := s.step(ro, f.list(), t0)
			require.Equal(t, []string{"c1"}, names(admit), "%q: the edge outside its window is not admitted", policy)
			f.take(admit, true)
			admit, _ = s.step(ro, f.list(), t0.Add(time.Hour))
			require.Equal(t, []edgev2alpha1.RolloutDestination{{SyncTarget: "inv/c2", Wave: "canary", State: edgev2alpha1.RolloutStateWaitingWindow}}, s.status.Destinations)
			if policy == edgev2alpha1.DisconnectedSkip {
				require.Equal(t, []string{"e1"}, names(admit), "Skip: the next wave goes on")
				f.take(admit, true)
				s.step(ro, f.list(), t0.Add(2*time.Hour))
				require.Equal(t, edgev2alpha1.RolloutPhaseComplete, s.status.Phase, "Skip: complete; the skipped edge takes it when it can")
			} else {
				require.Empty(t, admit, "Wait: the wave waits for the window")
				require.Equal(t, "wave canary: waiting for inv/c2 (Waiting (window))", s.status.Message)
				f["c2"].waiting = ""
				admit, _ = s.step(ro, f.list(), t0.Add(2*time.Hour))
				require.Equal(t, []string{"c2"}, names(admit), "the window opens: its turn")
			}
		}
	})

	t.Run("paused, a rollout whose edges are all skipped does not complete (which would admit them)", func(t *testing.T) {
		ro := &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive, Disconnected: edgev2alpha1.DisconnectedSkip, Paused: true}
		f := newFleet(map[string]int{"e1": 0})
		f["e1"].waiting = edgev2alpha1.RolloutStateDisconnected
		s := &rolloutState{revision: "r2", completed: "r1", admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}}
		s.step(ro, f.list(), t0)
		require.False(t, s.complete)
		require.Equal(t, "r1", s.status.CompletedRevision)
		ro.Paused = false
		s.step(ro, f.list(), t0)
		require.True(t, s.complete)
	})

	t.Run("after a restart, who holds the revision is admitted and its clocks start again", func(t *testing.T) {
		ro := &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive, Waves: waves, MaxConcurrency: &one,
			MinSuccessTime: &metav1.Duration{Duration: time.Minute}}
		f := newFleet(map[string]int{"c1": 0, "e1": 1, "e2": 1})
		f.take([]string{"inv|c1", "inv|e1"}, true)
		s := &rolloutState{revision: "r2", admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}}
		admit, _ := s.step(ro, f.list(), t0)
		require.Empty(t, admit, "e1 is in flight until healthy for a minute from now")
		admit, _ = s.step(ro, f.list(), t0.Add(time.Minute))
		require.Equal(t, []string{"e2"}, names(admit))
	})

	t.Run("a complete revision admits a joiner at once", func(t *testing.T) {
		tracker := newRolloutTracker()
		ro := &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
		f := newFleet(map[string]int{"e1": 0})
		s := &rolloutState{revision: "r2", admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}}
		tracker.byPlacement["wds|p"] = s
		admit, _ := s.step(ro, f.list(), t0)
		f.take(admit, true)
		s.step(ro, f.list(), t0)
		require.True(t, s.complete)
		require.True(t, tracker.admits("wds|p", "inv|joiner", "r2"))
		require.False(t, tracker.admits("wds|p", "inv|joiner", "r3"), "never a revision the rollout has not seen")
		f["joiner"] = &rolloutDest{key: "inv|joiner", name: "inv/joiner"}
		s.step(ro, f.list(), t0)
		require.Equal(t, edgev2alpha1.RolloutPhaseComplete, s.status.Phase)
	})
}

func TestConcurrency(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	n := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	for _, tc := range []struct {
		v    *intstr.IntOrString
		size int
		want int
	}{{nil, 7, 7}, {nil, 0, 1}, {pct("10%"), 7, 1}, {pct("10%"), 25, 3}, {pct("100%"), 4, 4}, {n(2), 9, 2}, {n(0), 9, 1}} {
		require.Equal(t, tc.want, concurrency(tc.v, tc.size), "%v of %d", tc.v, tc.size)
	}
}

// TestHealthCheck: a placement's CEL test sees the object as its edge
// reports it (the edge's generation, the WDS's spec, the edge's status),
// and anything but true (false, a field not reported yet, a cost past the
// limit) is not healthy, with why.
func TestHealthCheck(t *testing.T) {
	comp, err := statuscel.NewCompiler()
	require.NoError(t, err)
	cp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "labels": map[string]any{"edge.kubestellar.io/placement-copy": "true"}},
		"status":   map[string]any{"observedGeneration": int64(4), "readyReplicas": int64(2)}}}
	source := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(2)}}}
	applied := edgev2alpha1.Applied{Revision: "r", Generation: 4}
	for expr, want := range map[string]string{
		"obj.kind == 'Deployment' && obj.status.observedGeneration == obj.metadata.generation && obj.status.readyReplicas == obj.spec.replicas": "",
		"obj.status.readyReplicas > obj.spec.replicas": "spec.rollout.healthCheck.cel is not true",
		"obj.status.notReported == 1":                  "spec.rollout.healthCheck.cel is not true",
		"'not a bool'":                                 "spec.rollout.healthCheck.cel is not true",
	} {
		eval, done := comp.NewEvaluation(context.Background())
		h := &healthCheck{expr: edgev2alpha1.Expression(expr), eval: eval}
		require.Equal(t, want, h.run(crossspace.Record(cp), source, applied), expr)
		done()
	}
	small, err := statuscel.NewCompilerWithLimits(statuscel.Limits{Evaluation: 10, Summary: 10, Expression: 1 << 40, Collector: 1 << 40, Timeout: time.Second}, 8)
	require.NoError(t, err)
	eval, done := small.NewEvaluation(context.Background())
	defer done()
	h := &healthCheck{expr: "[1,2,3,4,5,6,7,8,9,10].all(x, [1,2,3,4,5,6,7,8,9,10].all(y, x*y > 0))", eval: eval}
	require.Contains(t, h.run(crossspace.Record(cp), source, applied), "exceeded the cost limit")
}

// TestInspectReport: a destination whose syncer reports rollouts is
// updated when its SyncerConfig records the revision, and healthy when
// its syncer's report on that very record (revision and digest) says so.
func TestInspectReport(t *testing.T) {
	record := edgev2alpha1.RolloutRecord{Placement: "wds1/p", Revision: "r2", Digest: "d2"}
	report := func(mutate func(*edgev2alpha1.RolloutReport)) []edgev2alpha1.RolloutReport {
		r := edgev2alpha1.RolloutReport{Placement: "wds1/p", Revision: "r2", Digest: "d2", Applied: true, Healthy: true}
		mutate(&r)
		return []edgev2alpha1.RolloutReport{{Placement: "wds1/q", Revision: "r2", Digest: "d2", Healthy: true}, r}
	}
	same := func(*edgev2alpha1.RolloutReport) {}
	for _, tc := range []struct {
		name             string
		records          []edgev2alpha1.RolloutRecord
		reports          []edgev2alpha1.RolloutReport
		updated, healthy bool
		message, problem string
	}{
		{name: "no record", message: "its mailbox does not hold the revision yet"},
		{name: "the previous revision", records: []edgev2alpha1.RolloutRecord{{Placement: "wds1/p", Revision: "r1", Digest: "d1"}}, reports: report(same),
			message: "its mailbox does not hold the revision yet"},
		{name: "not reported yet", records: []edgev2alpha1.RolloutRecord{record}, updated: true, message: "its syncer has not reported on the revision yet"},
		{name: "reported on other copies", records: []edgev2alpha1.RolloutRecord{record}, reports: report(func(r *edgev2alpha1.RolloutReport) { r.Digest = "d1" }),
			updated: true, message: "its syncer has not reported on the revision yet"},
		{name: "healthy", records: []edgev2alpha1.RolloutRecord{record}, reports: report(same), updated: true, healthy: true},
		{name: "waiting", records: []edgev2alpha1.RolloutRecord{record}, reports: report(func(r *edgev2alpha1.RolloutReport) {
			r.Healthy, r.Message = false, "deployments.apps shop/web: 1 of 2 replicas available"
		}), updated: true, message: "deployments.apps shop/web: 1 of 2 replicas available"},
		{name: "refused", records: []edgev2alpha1.RolloutRecord{record}, reports: report(func(r *edgev2alpha1.RolloutReport) {
			r.Applied, r.Healthy, r.Problem = false, false, "configmaps shop/x: Refused: too big"
		}), updated: true, problem: "configmaps shop/x: Refused: too big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &rolloutDest{}
			inspectReport(d, tc.records, tc.reports, "wds1/p", "r2")
			require.Equal(t, tc.updated, d.updated, "updated")
			require.Equal(t, tc.healthy, d.healthy, "healthy")
			require.Equal(t, tc.message, d.message)
			require.Equal(t, tc.problem, d.problem)
		})
	}
}

// TestReportsWithTheHeartbeat: a syncer that reports in its SyncTarget's
// status is read there, not in its SyncerConfig's (where it may have
// left reports before an upgrade); one that reports in its SyncerConfig
// is read there; a change of the SyncTarget's reports moves the
// placements they speak of on, and reads that mailbox again.
func TestReportsWithTheHeartbeat(t *testing.T) {
	informer := func() *crossspace.Informer {
		return &crossspace.Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})}
	}
	c := &Controller{syncerConfigs: informer(), rolls: newRolloutTracker(),
		rollouts: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	t.Cleanup(c.rollouts.ShutDown)
	const mailbox = "inv1-mb-1"
	record := edgev2alpha1.RolloutRecord{Placement: "wds1/p", Revision: "r2", Digest: "d2"}
	healthy := edgev2alpha1.RolloutReport{Placement: "wds1/p", Revision: "r2", Digest: "d2", Applied: true, Healthy: true}
	stale := edgev2alpha1.RolloutReport{Placement: "wds1/p", Revision: "r2", Digest: "d2", Applied: true, Message: "on its way"}
	st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge1", Annotations: map[string]string{spaces.Annotation: "inv1"}},
		Status: edgev2alpha1.SyncTargetStatus{MailboxSpace: mailbox}}
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{spaces.Annotation: "wds1"}},
		Spec: edgev2alpha1.EdgePlacementSpec{Rollout: &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}}}
	look := func(st *edgev2alpha1.SyncTarget) (*rolloutDest, bool) {
		d := &rolloutDest{}
		return d, c.inspect(context.Background(), d, st, mailbox, ep, "r2", nil)
	}

	// Reports with the heartbeat, but no SyncerConfig read yet: not ready.
	withReports := st.DeepCopy()
	withReports.Status.ReportsRollouts, withReports.Status.Rollouts = true, []edgev2alpha1.RolloutReport{healthy}
	d, ok := look(withReports)
	require.False(t, ok)
	require.Equal(t, "its mailbox is not ready", d.message)

	cfg := &edgev2alpha1.SyncerConfig{ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName, Annotations: map[string]string{spaces.Annotation: mailbox}},
		Spec:   edgev2alpha1.SyncerConfigSpec{Rollouts: []edgev2alpha1.RolloutRecord{record}},
		Status: edgev2alpha1.SyncerConfigStatus{ReportsRollouts: true, Rollouts: []edgev2alpha1.RolloutReport{stale}}}
	require.NoError(t, c.syncerConfigs.Add(cfg))
	d, ok = look(withReports)
	require.True(t, ok)
	require.True(t, d.updated && d.healthy, "the SyncTarget's report, not the SyncerConfig's: %+v", d)

	d, ok = look(st)
	require.True(t, ok)
	require.True(t, d.updated)
	require.False(t, d.healthy, "a syncer that reports in its SyncerConfig is read there")
	require.Equal(t, "on its way", d.message)

	// A heartbeat that changes nothing of the reports moves nothing.
	beat := withReports.DeepCopy()
	beat.Status.SyncedObjects = 3
	c.reportsChanged(withReports, beat)
	require.Zero(t, c.rollouts.Len())
	// One that changes a report moves its placement on, and has it read
	// this mailbox again.
	changed := beat.DeepCopy()
	changed.Status.Rollouts = []edgev2alpha1.RolloutReport{stale}
	c.reportsChanged(beat, changed)
	require.Equal(t, 1, c.rollouts.Len())
	key, _ := c.rollouts.Get()
	c.rollouts.Done(key)
	require.Equal(t, spaces.Key("wds1", "", "p"), key)
	touched := c.rolls.takeTouched(key)
	require.True(t, touched[mailbox])

	// A syncer that flips where it reports, a hundred times in a row (a
	// compromised or broken edge): its placement was just looked at, so
	// the flood waits out the spacing as one look, not a hundred.
	c.rolls.paced.Looked(key)
	prev := changed
	for i := 0; i < 100; i++ {
		next := prev.DeepCopy()
		next.Status.ReportsRollouts = !prev.Status.ReportsRollouts
		c.reportsChanged(prev, next)
		prev = next
	}
	require.Zero(t, c.rollouts.Len(), "the flood waits out the spacing")
	require.Equal(t, map[string]bool{mailbox: true}, c.rolls.takeTouched(key))
	require.Eventually(t, func() bool { return c.rollouts.Len() == 1 }, 10*time.Second, 10*time.Millisecond,
		"one look after the spacing")
}

// TestSeeDestinations: what a look derives of each destination is kept
// while its SyncTarget is the same object and the placement's waves are
// those of the same generation, and derived again when either changes (a
// SyncTarget relabelled moves to another wave, one whose syncer left
// waits); destinations gone are forgotten, and those whose SyncTarget is
// another incarnation are left out.
func TestSeeDestinations(t *testing.T) {
	target := func(name, ring string, connected bool) *edgev2alpha1.SyncTarget {
		st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"ring": ring}}}
		if connected {
			st.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: metav1.ConditionTrue}}
		}
		return st
	}
	cache := map[string]*edgev2alpha1.SyncTarget{
		"b": target("b", "canary", true), "a": target("a", "late", true), "c": target("c", "late", true),
	}
	get := func(space, name string) (*edgev2alpha1.SyncTarget, bool) {
		st, ok := cache[name]
		return st, ok && space == "inv"
	}
	dests := func(names ...string) []edgev2alpha1.SinglePlacement {
		var out []edgev2alpha1.SinglePlacement
		for _, n := range names {
			out = append(out, edgev2alpha1.SinglePlacement{Space: "inv", SyncTargetName: n, SyncTargetUID: types.UID("uid-" + n), LocationName: "loc-" + n})
		}
		return out
	}
	waves := []labels.Selector{labels.SelectorFromSet(labels.Set{"ring": "canary"})}
	type seenAs struct {
		name, mailbox, waiting string
		wave                   int
	}
	see := func(seen map[string]*seenDest, generation int64, names ...string) ([]seenAs, string) {
		got, first := seeDestinations(seen, dests(names...), get, waves, generation)
		var out []seenAs
		for _, d := range got {
			out = append(out, seenAs{d.name, d.mailbox, d.waiting, d.wave})
		}
		return out, first
	}
	mb := func(name string) string { return spaces.MailboxName("inv", "uid-"+name) }

	seen := map[string]*seenDest{}
	got, first := see(seen, 1, "c", "b", "a")
	require.Equal(t, []seenAs{{"inv/a", mb("a"), "", 1}, {"inv/b", mb("b"), "", 0}, {"inv/c", mb("c"), "", 1}}, got)
	require.Equal(t, "loc-a", first, "the Location of the first once sorted")
	kept := seen["inv|a"]

	// Unchanged: the same derivation, not made again.
	see(seen, 1, "a", "b", "c")
	require.Same(t, kept, seen["inv|a"])

	// a relabelled into the canary wave and its syncer gone: derived
	// again; c's SyncTarget another incarnation: left out; b gone.
	cache["a"] = target("a", "canary", false)
	cache["c"] = target("c", "late", true)
	cache["c"].UID = "another"
	got, _ = see(seen, 1, "a", "c")
	require.Equal(t, []seenAs{{"inv/a", mb("a"), edgev2alpha1.RolloutStateDisconnected, 0}}, got)
	require.NotSame(t, kept, seen["inv|a"])
	require.Len(t, seen, 1, "what was seen of destinations gone is dropped")

	// A new generation of the placement (its waves may differ): derived
	// again.
	kept = seen["inv|a"]
	waves = nil
	got, _ = see(seen, 2, "a")
	require.Equal(t, []seenAs{{"inv/a", mb("a"), edgev2alpha1.RolloutStateDisconnected, 0}}, got, "no waves: the last wave, 0")
	require.NotSame(t, kept, seen["inv|a"])
}
