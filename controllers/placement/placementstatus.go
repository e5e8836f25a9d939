// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

// recordProblems stores what kept copies from a mailbox, and what Follow
// placed there, and enqueues the placements whose status may change.
func (c *Controller) recordProblems(mailbox string, sel *selection) {
	placementsHere, problems := sel.placements, sel.problems
	c.mu.Lock()
	defer c.mu.Unlock()
	for epKey, byMailbox := range c.problems {
		if _, ok := byMailbox[mailbox]; ok && !placementsHere[epKey] {
			delete(byMailbox, mailbox)
			c.statuses.Add(epKey)
		}
	}
	for epKey, byMailbox := range c.dependencies {
		if _, ok := byMailbox[mailbox]; ok && !placementsHere[epKey] {
			delete(byMailbox, mailbox)
			c.statuses.Add(epKey)
		}
	}
	for epKey := range placementsHere {
		deps := sel.dependenciesOf(epKey)
		byMailbox := c.dependencies[epKey]
		if !slices.Equal(byMailbox[mailbox], deps) {
			c.statuses.Add(epKey)
			switch {
			case len(deps) > 0 && byMailbox == nil:
				c.dependencies[epKey] = map[string][]edgev2alpha1.DependencyReference{mailbox: deps}
			case len(deps) > 0:
				byMailbox[mailbox] = deps
			default:
				delete(byMailbox, mailbox)
			}
		}
	}
	for epKey := range placementsHere {
		byMailbox := c.problems[epKey]
		if byMailbox == nil {
			byMailbox = map[string][]problem{}
			c.problems[epKey] = byMailbox
		}
		if !apiequality.Semantic.DeepEqual(byMailbox[mailbox], problems[epKey]) {
			c.statuses.Add(epKey)
		}
		if len(problems[epKey]) == 0 {
			delete(byMailbox, mailbox)
		} else {
			byMailbox[mailbox] = problems[epKey]
		}
	}
}

// updatePlacementStatus sets the Propagated condition of a placement from
// the problems of all its mailboxes, and the Conflicted condition from its
// conflicts (absent when there are none).
func (c *Controller) updatePlacementStatus(ctx context.Context, key string) error {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return nil
	}
	ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, space, "", name)
	if !ok {
		c.mu.Lock()
		delete(c.problems, key)
		delete(c.dependencies, key)
		c.mu.Unlock()
		return nil
	}
	c.mu.Lock()
	var all []problem
	mailboxes := sortedKeys(c.problems[key])
	for _, mb := range mailboxes {
		all = append(all, c.problems[key][mb]...)
	}
	deps := map[edgev2alpha1.DependencyReference]bool{}
	for _, list := range c.dependencies[key] {
		for _, ref := range list {
			deps[ref] = true
		}
	}
	c.mu.Unlock()
	updated := ep.DeepCopy()
	changed := placementConditions(updated, all)
	changed = setDependencies(updated, deps) || changed
	var rollout *edgev2alpha1.RolloutStatus
	if ep.Spec.Progressive() {
		rollout = c.rolls.statusOf(key)
		if rollout == nil {
			rollout = ep.Status.Rollout // not looked at since a restart yet
		}
	}
	progress := false
	if !apiequality.Semantic.DeepEqual(rollout, ep.Status.Rollout) {
		progress = !changed && progressOnly(ep.Status.Rollout, rollout)
		updated.Status.Rollout, changed = rollout, true
	}
	if !changed {
		return nil
	}
	if progress {
		// A wave on its way: its counts are written at most every
		// statusSpacing, with whatever else came meanwhile.
		if wait := c.rolls.written.Wait(key); wait > 0 {
			c.statuses.AddAfter(key, wait)
			return nil
		}
	}
	c.rolls.written.Looked(key)
	return c.clients.Client.Status().Update(spaces.WithSpace(ctx, space), updated)
}

// progressOnly reports whether a rollout's status moved only in its
// counts, message and listed destinations: the same revision, phase and
// wave, and no new failure.
func progressOnly(was, now *edgev2alpha1.RolloutStatus) bool {
	if was == nil || now == nil || was.Revision != now.Revision || was.CompletedRevision != now.CompletedRevision ||
		was.Phase != now.Phase || was.CurrentWave != now.CurrentWave || len(was.Waves) != len(now.Waves) {
		return false
	}
	for i := range was.Waves {
		if was.Waves[i].Name != now.Waves[i].Name || now.Waves[i].Failed > was.Waves[i].Failed {
			return false
		}
	}
	return true
}

// setDependencies sets a placement's status.dependencies (sorted, at most
// MaxListedDependencies) and dependencyCount from the union of what Follow
// placed in its mailboxes, and reports whether anything changed.
func setDependencies(ep *edgev2alpha1.EdgePlacement, set map[edgev2alpha1.DependencyReference]bool) bool {
	list := make([]edgev2alpha1.DependencyReference, 0, len(set))
	for ref := range set {
		list = append(list, ref)
	}
	sortDependencies(list)
	if len(list) > edgev2alpha1.MaxListedDependencies {
		list = list[:edgev2alpha1.MaxListedDependencies]
	}
	if len(list) == 0 {
		list = nil
	}
	count := int32(len(set))
	if slices.Equal(ep.Status.Dependencies, list) && ep.Status.DependencyCount == count {
		return false
	}
	ep.Status.Dependencies, ep.Status.DependencyCount = list, count
	return true
}

// isConflict reports whether a problem is a conflict with another source.
func isConflict(p problem) bool {
	return p.Reason == edgev2alpha1.ConflictReasonOtherSpace || p.Reason == edgev2alpha1.ConflictReasonCustomization ||
		p.Reason == edgev2alpha1.ConflictReasonDefinition
}

// placementConditions sets a placement's Propagated, Conflicted and
// Synced conditions from its problems (in mailbox order) and reports
// whether anything changed.
func placementConditions(ep *edgev2alpha1.EdgePlacement, all []problem) bool {
	var failures, conflicts, edge []problem
	for _, p := range all {
		switch {
		case p.Edge:
			edge = append(edge, p)
		case isConflict(p):
			conflicts = append(conflicts, p)
		default:
			failures = append(failures, p)
		}
	}
	cond := metav1.Condition{Type: epstatus.Propagated, Status: metav1.ConditionTrue, Reason: "Propagated", Message: "every selected object is in its mailboxes"}
	if len(failures) > 0 {
		cond = metav1.Condition{Type: epstatus.Propagated, Status: metav1.ConditionFalse, Reason: failures[0].Reason, Message: summarize(failures)}
	}
	changed := false
	if len(conflicts) > 0 {
		changed = meta.SetStatusCondition(&ep.Status.Conditions, metav1.Condition{Type: edgev2alpha1.EdgePlacementConflicted,
			Status: metav1.ConditionTrue, Reason: conflicts[0].Reason, Message: summarize(conflicts), ObservedGeneration: ep.Generation})
	} else {
		changed = meta.RemoveStatusCondition(&ep.Status.Conditions, edgev2alpha1.EdgePlacementConflicted)
	}
	synced := metav1.Condition{Type: edgev2alpha1.EdgePlacementSynced, Status: metav1.ConditionTrue, Reason: "NoProblems",
		Message: "no syncer reports a problem with a copy of this placement"}
	if len(edge) > 0 {
		synced.Status, synced.Reason, synced.Message = metav1.ConditionFalse, edge[0].Reason, summarize(edge)
	}
	changed = epstatus.SetReport(ep, synced) || changed
	return epstatus.Set(ep, cond) || changed
}

// summarize joins the distinct messages of problems, at most five.
func summarize(problems []problem) string {
	seen := map[string]bool{}
	var msgs []string
	for _, p := range problems {
		if !seen[p.Message] {
			seen[p.Message] = true
			msgs = append(msgs, p.Message)
		}
	}
	if len(msgs) > 5 {
		msgs = append(msgs[:5], fmt.Sprintf("and %d more", len(msgs)-5))
	}
	return strings.Join(msgs, "; ")
}
