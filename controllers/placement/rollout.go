// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/statuscel"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// A Progressive placement's rollout admits its destinations to the
// current revision wave by wave (docs/design/rollouts.md). What it decides
// is kept where it costs nothing more: a destination admitted to a
// revision holds the revision's copies in its mailbox, in the datastore,
// so after a restart the rollout finds who was admitted by reading the
// mailboxes, and the translator (gate) keeps everyone else's copies as
// they are. What is kept in memory only is timing: when a destination was
// admitted (for the progress deadline) and since when it has been healthy
// (for minSuccessTime); a restart starts both clocks again, which can only
// make a rollout wait longer, never skip a check.

// Defaults of spec.rollout.
const (
	defaultProgressDeadline = 10 * time.Minute
	// rolloutResync looks at a rollout in progress again even without
	// news, for the clocks of destinations nobody reports on.
	rolloutResync = 30 * time.Second
	// reportSpacing is the least time between two looks at a rollout for
	// syncers' reports: during a wave hundreds arrive a second, and each
	// look goes over every destination. A rollout whose looks take long
	// (a large fleet) is looked at less often, so that its looks take at
	// most lookShare of the time.
	reportSpacing = 200 * time.Millisecond
	lookShare     = 0.05
	// statusSpacing is the least time between two writes of a placement's
	// status for its rollout's progress alone (counts, the destinations
	// listed): while a wave moves, every look has some. A new revision,
	// phase or wave, or a new failure, is written at once.
	statusSpacing = time.Second
	// lastWaveName names the wave of the destinations no wave selects.
	lastWaveName = "rest"
)

// rolloutTracker is what the rollouts decided, per placement key.
type rolloutTracker struct {
	mu          sync.Mutex
	byPlacement map[string]*rolloutState
	// touched are, per placement, the mailboxes where a copy of it
	// changed since its rollout last looked: only theirs are read again.
	touched map[string]map[string]bool
	// paced spaces the looks at a rollout for its copies' news.
	paced *worker.Pacer[string]
	// seen is, per placement, what its rollout's last look derived from
	// each destination's SyncTarget; only its rollout's worker reads and
	// writes a placement's.
	seen map[string]map[string]*seenDest
	// written spaces the writes of a placement's status for its rollout's
	// progress.
	written *worker.Pacer[string]
}

func newRolloutTracker() *rolloutTracker {
	return &rolloutTracker{byPlacement: map[string]*rolloutState{}, touched: map[string]map[string]bool{},
		paced: worker.NewSharePacer[string](reportSpacing, lookShare), written: worker.NewPacer[string](statusSpacing),
		seen: map[string]map[string]*seenDest{}}
}

// seenDest is what a look derived from one destination's SyncTarget, kept
// while the SyncTarget and the placement's generation are those it was
// derived from (the caches replace an object they update, never change
// it): a look goes over every destination, and deriving these again was
// half of a look over 1,000.
type seenDest struct {
	st         *edgev2alpha1.SyncTarget
	generation int64
	key, name  string
	mailbox    string
	wave       int
	waiting    string
}

// seenOf returns what the last look at a placement's rollout derived of
// its destinations, for its rollout's worker to read and add to.
func (t *rolloutTracker) seenOf(placement string) map[string]*seenDest {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := t.seen[placement]
	if seen == nil {
		seen = map[string]*seenDest{}
		t.seen[placement] = seen
	}
	return seen
}

// touch records that a copy of a placement changed in a mailbox.
func (t *rolloutTracker) touch(placement, mailbox string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.touched[placement] == nil {
		t.touched[placement] = map[string]bool{}
	}
	t.touched[placement][mailbox] = true
}

// takeTouched returns the mailboxes touched since the last call. A look
// takes them before it reads anything of its destinations: news that
// comes after is the next look's, and none is taken by a look that read
// what came before it.
func (t *rolloutTracker) takeTouched(placement string) map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	touched := t.touched[placement]
	delete(t.touched, placement)
	return touched
}

// inspected returns the destinations' inspections of revision the
// rollout kept (nil: none).
func (t *rolloutTracker) inspected(placement, revision string) map[string]inspection {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byPlacement[placement]; s != nil && s.revision == revision {
		return s.inspected
	}
	return nil
}

// rolloutState is one placement's rollout of one revision.
type rolloutState struct {
	revision  string
	started   time.Time
	completed string // the last revision every destination took
	complete  bool   // this revision is complete: every destination may take it
	// admitted are the destinations admitted to revision, by SyncTarget
	// key, with when.
	admitted     map[string]time.Time
	healthySince map[string]time.Time
	// failed are the destinations failed, with why.
	failed map[string]string
	status *edgev2alpha1.RolloutStatus
	// phase is what the phase gauge counts the placement under ("": not
	// counted yet).
	phase string
	// inspected is what the rollout last read of each destination's
	// mailbox, by SyncTarget key, kept until a copy there changes.
	inspected map[string]inspection
}

// inspection is what inspect read of one destination's mailbox.
type inspection struct {
	mailbox string
	// copies are the keys of the copies read (which a conflict can
	// change within a revision).
	copies string
	// generation is the placement's (its health check) when read.
	generation       int64
	updated, healthy bool
	message, problem string
}

// countPhase moves the placement from the phase gauge's old phase to its
// new one.
func countPhase(from, to string) {
	if from == to {
		return
	}
	if from != "" {
		rolloutPlacements.WithLabelValues(from).Dec()
	}
	if to != "" {
		rolloutPlacements.WithLabelValues(to).Inc()
	}
}

// admits tells the translator whether a destination may take a revision.
func (t *rolloutTracker) admits(placement, destination, revision string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byPlacement[placement]
	if s == nil || s.revision != revision {
		return false
	}
	_, ok := s.admitted[destination]
	return ok || s.complete
}

// completedOf returns the last revision of a placement that completed,
// and whether the rollout has looked at the placement yet.
func (t *rolloutTracker) completedOf(placement string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byPlacement[placement]; s != nil {
		return s.completed, true
	}
	return "", false
}

// statusOf returns what the placement's status.rollout says (nil: none).
func (t *rolloutTracker) statusOf(placement string) *edgev2alpha1.RolloutStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byPlacement[placement]; s != nil && s.status != nil {
		return s.status.DeepCopy()
	}
	return nil
}

func (t *rolloutTracker) forget(placement string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, had := t.byPlacement[placement]
	if had {
		countPhase(s.phase, "")
	}
	delete(t.byPlacement, placement)
	delete(t.touched, placement)
	delete(t.seen, placement)
	return had
}

// seeDestinations returns a placement's destinations whose SyncTargets
// are there (syncTarget), sorted by INVENTORY/NAME, and the Location of
// the first: what seen kept of each is used while its SyncTarget and the
// placement's generation (its waves) are those it was derived from, and
// is derived again otherwise; what seen has of destinations gone is
// dropped.
func seeDestinations(seen map[string]*seenDest, dests []edgev2alpha1.SinglePlacement,
	syncTarget func(space, name string) (*edgev2alpha1.SyncTarget, bool), waves []labels.Selector, generation int64) ([]*seenDest, string) {
	var targets []*seenDest
	var firstName, firstLocation string
	live := make(map[string]bool, len(dests))
	for _, d := range dests {
		st, ok := syncTarget(d.Space, d.SyncTargetName)
		if !ok || st.UID != d.SyncTargetUID || st.DeletionTimestamp != nil {
			continue
		}
		k := spaces.Key(d.Space, "", st.Name)
		t := seen[k]
		if t == nil || t.st != st || t.generation != generation {
			t = &seenDest{st: st, generation: generation, key: k, name: d.Space + "/" + st.Name,
				mailbox: spaces.MailboxName(d.Space, string(st.UID)), wave: len(waves), waiting: edgeWaiting(st)}
			for i, sel := range waves {
				if sel.Matches(labels.Set(st.Labels)) {
					t.wave = i
					break
				}
			}
			seen[k] = t
		}
		live[k] = true
		targets = append(targets, t)
		if len(targets) == 1 || t.name < firstName {
			firstName, firstLocation = t.name, d.LocationName
		}
	}
	for k := range seen {
		if !live[k] {
			delete(seen, k)
		}
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].name < targets[j].name })
	return targets, firstLocation
}

// rolloutDest is what a rollout knows of one destination.
type rolloutDest struct {
	key  string // the SyncTarget's key (the translator's queue key)
	name string // INVENTORY/NAME
	wave int
	// updated: its mailbox holds the revision's copies; healthy: the
	// syncer reports each applied and healthy; message: what it waits for.
	updated, healthy bool
	message          string
	// problem: the edge refused a copy (its syncer's sync error).
	problem string
	// waiting is a RolloutState* when the edge cannot take a change now.
	waiting string
}

// reconcileRollout moves a Progressive placement's rollout on (key: its
// key): it computes the revision, finds where each destination is, admits
// what the waves allow, and records the status.
func (c *Controller) reconcileRollout(ctx context.Context, key string) (bool, error) {
	c.rolls.paced.Looked(key)
	defer func(began time.Time) { c.rolls.paced.Took(key, time.Since(began)) }(time.Now())
	wds, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return false, nil
	}
	ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, wds, "", name)
	if !ok || ep.DeletionTimestamp != nil || !ep.Spec.Progressive() {
		had := c.rolls.forget(key) || (ok && ep.Status.Rollout != nil)
		if had {
			c.statuses.Add(key)
		}
		if had || !ok {
			// A placement gone may have been Progressive before the
			// server last started, and the rollout not have looked at it
			// since: its snapshot goes too.
			return false, c.snaps.drop(ctx, key)
		}
		return false, nil
	}
	logger := klog.FromContext(ctx).WithValues("placement", wds+"/"+name)
	// Each mailbox is read again only when a copy of the placement, its
	// record or its syncer's report changed there since the last look (or
	// the placement did).
	touched := c.rolls.takeTouched(key)
	ro := ep.Spec.Rollout
	waves := make([]labels.Selector, len(ro.Waves))
	for i := range ro.Waves {
		if waves[i], err = metav1.LabelSelectorAsSelector(&ro.Waves[i].Selector); err != nil {
			waves[i] = labels.Nothing() // refused at admission; an old object's selects nothing
		}
	}
	// Each look goes over every destination: what it derives of each is
	// derived once (a comparison of the sort computing the names again
	// was a third of a look over 1,000), and kept for the next looks
	// while its SyncTarget stays the same (seenDest).
	var targets []*seenDest
	var firstLocation string // of targets[0]
	if slice, ok := crossspace.Get[*edgev2alpha1.SinglePlacementSlice](c.slices, wds, "", name); ok {
		targets, firstLocation = seeDestinations(c.rolls.seenOf(key), slice.Destinations, func(space, name string) (*edgev2alpha1.SyncTarget, bool) {
			return crossspace.Get[*edgev2alpha1.SyncTarget](c.syncTargets, space, "", name)
		}, waves, ep.Generation)
	} else {
		clear(c.rolls.seenOf(key))
	}
	revision := ""
	var copies []string // copy keys of the revision
	var sel *selection
	var first placed // targets[0] as a placement's destination
	if len(targets) > 0 {
		// What the placement selects is the same for every destination
		// (only customization differs, which the revision is not over).
		first = placed{source: source{wds: wds, ep: ep}, dest: destination{syncTarget: targets[0].st}}
		if loc, ok := crossspace.Get[*edgev2alpha1.Location](c.locations, crossspace.SpaceOf(targets[0].st), "", firstLocation); ok {
			first.dest.location = loc
		}
		sel = &selection{claims: map[string][]*claim{}, crdNames: map[string]bool{}, upsyncCRDs: map[string]bool{}, problems: map[string][]problem{}, placements: map[string]bool{}}
		if _, synced := c.mailbox.selectFor(ctx, first, sel); !synced {
			return true, nil
		}
		revision = c.mailbox.revisionOf(sel, first.source)
		for _, k := range sortedKeys(sel.claims) {
			for _, cl := range sel.claims[k] {
				if cl.source.same(first.source) && !cl.failed {
					copies = append(copies, k)
					break
				}
			}
		}
	}
	known := c.rolls.inspected(key, revision)
	copiesOf := strings.Join(copies, "\n")
	for _, in := range known {
		// The same keys as the last look's, most often: its string, so
		// that each destination's comparison below is of one pointer.
		if in.copies == copiesOf {
			copiesOf = in.copies
			break
		}
	}
	inspected := make(map[string]inspection, len(targets))
	dests := make([]*rolloutDest, 0, len(targets))
	for _, t := range targets {
		st, mailbox := t.st, t.mailbox
		d := &rolloutDest{key: t.key, name: t.name, wave: t.wave, waiting: t.waiting}
		if in, ok := known[d.key]; ok && in.mailbox == mailbox && st.Status.MailboxSpace == mailbox &&
			in.generation == ep.Generation && in.copies == copiesOf && !touched[mailbox] {
			d.updated, d.healthy, d.message, d.problem = in.updated, in.healthy, in.message, in.problem
			inspected[d.key] = in
		} else if c.inspect(ctx, d, st, mailbox, ep, revision, copies) {
			inspected[d.key] = inspection{mailbox: mailbox, generation: ep.Generation, copies: copiesOf,
				updated: d.updated, healthy: d.healthy, message: d.message, problem: d.problem}
		}
		dests = append(dests, d)
	}

	now := time.Now()
	c.rolls.mu.Lock()
	s := c.rolls.byPlacement[key]
	fresh := s == nil // first look since the server started
	if s == nil || s.revision != revision {
		completed := ""
		if s != nil {
			completed = s.completed
		} else if ep.Status.Rollout != nil {
			completed = ep.Status.Rollout.CompletedRevision
		}
		if s != nil {
			logger.Info("a new revision rolls out from the first wave", "revision", revision, "previous", s.revision)
		}
		phase := ""
		if s != nil {
			phase = s.phase // the gauge counts the placement, whatever its revision
		}
		s = &rolloutState{revision: revision, started: now, completed: completed, admitted: map[string]time.Time{}, healthySince: map[string]time.Time{}, phase: phase}
		if st := ep.Status.Rollout; fresh && st != nil && st.Revision == revision {
			// The server restarted during (or after) this revision's
			// rollout: it began then, and a complete one stays so.
			if st.StartTime != nil {
				s.started = st.StartTime.Time
			}
			s.complete = st.CompletedRevision == revision
		}
		c.rolls.byPlacement[key] = s
	}
	s.inspected = inspected
	wasComplete, failedBefore := s.complete, s.failed
	admit, requeue := s.step(ro, dests, now)
	s.status.Waves = waveStatuses(ro, dests, s)
	countPhase(s.phase, string(s.status.Phase))
	s.phase = string(s.status.Phase)
	for k := range s.failed {
		if _, ok := failedBefore[k]; !ok {
			rolloutFailures.Inc()
		}
	}
	if s.complete && !wasComplete {
		rolloutDuration.Observe(now.Sub(s.started).Seconds())
	}
	// What is read below is read here: the translator's workers read the
	// state under the lock meanwhile, and the status's pointer is replaced
	// (never changed) by the next step.
	complete, status := s.complete, s.status
	c.rolls.mu.Unlock()

	for _, k := range admit {
		c.mailboxes.Add(k)
	}
	var kept error
	if complete && (!wasComplete || fresh) {
		if !wasComplete {
			logger.Info("rollout complete", "revision", revision)
		}
		for _, d := range dests {
			if !d.updated || fresh {
				// Those skipped take it now; those that hold it already
				// have nothing to take (after a restart, every one is
				// looked at once, as it was before the restart).
				c.mailboxes.Add(d.key)
			}
		}
		if sel != nil {
			// What completed is what the caches hold now (sel was read
			// from them with the revision): kept for joiners.
			snap, err := c.mailbox.snapshotOf(sel, first.source, revision)
			if err == nil {
				err = c.snaps.keep(ctx, key, snap)
			}
			if err != nil {
				kept = fmt.Errorf("keeping the completed revision %s for destinations that join later: %w", revision, err)
			}
		}
	}
	if len(admit) > 0 {
		logger.V(2).Info("destinations admitted", "revision", revision, "destinations", admit)
	}
	if current := ep.Status.Rollout; current == nil || !apiequality.Semantic.DeepEqual(current, status) {
		c.statuses.Add(key)
	}
	if status.Phase == edgev2alpha1.RolloutPhaseProgressing && (requeue == 0 || requeue > rolloutResync) {
		requeue = rolloutResync
	}
	if requeue > 0 {
		c.rollouts.AddAfter(key, requeue)
	}
	return false, kept
}

// completedSnapshot returns the snapshot of the last revision of a
// placement that completed, as the rollout knows it (or, before it has
// looked since a restart, as the placement's status says); nil when none
// is kept.
func (c *Controller) completedSnapshot(ctx context.Context, p source) (*rolloutSnapshot, error) {
	completed, known := c.rolls.completedOf(p.key())
	if !known && p.ep.Status.Rollout != nil {
		completed = p.ep.Status.Rollout.CompletedRevision
	}
	if completed == "" {
		return nil, nil
	}
	return c.snaps.get(ctx, p.key(), string(p.ep.UID), completed)
}

// sweepSnapshots deletes, once the caches have synced, the snapshots of
// placements deleted while the server was down; retried until it works.
func (c *Controller) sweepSnapshots(ctx context.Context) {
	progressive := func(key string) bool {
		wds, _, name, err := spaces.SplitKey(key)
		if err != nil {
			return false
		}
		ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, wds, "", name)
		return ok && ep.DeletionTimestamp == nil && ep.Spec.Progressive()
	}
	_ = wait.PollUntilContextCancel(ctx, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.snaps.sweep(ctx, progressive); err != nil {
			klog.FromContext(ctx).Error(err, "deleting the rollout snapshots of placements that are gone failed, will retry")
			return false, nil
		}
		return true, nil
	})
}

// edgeWaiting says why an edge cannot take a change now, or "".
func edgeWaiting(st *edgev2alpha1.SyncTarget) string {
	switch {
	case !meta.IsStatusConditionTrue(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected):
		return edgev2alpha1.RolloutStateDisconnected
	case st.Status.Hold != nil:
		return edgev2alpha1.RolloutStateHeld
	case st.Status.UpdateWindow != nil && !st.Status.UpdateWindow.Open:
		return edgev2alpha1.RolloutStateWaitingWindow
	}
	return ""
}

// inspect reads, from the mailbox's copies of the revision, whether the
// destination holds the revision and what its syncer says of each copy.
// It returns false when the mailbox is not ready (nothing read to keep).
func (c *Controller) inspect(ctx context.Context, d *rolloutDest, st *edgev2alpha1.SyncTarget, mailbox string, ep *edgev2alpha1.EdgePlacement, revision string, copies []string) bool {
	wds, placement := crossspace.SpaceOf(ep), ep.Name
	if st.Status.MailboxSpace != mailbox {
		d.message = "its mailbox is not ready"
		return false
	}
	hc := ep.Spec.Rollout.HealthCheck
	cfg, ok := crossspace.Get[*edgev2alpha1.SyncerConfig](c.syncerConfigs, mailbox, "", edgev2alpha1.SyncerConfigName)
	switch {
	case hc != nil:
	case st.Status.ReportsRollouts && !ok:
		d.message = "its mailbox is not ready"
		return false
	case st.Status.ReportsRollouts:
		// The syncer reports with its heartbeat, in its SyncTarget.
		inspectReport(d, cfg.Spec.Rollouts, st.Status.Rollouts, wds+"/"+placement, revision)
		return true
	case ok && cfg.Status.ReportsRollouts:
		inspectReport(d, cfg.Spec.Rollouts, cfg.Status.Rollouts, wds+"/"+placement, revision)
		return true
	}
	var check *healthCheck
	if hc != nil {
		// The placement judges health itself, from each copy's report.
		eval, done := c.health.NewEvaluation(ctx)
		defer done()
		check = &healthCheck{expr: hc.CEL, eval: eval}
	}
	d.updated, d.healthy = true, true
	for _, k := range copies {
		gvr := gvrOfKey(k)
		_, nsName, _ := strings.Cut(k, "|")
		ns, n, _ := strings.Cut(nsName, "/")
		rec, ok := getRecord(c.informerIn(gvr, mailbox), mailbox, ns, n)
		if ok && (crossspace.Annotation(rec, edgev2alpha1.SourceSpaceAnnotation) != wds || crossspace.Annotation(rec, edgev2alpha1.SourcePlacementAnnotation) != placement) {
			continue // another placement's copy (a conflict, reported there)
		}
		if !ok || crossspace.Annotation(rec, edgev2alpha1.RevisionAnnotation) != revision {
			d.updated, d.healthy = false, false
			d.message = "its mailbox does not hold the revision yet"
			return true
		}
		if e := crossspace.Annotation(rec, edgev2alpha1.SyncErrorAnnotation); e != "" && d.problem == "" {
			d.problem = fmt.Sprintf("%s %s: %s", gvr.GroupResource(), nsName, e)
		}
		if !d.healthy || isNamespaces(gvr) {
			continue // the syncer speaks of workload objects, not of namespaces
		}
		var a edgev2alpha1.Applied
		switch err := json.Unmarshal([]byte(crossspace.Annotation(rec, edgev2alpha1.AppliedAnnotation)), &a); {
		case err != nil || a.Revision != revision:
			d.healthy, d.message = false, fmt.Sprintf("%s %s is not applied at the edge yet", gvr.GroupResource(), nsName)
		case check != nil:
			var source *unstructured.Unstructured
			if src, ok := getObject(c.informerIn(gvr, wds), wds, ns, n); ok {
				source = src
			}
			if why := check.run(rec, source, a); why != "" {
				d.healthy, d.message = false, fmt.Sprintf("%s %s: %s", gvr.GroupResource(), nsName, why)
			}
		case !a.Healthy:
			d.healthy, d.message = false, fmt.Sprintf("%s %s: %s", gvr.GroupResource(), nsName, a.Message)
		}
	}
	return true
}

// inspectReport reads, from a mailbox's records (its SyncerConfig's
// spec), whether it holds a placement's revision, and from its syncer's
// reports (in its SyncTarget's status, or its SyncerConfig's) what the
// syncer says of the edge: the report on that record.
func inspectReport(d *rolloutDest, records []edgev2alpha1.RolloutRecord, reports []edgev2alpha1.RolloutReport, placement, revision string) {
	var record *edgev2alpha1.RolloutRecord
	for i := range records {
		if r := &records[i]; r.Placement == placement {
			record = r
		}
	}
	if record == nil || record.Revision != revision {
		d.message = "its mailbox does not hold the revision yet"
		return
	}
	d.updated = true
	for _, rep := range reports {
		if rep.Placement != placement || rep.Revision != record.Revision || rep.Digest != record.Digest {
			continue
		}
		d.healthy, d.message, d.problem = rep.Healthy, rep.Message, rep.Problem
		if !d.healthy && d.message == "" && d.problem == "" {
			d.message = "its syncer reports it not healthy"
		}
		return
	}
	d.message = "its syncer has not reported on the revision yet"
}

// healthCheck runs a placement's spec.rollout.healthCheck.cel on the
// copies of one destination, within one evaluation's budget.
type healthCheck struct {
	expr edgev2alpha1.Expression
	eval *statuscel.Evaluation
}

// run says why a copy is not healthy by the check ("" when it is). obj is
// the object as its edge reports it: the copy's identity and labels, the
// edge object's generation, the WDS object's spec and the edge's status.
func (h *healthCheck) run(rec metav1.Object, source *unstructured.Unstructured, a edgev2alpha1.Applied) string {
	obj := map[string]any{
		"metadata": map[string]any{"name": rec.GetName(), "namespace": rec.GetNamespace(), "labels": stringMap(rec.GetLabels()),
			"annotations": stringMap(rec.GetAnnotations()), "generation": a.Generation},
	}
	if t, ok := rec.(interface {
		GroupVersionKind() schema.GroupVersionKind
	}); ok {
		gvk := t.GroupVersionKind()
		obj["apiVersion"], obj["kind"] = gvk.GroupVersion().String(), gvk.Kind
	}
	if source != nil {
		if spec, ok := source.Object["spec"]; ok {
			obj["spec"] = spec
		}
	}
	if status := crossspace.StatusOf(rec); status != nil {
		obj["status"] = status
	}
	out, err := h.eval.Eval("spec.rollout.healthCheck.cel", h.expr, map[string]any{"obj": obj})
	switch {
	case err != nil:
		return err.Error()
	case out == true:
		return ""
	}
	return "spec.rollout.healthCheck.cel is not true"
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// step decides, under the tracker's lock, which destinations the rollout
// admits now, sets s.status (but its waves), and says when to look again
// (0: on news only).
func (s *rolloutState) step(ro *edgev2alpha1.Rollout, dests []*rolloutDest, now time.Time) (admit []string, requeue time.Duration) {
	deadline := defaultProgressDeadline
	if ro.ProgressDeadline != nil {
		deadline = ro.ProgressDeadline.Duration
	}
	var minSuccess time.Duration
	if ro.MinSuccessTime != nil {
		minSuccess = ro.MinSuccessTime.Duration
	}
	soon := func(d time.Duration) {
		if d > 0 && (requeue == 0 || d < requeue) {
			requeue = d
		}
	}
	failed := map[string]string{}
	done := map[string]bool{}
	for _, d := range dests {
		if d.updated {
			if _, ok := s.admitted[d.key]; !ok {
				s.admitted[d.key] = now // found so: admitted before a restart
			}
		}
		if !d.healthy {
			delete(s.healthySince, d.key)
		} else if _, ok := s.healthySince[d.key]; !ok {
			s.healthySince[d.key] = now
		}
		at, admitted := s.admitted[d.key]
		switch {
		case d.problem != "":
			failed[d.key] = "the edge refused a copy: " + d.problem
		case admitted && !d.healthy && d.waiting == "":
			// From admission: a mailbox that cannot take the revision (at
			// its object limit, say) fails as an edge that cannot run it.
			if left := deadline - now.Sub(at); left > 0 {
				soon(left)
			} else {
				failed[d.key] = fmt.Sprintf("not healthy within the progress deadline (%s): %s", deadline, d.message)
			}
		}
		switch {
		case failed[d.key] != "":
			done[d.key] = true
		case d.healthy:
			if left := minSuccess - now.Sub(s.healthySince[d.key]); left > 0 {
				soon(left)
			} else {
				done[d.key] = true
			}
		case d.waiting != "" && ro.Disconnected == edgev2alpha1.DisconnectedSkip:
			done[d.key] = true
		case !admitted && s.complete:
			done[d.key] = true // a joiner, which takes the completed revision
		}
	}
	current := -1
	for _, d := range dests {
		if !done[d.key] && (current < 0 || d.wave < current) {
			current = d.wave
		}
	}
	maxFailures := int(ro.MaxFailures)
	pausedBy := ""
	switch {
	case ro.Paused:
		pausedBy = "paused by spec.rollout.paused"
	case len(failed) > maxFailures:
		var names []string
		for _, d := range dests {
			if failed[d.key] != "" {
				names = append(names, d.name)
			}
		}
		pausedBy = fmt.Sprintf("%d destinations failed, more than maxFailures (%d): %s", len(failed), maxFailures, strings.Join(firstN(names, 5), ", "))
	}
	if current >= 0 && pausedBy == "" {
		size := 0
		inflight := 0
		for _, d := range dests {
			if d.wave == current {
				size++
			}
			if _, ok := s.admitted[d.key]; ok && d.wave <= current && !done[d.key] && d.waiting == "" {
				inflight++
			}
		}
		limit := concurrency(ro.MaxConcurrency, size)
		for _, d := range dests { // sorted by name
			if inflight >= limit {
				break
			}
			if _, ok := s.admitted[d.key]; ok || d.wave > current || d.waiting != "" || done[d.key] {
				continue
			}
			s.admitted[d.key] = now
			admit = append(admit, d.key)
			inflight++
			soon(deadline)
		}
	}
	if current < 0 && !s.complete && pausedBy == "" {
		// Complete admits every destination, skipped ones included: not
		// while paused.
		s.complete, s.completed = true, s.revision
	}
	st := &edgev2alpha1.RolloutStatus{Revision: s.revision, CompletedRevision: s.completed, StartTime: &metav1.Time{Time: s.started.Truncate(time.Second)}}
	switch {
	case ro.Paused:
		// Shown even when complete: what the user set is in force for the
		// next change (a destination that joins still takes this one).
		st.Phase, st.Message = edgev2alpha1.RolloutPhasePaused, pausedBy
	case s.complete:
		st.Phase = edgev2alpha1.RolloutPhaseComplete
	case pausedBy != "":
		st.Phase, st.Message = edgev2alpha1.RolloutPhasePaused, pausedBy
	default:
		st.Phase = edgev2alpha1.RolloutPhaseProgressing
	}
	if current >= 0 {
		st.CurrentWave = waveName(ro, current)
		if st.Message == "" {
			for _, d := range dests {
				if d.wave == current && !done[d.key] {
					why := d.message
					if d.waiting != "" {
						why = d.waiting
					} else if _, ok := s.admitted[d.key]; !ok {
						why = "waiting for its turn"
					}
					st.Message = fmt.Sprintf("wave %s: waiting for %s (%s)", st.CurrentWave, d.name, why)
					break
				}
			}
		}
	}
	for _, d := range dests {
		state, msg := "", ""
		switch {
		case failed[d.key] != "":
			state, msg = edgev2alpha1.RolloutStateFailed, failed[d.key]
		case d.waiting != "" && !(d.updated && d.healthy):
			state = d.waiting
		default:
			continue
		}
		if len(st.Destinations) < edgev2alpha1.MaxListedRolloutDestinations {
			st.Destinations = append(st.Destinations, edgev2alpha1.RolloutDestination{SyncTarget: d.name, Wave: waveName(ro, d.wave), State: state, Message: cut(msg, 512)})
		}
	}
	s.status = st
	s.failed = failed
	return admit, requeue
}

// waveStatuses counts each wave's destinations.
func waveStatuses(ro *edgev2alpha1.Rollout, dests []*rolloutDest, s *rolloutState) []edgev2alpha1.RolloutWaveStatus {
	out := make([]edgev2alpha1.RolloutWaveStatus, len(ro.Waves)+1)
	for i := range out {
		out[i].Name = waveName(ro, i)
	}
	for _, d := range dests {
		w := &out[d.wave]
		w.Destinations++
		if d.updated {
			w.Updated++
		}
		if d.updated && d.healthy {
			w.Healthy++
		}
		if s.failed[d.key] != "" {
			w.Failed++
		} else if d.waiting != "" && !(d.updated && d.healthy) {
			w.Waiting++
		}
	}
	if out[len(out)-1].Destinations == 0 && len(out) > 1 {
		out = out[:len(out)-1]
	}
	return out
}

func waveName(ro *edgev2alpha1.Rollout, i int) string {
	if i < len(ro.Waves) {
		return ro.Waves[i].Name
	}
	return lastWaveName
}

// concurrency resolves maxConcurrency against a wave's size (at least 1).
func concurrency(v *intstr.IntOrString, size int) int {
	if v == nil {
		return max(size, 1)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, size, true)
	if err != nil || n < 1 {
		return 1
	}
	return min(n, math.MaxInt32)
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// cut shortens s to at most n bytes, never splitting a character.
func cut(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "")
	}
	return s
}

// getRecord is crossspace.GetRecord of a cache that may be nil (a space
// that serves no such custom resource holds none).
func getRecord(inf *crossspace.Informer, space, namespace, name string) (metav1.Object, bool) {
	if inf == nil {
		return nil, false
	}
	return crossspace.GetRecord(inf, space, namespace, name)
}

// getObject is crossspace.Get of a cache that may be nil.
func getObject(inf *crossspace.Informer, space, namespace, name string) (*unstructured.Unstructured, bool) {
	if inf == nil {
		return nil, false
	}
	return crossspace.Get[*unstructured.Unstructured](inf, space, namespace, name)
}
