// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// A destination that joins a Progressive placement mid-rollout holds none
// of its copies, so its mailbox cannot be the old version (revision.go):
// it gets the last revision that completed, from a snapshot of what that
// revision selected, kept when it completed. The snapshot is a Secret in
// the root space (what a placement selects may hold Secrets, and the root
// space is the server's: no tenant reads or writes it there), one per
// placement, replaced at each completion and deleted with the placement.
// It holds the selected WDS objects stripped as copies are (before
// customization: each joiner's copies are made from it as from the WDS)
// with the Customizers they name, gzipped JSON of at most
// maxSnapshotBytes; a larger revision is not kept, and its joiners wait
// for their wave with nothing meanwhile, as before any revision completed.

const (
	// snapshotNamespace is the root space's namespace of the snapshots.
	snapshotNamespace = "kubestellar-system"
	// snapshotLabel marks a snapshot Secret; snapshotPlacement is the key
	// of its placement (WDS|NAME).
	snapshotLabel     = "edge.kubestellar.io/rollout-snapshot"
	snapshotPlacement = "edge.kubestellar.io/placement"
	snapshotKey       = "snapshot.json.gz"
	// maxSnapshotBytes bounds a snapshot compressed (a Secret's data may
	// hold 1 MiB); maxSnapshotJSON bounds it inflated, when read.
	maxSnapshotBytes = 900 << 10
	maxSnapshotJSON  = 64 << 20
)

var errSnapshotTooLarge = errors.New("too large to keep")

// rolloutSnapshot is what a completed revision selected.
type rolloutSnapshot struct {
	Revision string `json:"revision"`
	// PlacementUID is the placement's incarnation: a placement deleted and
	// made again under its name does not inherit the snapshot.
	PlacementUID string          `json:"placementUID"`
	Entries      []snapshotEntry `json:"entries"`
	// Customizers are those the entries name, by NAMESPACE/NAME.
	Customizers map[string]*edgev2alpha1.Customizer `json:"customizers,omitempty"`
	// WithCRDs says that CRDs holds the revision's CRDs (CRDs per space;
	// snapshots from before did not keep them).
	WithCRDs bool          `json:"withCRDs,omitempty"`
	CRDs     []snapshotCRD `json:"crds,omitempty"`
}

// snapshotCRD is a CRD of the WDS the revision needs: one it places at
// the edge (AtEdge), or that of custom resources it places. Its UID and
// resource version stay, which name its definition (specKeys).
type snapshotCRD struct {
	AtEdge bool                                      `json:"atEdge,omitempty"`
	CRD    *apiextensionsv1.CustomResourceDefinition `json:"crd"`
}

// snapshotEntry is one selected object: its resource, how its placement
// selected it, and the object stripped (no status, no server fields).
type snapshotEntry struct {
	Group      string                        `json:"group,omitempty"`
	Version    string                        `json:"version"`
	Resource   string                        `json:"resource"`
	Namespaced bool                          `json:"namespaced,omitempty"`
	CreateOnly bool                          `json:"createOnly,omitempty"`
	Clauses    []edgev2alpha1.DownsyncClause `json:"clauses,omitempty"`
	// Customizer names the entry's Customizer (NAMESPACE/NAME), and
	// Expand says that its parameters are expanded.
	Customizer string          `json:"customizer,omitempty"`
	Expand     bool            `json:"expand,omitempty"`
	Object     json.RawMessage `json:"object"`
}

// snapshotName is the name of a placement's snapshot Secret: a hash of
// its key, which no name a tenant chooses can make collide.
func snapshotName(placement string) string {
	sum := sha256.Sum256([]byte(placement))
	return "rollout-" + hex.EncodeToString(sum[:12])
}

// snapshotOf makes the snapshot of what sel selects for source p, whose
// revision is revision.
func (r *mailboxReconciler) snapshotOf(sel *selection, p source, revision string) (*rolloutSnapshot, error) {
	snap := &rolloutSnapshot{Revision: revision, PlacementUID: string(p.ep.UID), Customizers: map[string]*edgev2alpha1.Customizer{}}
	for _, k := range sortedKeys(sel.claims) {
		for _, cl := range sel.claims[k] {
			if !cl.source.same(p) || cl.src == nil {
				continue
			}
			raw, err := json.Marshal(strip(cl.src).Object)
			if err != nil {
				return nil, err
			}
			e := snapshotEntry{Group: cl.res.Group, Version: cl.res.Version, Resource: cl.res.Resource, Namespaced: cl.res.Namespaced,
				CreateOnly: cl.createOnly, Clauses: cl.clauses, Object: raw,
				Expand: annotation(cl.src, edgev2alpha1.ExpandParametersAnnotation) == "true"}
			if ref := annotation(cl.src, edgev2alpha1.CustomizerAnnotation); ref != "" {
				ns, name, hasNS := splitRef(ref, cl.src.GetNamespace())
				if hasNS {
					if cust, ok := r.customizer(p.wds, ns, name); ok {
						e.Customizer = ns + "/" + name
						snap.Customizers[e.Customizer] = cust
					}
				}
			}
			snap.Entries = append(snap.Entries, e)
		}
	}
	if r.perSpace {
		snap.WithCRDs = true
		crds := r.crdsOf(sel, p)
		for _, name := range sortedKeys(crds) {
			crd := crds[name]
			atEdge := slices.ContainsFunc(sel.crdClaims[name], func(c crdClaim) bool { return c.atEdge && c.same(p) })
			kept := &apiextensionsv1.CustomResourceDefinition{Spec: crd.Spec, ObjectMeta: metav1.ObjectMeta{Name: crd.Name, UID: crd.UID,
				ResourceVersion: crd.ResourceVersion, Labels: crd.Labels, Annotations: crd.Annotations}}
			snap.CRDs = append(snap.CRDs, snapshotCRD{AtEdge: atEdge, CRD: kept})
		}
	}
	return snap, nil
}

// giveCRDs has a joiner's placement p use the CRDs of the snapshot's
// revision: those it places at the edge, and those its custom resources'
// copies are served by in the mailbox (pinnedCRDs).
func (s *rolloutSnapshot) giveCRDs(sel *selection, p source) {
	if !s.WithCRDs {
		return
	}
	atEdge := map[string]*apiextensionsv1.CustomResourceDefinition{}
	pins := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range s.CRDs {
		if c.CRD == nil {
			continue
		}
		pins[c.CRD.Name] = c.CRD
		if c.AtEdge {
			atEdge[c.CRD.Name] = c.CRD
		}
	}
	for name, list := range sel.crdClaims {
		// What the placement places at the edge is the revision's; a CRD
		// it only upsyncs is served as its WDS has it now.
		sel.crdClaims[name] = slices.DeleteFunc(list, func(c crdClaim) bool { return c.same(p) && (c.atEdge || atEdge[name] != nil) })
	}
	for _, crd := range atEdge {
		sel.claimCRD(p, crd, true)
	}
	if sel.pinnedCRDs == nil {
		sel.pinnedCRDs = map[string]map[string]*apiextensionsv1.CustomResourceDefinition{}
	}
	sel.pinnedCRDs[p.key()] = pins
}

// splitRef reads a Customizer reference (NAME in the object's namespace,
// or NAMESPACE/NAME); hasNS is false for a bare name on a cluster-scoped
// object, which names nothing.
func splitRef(ref, namespace string) (ns, name string, hasNS bool) {
	if ns, name, hasNS = strings.Cut(ref, "/"); hasNS {
		return ns, name, true
	}
	return namespace, ref, namespace != ""
}

// claims makes, from the snapshot, the claims of source p for its
// destination, as selectFor makes them from the WDS; the problems are
// those of copies that could not be made.
func (s *rolloutSnapshot) claims(p placed) (map[string]*claim, []problem, error) {
	out := map[string]*claim{}
	var problems []problem
	for _, e := range s.Entries {
		src := &unstructured.Unstructured{}
		if err := src.UnmarshalJSON(e.Object); err != nil {
			return nil, nil, fmt.Errorf("the snapshot of revision %s holds an object that cannot be read: %w", s.Revision, err)
		}
		res := resource{GroupVersionResource: schema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource}, Namespaced: e.Namespaced}
		k := copyKey(res.GroupVersionResource, src.GetNamespace(), src.GetName())
		var cust *edgev2alpha1.Customizer
		if e.Customizer != "" {
			cust = s.Customizers[e.Customizer]
		}
		cp := src.DeepCopy()
		if err := customize(cp, cust, e.Expand, p.dest); err != nil {
			problems = append(problems, problem{Reason: "CustomizationFailed", Message: fmt.Sprintf("%s %s (revision %s) for SyncTarget %s: %v",
				e.Resource, qualifiedName(src), s.Revision, p.dest.syncTarget.GetName(), err)})
			out[k] = &claim{source: p.source, res: res, obj: src, src: src, failed: true}
			continue
		}
		setMeta(cp, "annotations", edgev2alpha1.SourceSpaceAnnotation, p.wds)
		out[k] = &claim{source: p.source, res: res, obj: cp, src: src, createOnly: e.CreateOnly, clauses: e.Clauses}
	}
	return out, problems, nil
}

// encode gzips the snapshot's JSON; errSnapshotTooLarge past the bound.
func (s *rolloutSnapshot) encode() ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(s); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > maxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d KiB compressed, more than %d KiB", errSnapshotTooLarge, buf.Len()>>10, maxSnapshotBytes>>10)
	}
	return buf.Bytes(), nil
}

func decodeSnapshot(data []byte) (*rolloutSnapshot, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxSnapshotJSON+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxSnapshotJSON {
		return nil, fmt.Errorf("more than %d MiB inflated", maxSnapshotJSON>>20)
	}
	s := &rolloutSnapshot{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}

// snapshots keeps the placements' snapshots in the root space, with the
// last one read or written of each.
type snapshots struct {
	client client.Client
	mu     sync.Mutex
	byKey  map[string]*rolloutSnapshot
}

func newSnapshots(c client.Client) *snapshots {
	return &snapshots{client: c, byKey: map[string]*rolloutSnapshot{}}
}

func (s *snapshots) cached(placement string) *rolloutSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[placement]
}

func (s *snapshots) remember(placement string, snap *rolloutSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if snap == nil {
		delete(s.byKey, placement)
		return
	}
	s.byKey[placement] = snap
}

// get returns the snapshot of a placement (its key and UID) at revision,
// or nil when none is kept.
func (s *snapshots) get(ctx context.Context, placement, uid, revision string) (*rolloutSnapshot, error) {
	if snap := s.cached(placement); snap != nil && snap.Revision == revision && snap.PlacementUID == uid {
		return snap, nil
	}
	secret := &corev1.Secret{}
	err := s.client.Get(spaces.WithSpace(ctx, spaces.Root), client.ObjectKey{Namespace: snapshotNamespace, Name: snapshotName(placement)}, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	snap, err := decodeSnapshot(secret.Data[snapshotKey])
	if err != nil {
		// Not ours to have made: the next completion replaces it.
		klog.FromContext(ctx).Error(err, "a rollout snapshot cannot be read; destinations that join wait for their wave", "placement", placement)
		return nil, nil
	}
	if snap.Revision != revision || snap.PlacementUID != uid {
		return nil, nil
	}
	s.remember(placement, snap)
	return snap, nil
}

// keep stores snap as the placement's snapshot, unless it is stored
// already.
func (s *snapshots) keep(ctx context.Context, placement string, snap *rolloutSnapshot) error {
	if have := s.cached(placement); have != nil && have.Revision == snap.Revision && have.PlacementUID == snap.PlacementUID {
		return nil
	}
	rctx := spaces.WithSpace(ctx, spaces.Root)
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: snapshotNamespace, Name: snapshotName(placement)}
	err := s.client.Get(rctx, key, secret)
	exists := err == nil
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if have, err := decodeSnapshot(secret.Data[snapshotKey]); err == nil && have.Revision == snap.Revision && have.PlacementUID == snap.PlacementUID {
			s.remember(placement, have)
			return nil
		}
	}
	data, err := snap.encode()
	if errors.Is(err, errSnapshotTooLarge) {
		klog.FromContext(ctx).Info("the completed revision is too large to keep for destinations that join mid-rollout: they wait for their wave",
			"placement", placement, "revision", snap.Revision, "why", err.Error())
		s.remember(placement, nil)
		return s.drop(ctx, placement)
	}
	if err != nil {
		return err
	}
	secret.Namespace, secret.Name = snapshotNamespace, snapshotName(placement)
	secret.Labels = map[string]string{snapshotLabel: "true"}
	secret.Annotations = map[string]string{snapshotPlacement: placement, edgev2alpha1.RevisionAnnotation: snap.Revision}
	secret.Type = "kubestellar.io/rollout-snapshot"
	secret.Data = map[string][]byte{snapshotKey: data}
	if exists {
		err = s.client.Update(rctx, secret)
	} else {
		err = s.client.Create(rctx, secret)
		if apierrors.IsNotFound(err) {
			// The root space's namespace, made once.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: snapshotNamespace}}
			if err := s.client.Create(rctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			secret.ResourceVersion = ""
			err = s.client.Create(rctx, secret)
		}
	}
	if err != nil {
		return err
	}
	s.remember(placement, snap)
	return nil
}

// drop deletes a placement's snapshot.
func (s *snapshots) drop(ctx context.Context, placement string) error {
	s.remember(placement, nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: snapshotNamespace, Name: snapshotName(placement)}}
	if err := s.client.Delete(spaces.WithSpace(ctx, spaces.Root), secret); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// sweep deletes the snapshots of placements that are gone or no longer
// Progressive (deleted while the server was down: nothing else would).
func (s *snapshots) sweep(ctx context.Context, progressive func(placement string) bool) error {
	var list corev1.SecretList
	if err := s.client.List(spaces.WithSpace(ctx, spaces.Root), &list, client.InNamespace(snapshotNamespace), client.MatchingLabels{snapshotLabel: "true"}); err != nil {
		return err
	}
	for i := range list.Items {
		placement := list.Items[i].Annotations[snapshotPlacement]
		if placement != "" && snapshotName(placement) == list.Items[i].Name && progressive(placement) {
			continue
		}
		if err := s.client.Delete(spaces.WithSpace(ctx, spaces.Root), &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		klog.FromContext(ctx).V(2).Info("deleted the rollout snapshot of a placement that is gone", "placement", placement)
	}
	return nil
}

// atCompleted gives a destination (key) that joins a Progressive
// placement's rollout mid-way the last revision that completed: one not
// admitted to the current revision that holds none of the placement's
// copies. The placement's claims in sel are replaced by those made from
// the snapshot. It returns the revision given, by placement key, for gate.
func (r *mailboxReconciler) atCompleted(ctx context.Context, key string, sources []placed, sel *selection, current map[string]metav1.Object) (map[string]string, error) {
	if r.completed == nil {
		return nil, nil
	}
	var given map[string]string
	for _, p := range sources {
		if !p.ep.Spec.Progressive() || holdsCopyOf(current, p.source) {
			continue
		}
		rev := r.revisionOf(sel, p.source)
		if r.admits != nil && r.admits(p.key(), key, rev) {
			continue
		}
		snap, err := r.completed(ctx, p.source)
		if err != nil {
			return nil, err
		}
		if snap == nil || snap.Revision == rev {
			continue
		}
		made, problems, err := snap.claims(p)
		if err != nil {
			klog.FromContext(ctx).Error(err, "the rollout snapshot cannot be used: the destination waits for its wave", "placement", p.String())
			continue
		}
		for k, list := range sel.claims {
			kept := list[:0:0]
			for _, cl := range list {
				if !cl.source.same(p.source) {
					kept = append(kept, cl)
				}
			}
			if len(kept) == 0 {
				delete(sel.claims, k)
			} else {
				sel.claims[k] = kept
			}
		}
		for k, cl := range made {
			// In source order, as selectFor appends: p is the newest of
			// the claimants only if it comes last among sources.
			sel.claims[k] = insertInOrder(sel.claims[k], cl, sources)
		}
		if r.perSpace {
			snap.giveCRDs(sel, p.source)
		}
		sel.problems[p.key()] = append(sel.problems[p.key()], problems...)
		if given == nil {
			given = map[string]string{}
		}
		given[p.key()] = snap.Revision
		klog.FromContext(ctx).V(2).Info("a destination that joins mid-rollout gets the last completed revision", "placement", p.String(), "revision", snap.Revision)
	}
	return given, nil
}

// insertInOrder adds cl to a key's claims where selectFor would have: the
// claims are in the order of sources.
func insertInOrder(list []*claim, cl *claim, sources []placed) []*claim {
	rank := func(s source) int {
		for i, p := range sources {
			if p.source.same(s) {
				return i
			}
		}
		return len(sources)
	}
	at := len(list)
	for i, other := range list {
		if rank(other.source) > rank(cl.source) {
			at = i
			break
		}
	}
	list = append(list, nil)
	copy(list[at+1:], list[at:])
	list[at] = cl
	return list
}

// holdsCopyOf tells whether a mailbox holds a copy of the placement.
func holdsCopyOf(current map[string]metav1.Object, p source) bool {
	for _, cur := range current {
		if crossspace.Label(cur, edgev2alpha1.PlacementCopyLabel) == "true" &&
			crossspace.Annotation(cur, edgev2alpha1.SourcePlacementAnnotation) == p.ep.Name &&
			crossspace.Annotation(cur, edgev2alpha1.SourceSpaceAnnotation) == p.wds {
			return true
		}
	}
	return false
}
