// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
)

// A Progressive placement's change reaches a destination only when its
// rollout admits the destination to the change's revision (rollout.go).
// The translator computes the revision from what it selects for the
// mailbox, from the same caches the copies are made from, so a copy is
// never written with content newer than the revision admitted: a change
// that arrives while the rollout has not seen it yet is a revision nobody
// is admitted to, and waits.

// revisionOf returns the revision of what a placement selects in sel: a
// hash over its downsync and dependencies, and each selected object's key
// and source content (stripped: no status, no server bookkeeping) with
// the resource version of the Customizer it names. It is the same for
// every destination (customization is not in it, only what it comes from).
func (r *mailboxReconciler) revisionOf(sel *selection, p source) string {
	h := sha256.New()
	spec, _ := json.Marshal(struct {
		Downsync     []edgev2alpha1.DownsyncClause
		Dependencies edgev2alpha1.DependencyPolicy
	}{p.ep.Spec.Downsync, p.ep.Spec.Dependencies})
	h.Write(spec)
	for _, k := range sortedKeys(sel.claims) {
		for _, cl := range sel.claims[k] {
			if !cl.source.same(p) || cl.src == nil {
				continue
			}
			fmt.Fprintf(h, "\n%d:%s=%s", len(k), k, r.sourceHash(p.wds, cl.src))
		}
	}
	if r.perSpace {
		// With CRDs per space a mailbox serves its own copy of each CRD,
		// which a destination not admitted keeps as it is: a change of
		// definition rolls out as a change of content does. (Bound to
		// spaces, a mailbox serves the WDS's CRD itself: it cannot keep
		// an older one, and the revision leaves CRDs out.)
		crds := r.crdsOf(sel, p)
		for _, name := range sortedKeys(crds) {
			fmt.Fprintf(h, "\ncrd:%s=%s", name, r.specKeys.of(crds[name]))
		}
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:8])
}

// crdsOf returns, by name, the CRDs of the WDS a placement needs in sel:
// those it places at the edge and those of the custom resources it
// places.
func (r *mailboxReconciler) crdsOf(sel *selection, p source) map[string]*apiextensionsv1.CustomResourceDefinition {
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for name, list := range sel.crdClaims {
		for _, c := range list {
			if c.same(p) {
				out[name] = c.crd
			}
		}
	}
	for _, list := range sel.claims {
		for _, cl := range list {
			if cl.res.Group == "" || !cl.source.same(p) {
				continue
			}
			name := crossspace.CustomResourceName(cl.res.GroupResource())
			if _, ok := out[name]; ok {
				continue
			}
			if crd, ok := r.crdIn(p.wds, name); ok && r.ownCRD(crd, p.wds) {
				out[name] = crd
			}
		}
	}
	return out
}

// admission decides, for each Progressive placement (by key), the
// revision the destination's copies are made from now: the current one
// when the placement's rollout admits the destination to it, the one
// given to a joiner (atCompleted), or "" when the mailbox keeps what it
// has.
func (r *mailboxReconciler) admission(key string, sources []placed, sel *selection, given map[string]string) map[string]string {
	out := map[string]string{}
	for _, p := range sources {
		if !p.ep.Spec.Progressive() {
			continue
		}
		rev, ok := given[p.key()]
		if !ok {
			rev = r.revisionOf(sel, p.source)
			if r.admits == nil || !r.admits(p.key(), key, rev) {
				rev = ""
			}
		}
		out[p.key()] = rev
	}
	return out
}

// pinCRDs keeps, for each Progressive placement the destination is not
// admitted to (admitted), the CRDs the mailbox serves for it as they
// are, with CRDs per space: its copies of the WDS's CRDs are what its
// placement's copies and edge keep using until its wave comes. The CRDs
// the placement places at the edge stay those its record names (those
// the mailbox holds), and a CRD new in the revision waits with its
// objects. A CRD that another placement of the WDS needs now (strategy
// All, or admitted) is not kept: it moves for that placement anyway.
func (r *mailboxReconciler) pinCRDs(mailbox string, sources []placed, sel *selection, cfg *edgev2alpha1.SyncerConfig, admitted map[string]string) {
	if !r.perSpace {
		return
	}
	pinned := func(p placed) bool { rev, ok := admitted[p.key()]; return ok && rev == "" }
	movedBy := map[string]map[string]bool{} // by WDS, the CRDs unpinned placements need
	for _, p := range sources {
		if pinned(p) {
			continue
		}
		if movedBy[p.wds] == nil {
			movedBy[p.wds] = map[string]bool{}
		}
		for name := range r.crdsOf(sel, p.source) {
			movedBy[p.wds][name] = true
		}
	}
	for _, p := range sources {
		if !pinned(p) {
			continue
		}
		held := map[string]*apiextensionsv1.CustomResourceDefinition{}
		for _, crd := range r.crdsIn(mailbox) {
			if crossspace.Label(crd, edgev2alpha1.PlacementCopyLabel) == "true" && crd.Annotations[edgev2alpha1.SourceSpaceAnnotation] == p.wds &&
				!movedBy[p.wds][crd.Name] {
				held[crd.Name] = crd
			}
		}
		atEdge := map[string]bool{}
		for _, rec := range cfg.Spec.Rollouts {
			if rec.Placement == p.String() {
				for _, name := range rec.CRDs {
					atEdge[name] = true
				}
			}
		}
		recorded := len(atEdge) > 0
		for name, list := range sel.crdClaims {
			kept := list[:0:0]
			for _, c := range list {
				switch {
				case !c.same(p.source) || movedBy[p.wds][name]:
					kept = append(kept, c)
				case !c.atEdge:
					// Served for upsync alone: as the mailbox has it.
					if h := held[name]; h != nil {
						c.crd = h
					}
					kept = append(kept, c)
				case !recorded && held[name] != nil:
					// A record from before records named CRDs: the edge
					// keeps what the placement selects and the mailbox
					// holds.
					atEdge[name] = true
				}
			}
			sel.crdClaims[name] = kept
		}
		for name := range atEdge {
			if crd := held[name]; crd != nil {
				sel.claimCRD(p.source, crd, true)
			}
		}
		if sel.pinnedCRDs == nil {
			sel.pinnedCRDs = map[string]map[string]*apiextensionsv1.CustomResourceDefinition{}
		}
		sel.pinnedCRDs[p.key()] = held
	}
	// What the edges get: the CRDs some placement places there now.
	clear(sel.crdNames)
	for name, list := range sel.crdClaims {
		if len(list) == 0 {
			delete(sel.crdClaims, name)
		}
		if slices.ContainsFunc(list, func(c crdClaim) bool { return c.atEdge }) {
			sel.crdNames[name] = true
		}
	}
}

// keepCRDsOfKept adds to the CRDs the mailbox must serve (crds) those of
// the copies gate keeps as they are, whose revision may no longer place
// their resource: deleting the CRD would delete them.
func (r *mailboxReconciler) keepCRDsOfKept(mailbox string, desired map[string]*desiredCopy, crds map[string]*apiextensionsv1.CustomResourceDefinition) {
	if !r.perSpace {
		return
	}
	for _, d := range desired {
		if !d.keep || d.res.Group == "" {
			continue
		}
		name := crossspace.CustomResourceName(d.res.GroupResource())
		if _, ok := crds[name]; ok {
			continue
		}
		if held, ok := r.crdIn(mailbox, name); ok && crossspace.Label(held, edgev2alpha1.PlacementCopyLabel) == "true" {
			crds[name] = held
		}
	}
}

// sourceHash is the content hash of a WDS object as a revision sees it,
// with the Customizer it names (by resource version: a Customizer has no
// status, so that changes only with it).
func (r *mailboxReconciler) sourceHash(wds string, obj *unstructured.Unstructured) string {
	var hash string
	if r.memo != nil {
		hash, _ = r.memo.copyOf(obj, func() *unstructured.Unstructured { return sourceCopy(wds, obj) }).revisionHash()
	} else {
		hash, _ = contentHash(sourceCopy(wds, obj))
	}
	if ref := annotation(obj, edgev2alpha1.CustomizerAnnotation); ref != "" {
		ns, name, _ := splitRef(ref, obj.GetNamespace())
		if cust, ok := r.customizer(wds, ns, name); ok {
			hash += "+" + cust.ResourceVersion
		}
	}
	return hash
}

// gate leaves alone, in a mailbox, the copies of each Progressive
// placement whose current revision the destination is not admitted to
// (admitted, by placement key: "" for those): no create, update or delete
// of them, so that the mailbox keeps the revision it has. It returns, by placement
// (WDS/NAME), the revision each Progressive placement's copies are made
// from now, or "" for those left as they are.
//
// A syncer that reports rollouts (reports) hears of the revision from the
// SyncerConfig's record of it; otherwise, and for a placement that judges
// health itself (its CEL health check reads each copy), each copy
// carries its revision and the syncer reports on each.
func (r *mailboxReconciler) gate(sources []placed, desired map[string]*desiredCopy, current map[string]metav1.Object, admitted map[string]string, reports bool) map[string]string {
	revisions := map[string]string{}
	for _, p := range sources {
		if !p.ep.Spec.Progressive() {
			continue
		}
		mine := func(d *desiredCopy) bool { return d.sourceWDS == p.wds && d.sourcePlacement == p.ep.Name }
		perCopy := !reports || p.ep.Spec.Rollout.HealthCheck != nil
		if rev := admitted[p.key()]; rev != "" {
			// Admitted, or a joiner's: the last completed revision.
			for _, d := range desired {
				if mine(d) && perCopy {
					d.revision = rev
				}
			}
			revisions[p.String()] = rev
			continue
		}
		revisions[p.String()] = ""
		for k, d := range desired {
			switch {
			case !mine(d):
			case current[k] == nil:
				delete(desired, k)
			default:
				d.keep = true
			}
		}
		for k, cur := range current {
			if _, ok := desired[k]; ok || crossspace.Label(cur, edgev2alpha1.PlacementCopyLabel) != "true" ||
				crossspace.Annotation(cur, edgev2alpha1.SourceSpaceAnnotation) != p.wds ||
				crossspace.Annotation(cur, edgev2alpha1.SourcePlacementAnnotation) != p.ep.Name {
				continue
			}
			// Not in this revision: kept until the destination takes it.
			stub := &unstructured.Unstructured{}
			stub.SetNamespace(cur.GetNamespace())
			stub.SetName(cur.GetName())
			desired[k] = &desiredCopy{res: resource{GroupVersionResource: gvrOfKey(k), Namespaced: cur.GetNamespace() != ""}, obj: stub, keep: true}
		}
	}
	return revisions
}

// rolloutRecords are the SyncerConfig's records of the revisions its
// Progressive placements' copies are made from (revisions, from gate): a
// new record, with the digest of what was written, for each placement
// whose copies were written; the record the SyncerConfig has for one left
// as it is.
func rolloutRecords(cfg *edgev2alpha1.SyncerConfig, revisions map[string]string, desired map[string]*desiredCopy, current map[string]metav1.Object, crdClaims map[string][]crdClaim) []edgev2alpha1.RolloutRecord {
	if len(revisions) == 0 {
		return nil
	}
	entries := map[string][]edgev2alpha1.CopyDigestEntry{}
	for k, d := range desired {
		placement := d.sourceWDS + "/" + d.sourcePlacement
		if rev := revisions[placement]; rev == "" || d.sourcePlacement == "" || isNamespaces(d.res.GroupVersionResource) {
			continue
		}
		cur := current[k]
		if cur != nil && crossspace.Label(cur, edgev2alpha1.UpsyncedLabel) == "true" {
			continue // not a copy: the edge made it
		}
		hash := d.hash
		if hash == "" && cur != nil {
			hash = crossspace.Annotation(cur, ContentHashAnnotation)
		}
		entries[placement] = append(entries[placement], edgev2alpha1.CopyDigestEntry{
			Resource: d.res.GroupResource().String(), Namespace: d.obj.GetNamespace(), Name: d.obj.GetName(), ContentHash: hash})
	}
	var out []edgev2alpha1.RolloutRecord
	for _, placement := range sortedKeys(revisions) {
		rev := revisions[placement]
		if rev != "" {
			rec := edgev2alpha1.RolloutRecord{Placement: placement, Revision: rev, Digest: edgev2alpha1.CopiesDigest(entries[placement])}
			for _, name := range sortedKeys(crdClaims) {
				if slices.ContainsFunc(crdClaims[name], func(c crdClaim) bool { return c.atEdge && c.String() == placement }) {
					rec.CRDs = append(rec.CRDs, name)
				}
			}
			out = append(out, rec)
			continue
		}
		for _, rec := range cfg.Spec.Rollouts {
			if rec.Placement == placement {
				out = append(out, rec)
			}
		}
	}
	return out
}
