// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// A Progressive placement rolls each revision out wave by wave, and waits
// for each edge to hold the revision's copies, healthy. The server lists
// the revisions in the SyncerConfig (spec.rollouts); the syncer answers in
// its status, one report per revision. A revision then costs the mailbox
// one write, where a report on each copy (AppliedAnnotation, which
// reconcileReport still writes on a copy that carries its revision) costs
// one per copy.

const (
	// rolloutsKey is the one key of the rollouts queue: every report is
	// computed at once, for the one SyncerConfig.
	rolloutsKey = edgev2alpha1.SyncerConfigName
	// rolloutsDelay is how long news waits before the reports are computed
	// again: a burst of it (a revision's copies arriving, their edge
	// objects applied) makes one computation, and at most one write.
	rolloutsDelay = 200 * time.Millisecond
	// notReadYet is the message of a report whose copies the syncer has
	// not all read.
	notReadYet = "the syncer has not read every copy of the revision yet"
)

// rolloutsSoon asks for the rollout reports to be computed again shortly.
// A Syncer made without the queue (in some tests) reports none.
func (s *Syncer) rolloutsSoon() {
	if s.rolloutQ != nil {
		s.rolloutQ.AddAfter(rolloutsKey, rolloutsDelay)
	}
}

// reconcileRollouts writes the rollout reports into the SyncerConfig's
// status when they differ from what its cache holds. A conflict or an
// unreachable center fails it: the retry reads the cache again.
func (s *Syncer) reconcileRollouts(ctx context.Context, _ string) (bool, error) {
	s.mu.Lock()
	configs := s.configInf
	s.mu.Unlock()
	if configs == nil {
		return false, nil
	}
	// The object as the cache has it, not as this syncer's types read it:
	// the write leaves what they do not know of it as it is.
	u := configs.get("", edgev2alpha1.SyncerConfigName)
	if u == nil {
		return false, nil // none yet, or deleted: onConfig asks again
	}
	cfg := &edgev2alpha1.SyncerConfig{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg); err != nil {
		return false, fmt.Errorf("reading the SyncerConfig: %w", err)
	}
	reports, known := s.rolloutReports(cfg.Spec.Rollouts)
	if !s.reportsInConfig.Load() {
		return s.reportWithHeartbeat(cfg, reports, known), nil
	}
	if !known {
		// Reports from caches still reading the mailbox would take back
		// what the syncer said before it started: those still about a
		// record stay until the caches are read (requeue), and the
		// server learns only that this syncer reports.
		reports = stillRecorded(cfg.Status.Rollouts, cfg.Spec.Rollouts)
	}
	want := edgev2alpha1.SyncerConfigStatus{ReportsRollouts: true, Rollouts: reports}
	if apiequality.Semantic.DeepEqual(cfg.Status, want) {
		s.rolloutsWaiting.Store(0)
		return !known, nil
	}
	if wait := s.holdProgress(cfg.Status, want); wait > 0 {
		s.rolloutQ.AddAfter(rolloutsKey, wait)
		return false, nil
	}
	s.rolloutsWaiting.Store(0)
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
	if err != nil {
		return false, fmt.Errorf("encoding the rollout reports: %w", err)
	}
	next := u.DeepCopy()
	next.Object["status"] = status
	logger := klog.FromContext(ctx)
	_, err = s.mailbox.Resource(syncerConfigsGVR).UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
	switch {
	case apierrors.IsNotFound(err):
		// Deleted since it was read, or a server older than these reports
		// (no status to write): nothing to do before the config changes.
		logger.V(2).Info("cannot report rollouts: the SyncerConfig or its status is not served", "err", err.Error())
		return false, nil
	case err != nil:
		return false, s.centerErr(err)
	}
	logger.V(2).Info("reported rollouts", "rollouts", len(want.Rollouts), "known", known)
	return !known, nil
}

// heartbeatReports are reports the heartbeat writes, or wrote.
type heartbeatReports struct {
	set     bool
	reports []edgev2alpha1.RolloutReport
}

// reportWithHeartbeat hands the reports to the heartbeat, which writes
// them in the SyncTarget's status: a report of a placement's rollout
// costs the center no write of its own, as the SyncTarget's status is
// written when the copies applied change anyway. News the rollout acts on
// (healthy, a problem) asks for that write soon; news of an edge on its
// way waits progressHold, or rides with the next write. It returns
// whether to look again (caches still reading the mailbox).
func (s *Syncer) reportWithHeartbeat(cfg *edgev2alpha1.SyncerConfig, reports []edgev2alpha1.RolloutReport, known bool) bool {
	s.mu.Lock()
	if !known {
		// As in the SyncerConfig: the reports still about a record stay
		// until the caches are read. None yet in this run: the status
		// keeps what it holds.
		if !s.rollouts.set {
			s.mu.Unlock()
			return true
		}
		reports = stillRecorded(s.rollouts.reports, cfg.Spec.Rollouts)
	}
	if len(reports) > edgev2alpha1.MaxRolloutReports {
		reports = reports[:edgev2alpha1.MaxRolloutReports]
	}
	s.rollouts = heartbeatReports{set: true, reports: reports}
	have := edgev2alpha1.SyncerConfigStatus{ReportsRollouts: s.reported.set, Rollouts: s.reported.reports}
	s.mu.Unlock()
	want := edgev2alpha1.SyncerConfigStatus{ReportsRollouts: true, Rollouts: reports}
	if apiequality.Semantic.DeepEqual(have, want) {
		s.rolloutsWaiting.Store(0)
		return !known
	}
	if wait := s.holdProgress(have, want); wait > 0 {
		s.rolloutQ.AddAfter(rolloutsKey, wait)
		return false
	}
	s.rolloutsWaiting.Store(0)
	s.reportSoon()
	return !known
}

// progressHold is how long a report that says only that the edge is on
// its way (not healthy yet, no problem) waits before it is written: most
// revisions are applied and healthy within it, and then one write says
// so, where writing each step (copies read, applied, healthy) would cost
// the server two or three writes per edge and revision. What the rollout
// waits for is the healthy report or a problem, which go at once.
const progressHold = time.Second

// holdProgress returns how much longer the reports want should wait
// before they replace have: none when they carry news the rollout acts
// on (a report healthy or with a problem, the first word that this
// syncer reports), or once they have waited progressHold.
func (s *Syncer) holdProgress(have, want edgev2alpha1.SyncerConfigStatus) time.Duration {
	if !have.ReportsRollouts {
		return 0
	}
	for _, w := range want.Rollouts {
		if !slices.Contains(have.Rollouts, w) && (w.Healthy || w.Problem != "") {
			return 0
		}
	}
	var now time.Time
	if s.clock != nil {
		now = s.clock.Now()
	} else {
		now = time.Now()
	}
	since := s.rolloutsWaiting.Load()
	if since == 0 {
		since = now.UnixNano()
		s.rolloutsWaiting.Store(since)
	}
	return progressHold - now.Sub(time.Unix(0, since))
}

// stillRecorded are the reports on a record that spec.rollouts still
// holds: the server refuses a report on any other.
func stillRecorded(reports []edgev2alpha1.RolloutReport, records []edgev2alpha1.RolloutRecord) []edgev2alpha1.RolloutReport {
	var out []edgev2alpha1.RolloutReport
	for _, r := range reports {
		if slices.ContainsFunc(records, func(rec edgev2alpha1.RolloutRecord) bool {
			return rec.Placement == r.Placement && rec.Revision == r.Revision && rec.Digest == r.Digest
		}) {
			out = append(out, r)
		}
	}
	return out
}

// rolloutCopy is a copy of a placement as its rollout report sees it.
type rolloutCopy struct {
	key         objKey
	contentHash string                     // the copy's ContentHashAnnotation
	desired     *desired                   // what the syncer applies of it; nil for nothing yet
	problem     *problem                   // why the edge does not take it; nil when it does
	edge        *unstructured.Unstructured // the syncer's edge object; nil for none
}

// rolloutReports computes one report per record, in order; known is false
// while the caches of the mailbox's copies are still reading them.
func (s *Syncer) rolloutReports(records []edgev2alpha1.RolloutRecord) ([]edgev2alpha1.RolloutReport, bool) {
	if len(records) == 0 {
		return nil, true
	}
	copies, known := s.placementCopies(records)
	if !known {
		return nil, false
	}
	reports := make([]edgev2alpha1.RolloutReport, 0, len(records))
	reported := map[string]bool{}
	for _, rec := range records {
		if reported[rec.Placement] {
			continue // the server takes one report per placement
		}
		reported[rec.Placement] = true
		reports = append(reports, rolloutReport(rec, copies[rec.Placement]))
	}
	return reports, true
}

// placementCopies gathers the copies of the placements the records name,
// by placement (WDS/NAME), with what the syncer knows of each. Namespaces
// and CRDs are no placement's copies here: the server does not count them
// in a revision either.
func (s *Syncer) placementCopies(records []edgev2alpha1.RolloutRecord) (map[string][]rolloutCopy, bool) {
	s.mu.Lock()
	caches, edgeCaches, owner := maps.Clone(s.copies), maps.Clone(s.edgeObjs), s.owner
	s.mu.Unlock()
	wanted := map[string]bool{}
	for _, rec := range records {
		wanted[rec.Placement] = true
	}
	// While the SyncerConfig hands a resource over to a new version, both
	// versions' caches may hold the same object: it counts once.
	type id struct {
		gr              schema.GroupResource
		namespace, name string
	}
	seen := map[id]bool{}
	out := map[string][]rolloutCopy{}
	gvrs := slices.SortedFunc(maps.Keys(caches), func(a, b schema.GroupVersionResource) int { return cmp.Compare(a.String(), b.String()) })
	for _, gvr := range gvrs {
		if gr := gvr.GroupResource(); gr == namespacesGVR.GroupResource() || gr == crdsGVR.GroupResource() {
			continue
		}
		r := caches[gvr]
		if !r.synced() {
			return nil, false
		}
		for _, obj := range r.store().List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || u.GetDeletionTimestamp() != nil || u.GetLabels()[edgev2alpha1.PlacementCopyLabel] != "true" {
				continue // one being deleted has left the mailbox (onCopy)
			}
			ann := u.GetAnnotations()
			placement := ann[edgev2alpha1.SourceSpaceAnnotation] + "/" + ann[edgev2alpha1.SourcePlacementAnnotation]
			key := keyOf(gvr, u)
			i := id{gvr.GroupResource(), key.Namespace, key.Name}
			if !wanted[placement] || seen[i] {
				continue
			}
			seen[i] = true
			c := rolloutCopy{key: key, contentHash: ann[edgev2alpha1.ContentHashAnnotation]}
			if ec := edgeCaches[gvr]; ec != nil {
				if e := ec.get(key.Namespace, key.Name); e != nil && ownedBy(e, owner) {
					c.edge = e
				}
			}
			out[placement] = append(out[placement], c)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range out {
		for i := range list {
			list[i].desired = s.desired[list[i].key]
			if p, ok := s.problems[list[i].key]; ok {
				list[i].problem = &p
			}
		}
	}
	return out, true
}

// rolloutReport is the report on one record, from the syncer's copies of
// its placement. Copies other than the revision's (the digests differ)
// mean the syncer has not read the revision whole: nothing is said of
// them. Otherwise each copy counts as applied when the edge object has
// what the syncer made of this very copy, and healthy as objectHealth
// judges it; the message and problem name the first copy, in a stable
// order, that is not.
func rolloutReport(rec edgev2alpha1.RolloutRecord, copies []rolloutCopy) edgev2alpha1.RolloutReport {
	report := edgev2alpha1.RolloutReport{Placement: rec.Placement, Revision: rec.Revision, Digest: rec.Digest}
	entries := make([]edgev2alpha1.CopyDigestEntry, len(copies))
	for i, c := range copies {
		entries[i] = edgev2alpha1.CopyDigestEntry{Resource: c.key.GVR.GroupResource().String(),
			Namespace: c.key.Namespace, Name: c.key.Name, ContentHash: c.contentHash}
	}
	if edgev2alpha1.CopiesDigest(entries) != rec.Digest {
		report.Message = notReadYet
		return report
	}
	sorted := slices.Clone(copies)
	slices.SortFunc(sorted, func(a, b rolloutCopy) int {
		return cmp.Or(cmp.Compare(a.key.GVR.GroupResource().String(), b.key.GVR.GroupResource().String()),
			cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
	})
	applied, healthy := true, true
	for _, c := range sorted {
		if c.problem != nil {
			applied, healthy = false, false
			if report.Problem == "" {
				report.Problem = cut(fmt.Sprintf("%s: %s: %s", c.key, c.problem.Reason, c.problem.Message), edgev2alpha1.MaxRolloutReportMessage)
			}
			continue
		}
		var waiting string
		if !c.applied() {
			applied, healthy = false, false
			waiting = c.key.String() + " is not applied at the edge yet"
		} else if ok, why := objectHealth(c.key.GVR.GroupResource(), c.edge); !ok {
			healthy = false
			waiting = c.key.String() + ": " + why
		}
		if waiting != "" && report.Message == "" {
			report.Message = cut(waiting, edgev2alpha1.MaxRolloutReportMessage)
		}
	}
	report.Applied, report.Healthy = applied, healthy
	return report
}

// applied says whether the edge object has the content the syncer made of
// this copy: a desired entry made from another content of the copy (an
// older revision, say) does not count, though the edge holds it.
func (c rolloutCopy) applied() bool {
	return c.desired != nil && c.edge != nil && c.desired.ContentHash == c.contentHash &&
		c.edge.GetAnnotations()[AppliedHashAnnotation] == c.desired.Hash
}
