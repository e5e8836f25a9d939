// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

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
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:8])
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
// placement whose current revision the destination (key) is not admitted
// to: no create, update or delete of them, so that the mailbox keeps the
// revision it has. given (by placement key) is the revision a joiner's
// copies were made from instead (atCompleted). It returns, by placement
// (WDS/NAME), the revision each Progressive placement's copies are made
// from now, or "" for those left as they are.
//
// A syncer that reports rollouts (reports) hears of the revision from the
// SyncerConfig's record of it; otherwise, and for a placement that judges
// health itself (its CEL health check reads each copy), each copy
// carries its revision and the syncer reports on each.
func (r *mailboxReconciler) gate(key string, sources []placed, sel *selection, desired map[string]*desiredCopy, current map[string]metav1.Object, given map[string]string, reports bool) map[string]string {
	revisions := map[string]string{}
	for _, p := range sources {
		if !p.ep.Spec.Progressive() {
			continue
		}
		mine := func(d *desiredCopy) bool { return d.sourceWDS == p.wds && d.sourcePlacement == p.ep.Name }
		perCopy := !reports || p.ep.Spec.Rollout.HealthCheck != nil
		rev, ok := given[p.key()]
		if !ok {
			rev = r.revisionOf(sel, p.source)
			ok = r.admits != nil && r.admits(p.key(), key, rev)
		}
		if ok {
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
func rolloutRecords(cfg *edgev2alpha1.SyncerConfig, revisions map[string]string, desired map[string]*desiredCopy, current map[string]metav1.Object) []edgev2alpha1.RolloutRecord {
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
			out = append(out, edgev2alpha1.RolloutRecord{Placement: placement, Revision: rev, Digest: edgev2alpha1.CopiesDigest(entries[placement])})
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
