// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// crdClaim is a placement's need that the mailbox serve a CRD, as its WDS
// defines it: one a clause selects, one Follow brings along, one whose
// resource the placement upsyncs, or one whose objects it places.
type crdClaim struct {
	source
	crd *apiextensionsv1.CustomResourceDefinition
	// atEdge says the placement places the CRD at the edge too (a clause
	// selects it, or Follow brings it: the SyncerConfig's spec.crds),
	// not only has the mailbox serve it (upsync).
	atEdge bool
}

// claimCRD records that a placement needs the mailbox to serve its WDS's
// CRD crd, and with atEdge that it places it at the edge.
func (s *selection) claimCRD(src source, crd *apiextensionsv1.CustomResourceDefinition, atEdge bool) {
	if s.crdClaims == nil {
		s.crdClaims = map[string][]crdClaim{}
	}
	list := s.crdClaims[crd.Name]
	for i := range list {
		if list[i].same(src) {
			list[i].atEdge = list[i].atEdge || atEdge
			return
		}
	}
	s.crdClaims[crd.Name] = append(list, crdClaim{source: src, crd: crd, atEdge: atEdge})
}

// specKeys memoizes what a CRD defines, its name and spec, by UID and
// resource version, for the comparison of the definitions placements
// claim, at every reconcile of every mailbox: hashing a schema of a
// hundred kilobytes each time would be most of a reconcile.
type specKeys struct {
	mu   sync.Mutex
	keys map[string]string
}

// specKeyLimit bounds the memo; it starts over beyond.
const specKeyLimit = 10000

func (m *specKeys) of(crd *apiextensionsv1.CustomResourceDefinition) string {
	k := string(crd.UID) + "/" + crd.ResourceVersion
	m.mu.Lock()
	defer m.mu.Unlock()
	if key, ok := m.keys[k]; ok {
		return key
	}
	if m.keys == nil || len(m.keys) >= specKeyLimit {
		m.keys = map[string]string{}
	}
	key := spaces.DefinitionIdentity(&apiextensionsv1.CustomResourceDefinition{Spec: crd.Spec})
	m.keys[k] = key
	return key
}

// sameDefinition tells whether two CRDs define the same: the same object,
// or equal specs.
func (r *mailboxReconciler) sameDefinition(a, b *apiextensionsv1.CustomResourceDefinition) bool {
	return a == b || a.Name == b.Name && r.specKeys.of(a) == r.specKeys.of(b)
}

// decideCRDs decides, for each CRD the placements need the mailbox to
// serve (sel.crdClaims, and the CRDs of the custom resources they place),
// whose definition it serves, and returns them by name.
//
// With CRDs bound to spaces a name has one definition, and this is the
// union of what is needed. With CRDs per space, WDSs may define a name
// differently, and a destination serves one definition; the rule is the
// one copies follow (decide), by WDS: the WDS whose CRD the mailbox holds
// (its SourceSpaceAnnotation) keeps it while a placement of it still needs
// it there; otherwise the oldest placement's WDS. Placements of WDSs that
// define the name as the owner does add up. The others lose: their objects
// of the resource are left out of the mailbox (whatever version they are
// read in), and both they and the owner's placements report the conflict
// (ConflictReasonDefinition), for the owner's users must know that other
// WDSs' objects are not placed beside theirs.
func (r *mailboxReconciler) decideCRDs(mailbox string, sel *selection, where string) map[string]*apiextensionsv1.CustomResourceDefinition {
	claims := map[string][]crdClaim{}
	for name, list := range sel.crdClaims {
		claims[name] = append(claims[name], list...)
	}
	// The CRDs of the custom resources placed: the WDS's own definition.
	for _, list := range sel.claims {
		for _, cl := range list {
			if cl.res.Group == "" {
				continue
			}
			name := crossspace.CustomResourceName(cl.res.GroupResource())
			crd, ok := r.crdIn(cl.wds, name)
			if pins, pinned := sel.pinnedCRDs[cl.key()]; pinned {
				// Not admitted here: the mailbox's own, or none yet.
				crd, ok = pins[name]
			} else if ok && r.perSpace && !r.ownCRD(crd, cl.wds) {
				ok = false
			}
			if !ok {
				continue
			}
			if !slices.ContainsFunc(claims[name], func(c crdClaim) bool { return c.same(cl.source) }) {
				claims[name] = append(claims[name], crdClaim{source: cl.source, crd: crd})
			}
		}
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, name := range sortedKeys(claims) {
		list := claims[name]
		slices.SortStableFunc(list, func(a, b crdClaim) int {
			switch {
			case a.before(b.source):
				return -1
			case b.before(a.source):
				return 1
			}
			return 0
		})
		owner := list[0]
		if held, ok := r.crdIn(mailbox, name); ok && r.perSpace {
			from := held.Annotations[edgev2alpha1.SourceSpaceAnnotation]
			if i := slices.IndexFunc(list, func(c crdClaim) bool { return c.wds == from }); i >= 0 {
				owner = list[i]
			}
		}
		out[name] = owner.crd
		var losers []crdClaim
		for _, c := range list {
			if !r.sameDefinition(c.crd, owner.crd) {
				losers = append(losers, c)
			}
		}
		if len(losers) == 0 {
			continue
		}
		gr := schema.GroupResource{Group: owner.crd.Spec.Group, Resource: owner.crd.Spec.Names.Plural}
		var others []string
		for _, l := range losers {
			others = append(others, "EdgePlacement "+l.String())
			sel.problems[l.key()] = append(sel.problems[l.key()], problem{Reason: edgev2alpha1.ConflictReasonDefinition, Message: fmt.Sprintf(
				"CRD %s for %s is defined differently in WDS %s, whose definition is served there (EdgePlacement %s): none of this placement's %s are placed there; a destination keeps the definition it serves while a placement of its WDS still needs it, and takes the older placement's when none does",
				name, where, owner.wds, owner.String(), gr.String())})
			sel.dropClaims(l.source, gr)
		}
		reported := map[string]bool{}
		for _, c := range list {
			if r.sameDefinition(c.crd, owner.crd) && !reported[c.key()] {
				reported[c.key()] = true
				sel.problems[c.key()] = append(sel.problems[c.key()], problem{Reason: edgev2alpha1.ConflictReasonDefinition, Message: fmt.Sprintf(
					"CRD %s for %s is served as this placement's WDS %s defines it; %s define it differently, and their %s are not placed there",
					name, where, owner.wds, strings.Join(others, ", "), gr.String())})
			}
		}
	}
	return out
}

// dropClaims removes a placement's claims of a resource's objects, in any
// version.
func (s *selection) dropClaims(src source, gr schema.GroupResource) {
	for k, list := range s.claims {
		kept := slices.DeleteFunc(list, func(cl *claim) bool { return cl.same(src) && cl.res.GroupResource() == gr })
		if len(kept) == 0 {
			delete(s.claims, k)
		} else {
			s.claims[k] = kept
		}
	}
}

// ownCRD reports whether a CRD is a space's own: with CRDs per space, one
// the space defines (not the root's served everywhere); bound, one bound
// to the space and not to every space.
func (r *mailboxReconciler) ownCRD(crd *apiextensionsv1.CustomResourceDefinition, space string) bool {
	if r.perSpace {
		return crossspace.SpaceOf(crd) == space && !spaces.ServedEverywhere(crd.Annotations)
	}
	b := spaces.BindingsOf(crd.Annotations)
	return b.Has(space) && !b.All()
}
