// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// source is a placement that targets a mailbox: an EdgePlacement of a WDS.
type source struct {
	wds string
	ep  *edgev2alpha1.EdgePlacement
}

// key is the placement's queue and problems key.
func (s source) key() string { return spaces.Key(s.wds, "", s.ep.Name) }

// String names the placement as WDS/NAME, as conditions show it.
func (s source) String() string { return s.wds + "/" + s.ep.Name }

func (s source) same(o source) bool { return s.wds == o.wds && s.ep.Name == o.ep.Name }

// before orders placements: the older first (creationTimestamp), then by
// WDS and name, so that the order never depends on caches or maps.
func (s source) before(o source) bool {
	a, b := s.ep.CreationTimestamp, o.ep.CreationTimestamp
	if !a.Equal(&b) {
		return a.Before(&b)
	}
	if s.wds != o.wds {
		return s.wds < o.wds
	}
	return s.ep.Name < o.ep.Name
}

// claim is what one placement would put in a mailbox under one copy key.
type claim struct {
	source
	res resource
	// obj is the copy; when failed, the WDS object (its copy could not be
	// made, and the placement reports why).
	obj *unstructured.Unstructured
	// src is the WDS object obj is made from (a rollout's revision is
	// over sources, not over customized copies).
	src *unstructured.Unstructured
	// memo is obj's memo entry when obj is shared (see makeCopy).
	memo       *memoEntry
	failed     bool
	createOnly bool
	// clauses are the placement's clauses that select the object.
	clauses []edgev2alpha1.DownsyncClause
}

// conflict is a placement that loses a copy to another source.
type conflict struct {
	loser   source
	problem problem
}

// decide makes one copy of what several placements claim under one key
// (claims are in source order, oldest placement first; current is what the
// mailbox holds there, if anything). The rule, the same on every reconcile
// and after a restart because it reads only stored state:
//
//  1. One WDS owns the copy: the one the current copy names
//     (SourceSpaceAnnotation) while a placement of it still claims the
//     object here; otherwise the WDS of the oldest claiming placement. A
//     copy never changes hands while its owner still places it, so the edge
//     object never flips between owners.
//  2. Within the owning WDS, the content comes from the placement the
//     current copy names (SourcePlacementAnnotation) if it still claims the
//     object and could make its copy; otherwise from the oldest that could.
//     Placements of that WDS whose copy is the same add up (their names,
//     status collectors, singleton wish; create-only only if all are); one
//     whose copy differs (its Location's parameters differ) loses.
//  3. If no placement of the owning WDS could make its copy, the current
//     copy stays as it is (the placements say why).
//
// Every losing placement is returned with a problem naming the object, the
// destination and the winner.
func decide(claims []*claim, current metav1.Object, where string) (*desiredCopy, []conflict) {
	owner := claims[0].wds
	if current != nil && crossspace.Label(current, edgev2alpha1.PlacementCopyLabel) == "true" {
		held := crossspace.Annotation(current, edgev2alpha1.SourceSpaceAnnotation)
		for _, cl := range claims {
			if cl.wds == held {
				owner = held
				break
			}
		}
	}
	var winner *claim
	heldBy := ""
	if current != nil && crossspace.Annotation(current, edgev2alpha1.SourceSpaceAnnotation) == owner {
		heldBy = crossspace.Annotation(current, edgev2alpha1.SourcePlacementAnnotation)
	}
	for _, cl := range claims {
		if cl.wds == owner && !cl.failed && cl.ep.Name == heldBy {
			winner = cl
		}
	}
	if winner == nil {
		for _, cl := range claims {
			if cl.wds == owner && !cl.failed {
				winner = cl
				break
			}
		}
	}

	var d *desiredCopy
	var winnerName string
	if winner == nil {
		// Nothing of the owner could be made: keep what is there.
		for _, cl := range claims {
			if cl.wds == owner {
				d = &desiredCopy{res: cl.res, obj: cl.obj, keep: true}
				winnerName = cl.String()
				break
			}
		}
	} else {
		d = &desiredCopy{res: winner.res, obj: winner.obj, memo: winner.memo, createOnly: winner.createOnly, sourcePlacement: winner.ep.Name, sourceWDS: winner.wds}
		winnerName = winner.String()
	}

	var conflicts []conflict
	// what names the object in a conflict's message; most copies have none.
	what := func() string {
		return fmt.Sprintf("%s %s for %s", strings.ToLower(claims[0].obj.GetKind()), qualifiedName(claims[0].obj), where)
	}
	for _, cl := range claims {
		switch {
		case cl.wds != owner:
			conflicts = append(conflicts, conflict{cl.source, problem{Reason: edgev2alpha1.ConflictReasonOtherSpace, Message: fmt.Sprintf("%s is placed from EdgePlacement %s, not from this one: a copy stays with the source that holds it, and goes to the older placement when none does", what(), winnerName)}})
		case winner == nil || cl.failed:
			// Its own problem is reported already.
		case cl == winner || cl.obj == winner.obj || apiequality.Semantic.DeepEqual(cl.obj.Object, winner.obj.Object):
			d.createOnly = d.createOnly && cl.createOnly
			for _, c := range cl.clauses {
				d.selectedBy(cl.ep, c)
			}
		default:
			conflicts = append(conflicts, conflict{cl.source, problem{Reason: edgev2alpha1.ConflictReasonCustomization, Message: fmt.Sprintf("%s is customized differently by EdgePlacement %s, whose copy is kept: a copy stays with the placement that holds it, and goes to the older one when none does", what(), winnerName)}})
		}
	}
	return d, conflicts
}
