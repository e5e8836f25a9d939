// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// Edge states, as the fleet view shows them.
const (
	// StateConnected: the syncer's tunnel is open and it reported within
	// the heartbeat timeout.
	StateConnected = "connected"
	// StateDisconnected: the tunnel is closed.
	StateDisconnected = "disconnected"
	// StateSilent: the tunnel is said open, but the syncer has not
	// reported for longer than the heartbeat timeout.
	StateSilent = "silent"
	// StateNew: no syncer has connected yet.
	StateNew = "new"
)

// maxProblemsShown bounds the problems an Edge carries to the page; the
// count is complete.
const maxProblemsShown = 3

// Problem is one object a syncer cannot keep in step.
type Problem struct {
	Object  string `json:"object"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// Edge is what the fleet view shows of a SyncTarget. State is relative to
// the time it is computed at (see edgeRecord.at).
type Edge struct {
	Space         string     `json:"space"`
	Name          string     `json:"name"`
	State         string     `json:"state"`
	Reason        string     `json:"reason,omitempty"`
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
	SyncerVersion string     `json:"syncerVersion,omitempty"`
	SyncerMode    string     `json:"syncerMode,omitempty"`
	SyncerImage   string     `json:"syncerImage,omitempty"`
	SyncedObjects int32      `json:"syncedObjects"`
	Conflicts     int32      `json:"conflicts"`
	ProblemCount  int        `json:"problemCount"`
	Problems      []Problem  `json:"problems,omitempty"`
	Drift         int64      `json:"drift"`
	Synced        string     `json:"synced,omitempty"`
	SyncedReason  string     `json:"syncedReason,omitempty"`
	Unschedulable bool       `json:"unschedulable,omitempty"`
}

// edgeRecord is a SyncTarget reduced to what the views need.
type edgeRecord struct {
	Edge
	// connected is the SyncerConnected condition's status ("" when absent).
	connected string
	// late is when the syncer is late, if silent until then
	// (edgev2alpha1.HeartbeatDeadline); zero if it never reported.
	late time.Time
}

func edgeOf(space string, st *edgev2alpha1.SyncTarget) edgeRecord {
	e := edgeRecord{Edge: Edge{
		Space: space, Name: st.Name, SyncerVersion: st.Status.SyncerVersion,
		SyncerMode: st.Status.SyncerMode, SyncerImage: st.Status.SyncerImage,
		SyncedObjects: st.Status.SyncedObjects, Conflicts: st.Status.Conflicts,
		ProblemCount: len(st.Status.Problems), Unschedulable: st.Spec.Unschedulable,
	}}
	if c := meta.FindStatusCondition(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected); c != nil {
		e.connected = string(c.Status)
		e.Reason = c.Reason
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, edgev2alpha1.SyncTargetSynced); c != nil {
		e.Synced, e.SyncedReason = string(c.Status), c.Reason
	}
	if hb := st.Status.LastSyncerHeartbeatTime; hb != nil {
		t := hb.UTC()
		e.LastHeartbeat = &t
		e.late, _ = edgev2alpha1.HeartbeatDeadline(&st.Status)
	}
	if st.Status.Drift != nil {
		e.Drift = st.Status.Drift.Reverted
	}
	for i, p := range st.Status.Problems {
		if i == maxProblemsShown {
			break
		}
		obj := p.Resource
		if p.Group != "" {
			obj += "." + p.Group
		}
		obj += "/"
		if p.Namespace != "" {
			obj += p.Namespace + "/"
		}
		e.Problems = append(e.Problems, Problem{Object: obj + p.Name, Reason: p.Reason, Message: p.Message})
	}
	return e
}

// at returns the Edge as seen at now: a syncer late with its heartbeat is
// shown silent even while its tunnel is said open.
func (e edgeRecord) at(now time.Time) Edge {
	out := e.Edge
	switch {
	case e.connected == string(metav1.ConditionTrue) && !e.late.IsZero() && now.After(e.late):
		out.State = StateSilent
	case e.connected == string(metav1.ConditionTrue):
		out.State = StateConnected
	case e.connected == "":
		out.State = StateNew
	default:
		out.State = StateDisconnected
	}
	return out
}

// Condition is one condition of an EdgePlacement, as shown.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Destination is where a placement goes, with the state of its edge.
type Destination struct {
	Space      string `json:"space"`
	SyncTarget string `json:"syncTarget"`
	Location   string `json:"location,omitempty"`
	// State is the edge's (Edge states), "unknown" when it is not visible.
	State string `json:"state"`
	// Synced is the edge's Synced condition: whether it keeps its copies in step.
	Synced       string `json:"synced,omitempty"`
	ProblemCount int    `json:"problemCount"`
	// Copies says whether the placement's copies there are in step.
	Copies CopyCounts `json:"copies"`

	mailbox string
}

// Placement is what the placements view shows of an EdgePlacement.
type Placement struct {
	Space             string        `json:"space"`
	Name              string        `json:"name"`
	Ready             *Condition    `json:"ready,omitempty"`
	Misconfigured     *Condition    `json:"misconfigured,omitempty"`
	Conflicted        *Condition    `json:"conflicted,omitempty"`
	MatchingLocations int32         `json:"matchingLocations"`
	Destinations      []Destination `json:"destinations"`
	// Rollout is where a Progressive rollout is (nil: the placement gives
	// every change to every edge at once).
	Rollout *Rollout `json:"rollout,omitempty"`
	// Trouble is true when the placement needs a look: misconfigured,
	// conflicted, not ready, or its rollout paused.
	Trouble bool `json:"trouble"`

	spec edgev2alpha1.EdgePlacementSpec
}

// Rollout is what the placements view shows of a rollout.
type Rollout struct {
	Phase       string `json:"phase"`
	Revision    string `json:"revision"`
	CurrentWave string `json:"currentWave,omitempty"`
	Message     string `json:"message,omitempty"`
	// Paused is spec.rollout.paused: paused by hand (a rollout paused past
	// maxFailures is not, and goes on with the next change).
	Paused bool `json:"paused,omitempty"`
	// MayPause: the viewer may patch the placement, so the page offers
	// to pause or resume its rollout (set per viewer, by the handler).
	MayPause bool `json:"mayPause,omitempty"`
}

func conditionOf(conds []metav1.Condition, t string) *Condition {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return nil
	}
	return &Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

func placementOf(space string, p *edgev2alpha1.EdgePlacement) Placement {
	out := Placement{
		Space: space, Name: p.Name, MatchingLocations: p.Status.MatchingLocationCount, spec: p.Spec,
		Ready:         conditionOf(p.Status.Conditions, edgev2alpha1.EdgePlacementReady),
		Misconfigured: conditionOf(p.Status.Conditions, edgev2alpha1.EdgePlacementMisconfigured),
		Conflicted:    conditionOf(p.Status.Conditions, edgev2alpha1.EdgePlacementConflicted),
	}
	if r := p.Status.Rollout; r != nil && p.Spec.Progressive() {
		out.Rollout = &Rollout{Phase: r.Phase, Revision: r.Revision, CurrentWave: r.CurrentWave, Message: r.Message, Paused: p.Spec.Rollout.Paused}
	}
	out.Trouble = (out.Misconfigured != nil && out.Misconfigured.Status == "True") ||
		(out.Conflicted != nil && out.Conflicted.Status == "True") ||
		(out.Ready != nil && out.Ready.Status != "True") ||
		(out.Rollout != nil && out.Rollout.Phase == edgev2alpha1.RolloutPhasePaused)
	return out
}

// SpaceRow is what the spaces view shows of a Space.
type SpaceRow struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Phase       string `json:"phase,omitempty"`
	URL         string `json:"url,omitempty"`
	SyncTargets int    `json:"syncTargets"`
	Placements  int    `json:"placements"`
}

func spaceOf(s *tenancyv1alpha1.Space) SpaceRow {
	return SpaceRow{Name: s.Name, Type: s.Spec.Type, Phase: string(s.Status.Phase), URL: s.Status.URL}
}

// Query selects a page of a view.
type Query struct {
	// Page counts from 0.
	Page     int
	PageSize int
	// Text filters rows by a substring of their names (case-insensitive).
	Text string
	// Only narrows the fleet to "trouble" (disconnected, silent, problems,
	// conflicts) or one state, and placements to "trouble".
	Only string
}

// Page sizes.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

func (q Query) normalized() Query {
	if q.PageSize <= 0 {
		q.PageSize = DefaultPageSize
	}
	q.PageSize = min(q.PageSize, MaxPageSize)
	q.Page = max(q.Page, 0)
	q.Text = strings.ToLower(strings.TrimSpace(q.Text))
	return q
}

// Paging says which page a view is.
type Paging struct {
	Page     int `json:"page"`
	Pages    int `json:"pages"`
	PageSize int `json:"pageSize"`
	// Matched is how many rows the filters kept, over all pages.
	Matched int `json:"matched"`
}

// page cuts rows to q's page.
func page[T any](rows []T, q Query) ([]T, Paging) {
	p := Paging{PageSize: q.PageSize, Matched: len(rows)}
	p.Pages = max(1, (len(rows)+q.PageSize-1)/q.PageSize)
	p.Page = min(q.Page, p.Pages-1)
	start := p.Page * q.PageSize
	end := min(start+q.PageSize, len(rows))
	return rows[start:end], p
}

// FleetCounts are the fleet's totals, before filters and paging.
type FleetCounts struct {
	Total        int `json:"total"`
	Connected    int `json:"connected"`
	Disconnected int `json:"disconnected"`
	Silent       int `json:"silent"`
	New          int `json:"new"`
	WithProblems int `json:"withProblems"`
	Problems     int `json:"problems"`
	Conflicts    int `json:"conflicts"`
	Spaces       int `json:"spaces"`
}

// FleetView is one page of the fleet.
type FleetView struct {
	Counts FleetCounts `json:"counts"`
	Paging Paging      `json:"paging"`
	Edges  []Edge      `json:"edges"`
	// HeartbeatTimeoutSeconds is after how long without a heartbeat an
	// edge whose tunnel is open is shown silent.
	HeartbeatTimeoutSeconds int `json:"heartbeatTimeoutSeconds"`
}

func stateRank(s string) int {
	switch s {
	case StateDisconnected, StateSilent:
		return 0
	case StateNew:
		return 2
	}
	return 3
}

func troubled(e Edge) bool {
	return e.State == StateDisconnected || e.State == StateSilent || e.ProblemCount > 0 || e.Conflicts > 0
}

// Fleet computes the fleet view of records at now: troubled edges first
// (disconnected and silent, then those with problems), then by space and
// name.
func Fleet(records []edgeRecord, now time.Time, q Query) FleetView {
	q = q.normalized()
	view := FleetView{HeartbeatTimeoutSeconds: int((edgev2alpha1.SyncerStatusRefresh + edgev2alpha1.SyncerHeartbeatTimeout) / time.Second)}
	spaceSet := map[string]struct{}{}
	rows := make([]Edge, 0, len(records))
	for _, r := range records {
		e := r.at(now)
		view.Counts.Total++
		spaceSet[e.Space] = struct{}{}
		switch e.State {
		case StateConnected:
			view.Counts.Connected++
		case StateDisconnected:
			view.Counts.Disconnected++
		case StateSilent:
			view.Counts.Silent++
		case StateNew:
			view.Counts.New++
		}
		if e.ProblemCount > 0 {
			view.Counts.WithProblems++
			view.Counts.Problems += e.ProblemCount
		}
		view.Counts.Conflicts += int(e.Conflicts)
		if q.Text != "" && !strings.Contains(strings.ToLower(e.Space+"/"+e.Name), q.Text) {
			continue
		}
		switch q.Only {
		case "", "all":
		case "trouble":
			if !troubled(e) {
				continue
			}
		default:
			if e.State != q.Only {
				continue
			}
		}
		rows = append(rows, e)
	}
	view.Counts.Spaces = len(spaceSet)
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if ra, rb := stateRank(a.State), stateRank(b.State); ra != rb {
			return ra < rb
		}
		if pa, pb := a.ProblemCount > 0 || a.Conflicts > 0, b.ProblemCount > 0 || b.Conflicts > 0; pa != pb {
			return pa
		}
		if a.Space != b.Space {
			return a.Space < b.Space
		}
		return a.Name < b.Name
	})
	view.Edges, view.Paging = page(rows, q)
	return view
}

// PlacementsView is one page of the placements, of every visible WDS.
type PlacementsView struct {
	Total      int         `json:"total"`
	Trouble    int         `json:"trouble"`
	Paging     Paging      `json:"paging"`
	Placements []Placement `json:"placements"`
}

// Placements computes the placements view: troubled placements first, then
// by WDS and name; each destination carries the state of its edge and of
// the placement's copies there (copies: by placement, then mailbox).
func Placements(placements []Placement, slices map[string][]Destination, edges map[string]edgeRecord, copies copyIndex, now time.Time, q Query) PlacementsView {
	q = q.normalized()
	var view PlacementsView
	rows := make([]Placement, 0, len(placements))
	for _, p := range placements {
		view.Total++
		if p.Trouble {
			view.Trouble++
		}
		if q.Text != "" && !strings.Contains(strings.ToLower(p.Space+"/"+p.Name), q.Text) {
			continue
		}
		if q.Only == "trouble" && !p.Trouble {
			continue
		}
		rows = append(rows, p)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Trouble != b.Trouble {
			return a.Trouble
		}
		if a.Space != b.Space {
			return a.Space < b.Space
		}
		return a.Name < b.Name
	})
	rows, view.Paging = page(rows, q)
	view.Placements = make([]Placement, len(rows))
	for i, p := range rows {
		k := key(p.Space, p.Name)
		p.Destinations = withEdgeStates(slices[k], edges, copies[k], now)
		view.Placements[i] = p
	}
	return view
}

// withEdgeStates returns dests with the state of each edge and of the
// placement's copies there (tallies: the placement's, by mailbox).
func withEdgeStates(dests []Destination, edges map[string]edgeRecord, tallies map[string]*copyTally, now time.Time) []Destination {
	expected := 0
	for _, d := range dests {
		if t := tallies[d.mailbox]; t != nil {
			expected = max(expected, t.present)
		}
	}
	out := make([]Destination, len(dests))
	for i, d := range dests {
		d.State = "unknown"
		if r, ok := edges[key(d.Space, d.SyncTarget)]; ok {
			e := r.at(now)
			d.State, d.Synced, d.ProblemCount = e.State, e.Synced, e.ProblemCount
		}
		d.Copies = copiesAt(tallies[d.mailbox], expected, d.State)
		out[i] = d
	}
	return out
}

// SpacesView is one page of the spaces.
type SpacesView struct {
	Total  int        `json:"total"`
	Paging Paging     `json:"paging"`
	Spaces []SpaceRow `json:"spaces"`
}

// Spaces computes the spaces view, by name; mailbox spaces (one per
// SyncTarget) only when q.Only is "mailbox" or "all".
func Spaces(rows []SpaceRow, q Query) SpacesView {
	q = q.normalized()
	view := SpacesView{}
	kept := make([]SpaceRow, 0, len(rows))
	for _, s := range rows {
		view.Total++
		if q.Text != "" && !strings.Contains(strings.ToLower(s.Name), q.Text) {
			continue
		}
		switch q.Only {
		case "all":
		case "":
			if s.Type == tenancyv1alpha1.SpaceTypeMailbox {
				continue
			}
		default:
			if s.Type != q.Only {
				continue
			}
		}
		kept = append(kept, s)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Name < kept[j].Name })
	view.Spaces, view.Paging = page(kept, q)
	return view
}

func key(space, name string) string { return space + "/" + name }
