// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/namespacedefaults"
)

// placed is a placement that targets a SyncTarget, and the destination it
// reaches it through.
type placed struct {
	source
	dest destination
}

// sources returns the placements whose slices name the SyncTarget (this
// incarnation of it: its UID), oldest first, so that what they select is
// decided the same way on every reconcile (see decide).
func (r *mailboxReconciler) sources(ctx context.Context, st *edgev2alpha1.SyncTarget) []placed {
	inventory := crossspace.SpaceOf(st)
	var out []placed
	for _, slice := range r.slicesFor(inventory, st.Name) {
		wds := crossspace.SpaceOf(slice)
		for _, d := range slice.Destinations {
			if d.Space != inventory || d.SyncTargetName != st.Name || d.SyncTargetUID != st.UID {
				continue
			}
			if r.inventories != nil && !slices.Contains(r.inventories(wds), inventory) {
				// Only the scheduler writes slices, and only to the
				// inventory spaces the WDS names; a slice that says
				// otherwise is not the scheduler's (or is older than a
				// change of the WDS's Space) and moves nothing.
				klog.FromContext(ctx).Info("ignoring a destination outside the WDS's inventory spaces", "wds", wds, "slice", slice.Name,
					"inventorySpace", inventory, "syncTarget", st.Name)
				continue
			}
			ep, ok := r.placement(wds, slice.Name)
			if !ok || ep.DeletionTimestamp != nil {
				continue
			}
			p := placed{source: source{wds: wds, ep: ep}, dest: destination{syncTarget: st}}
			if loc, ok := r.location(inventory, d.LocationName); ok {
				p.dest.location = loc
			}
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].before(out[j].source) })
	return out
}

// selection is what the placements targeting a mailbox select.
type selection struct {
	// claims are, per copy key, what each placement would put there, in
	// source order.
	claims map[string][]*claim
	// crdNames are the names of the CRDs the placements select (a clause
	// on CRDs, or Follow), and crdClaims which placement needs which, as
	// its WDS defines it (decideCRDs).
	crdNames  map[string]bool
	crdClaims map[string][]crdClaim
	// pinnedCRDs are, by placement key, the mailbox's CRDs that a
	// Progressive placement not admitted here uses as they are (pinCRDs).
	pinnedCRDs map[string]map[string]*apiextensionsv1.CustomResourceDefinition
	upsync     []edgev2alpha1.UpsyncClause
	// upsyncCRDs are the CRDs, served in the placements' WDSs, of the
	// resources upsync clauses name: the mailbox must serve them for the
	// syncer to write what it upsyncs.
	upsyncCRDs map[string]bool
	// problems are per placement key; placements are those targeting the
	// mailbox.
	problems   map[string][]problem
	placements map[string]bool
	// dependencies are, per placement key, the objects placed only
	// because a workload it selects references them (spec.dependencies:
	// Follow).
	dependencies map[string]map[edgev2alpha1.DependencyReference]bool
}

// addDependency records that a placement placed an object by following a
// reference.
func (s *selection) addDependency(epKey string, ref edgev2alpha1.DependencyReference) {
	if s.dependencies == nil {
		s.dependencies = map[string]map[edgev2alpha1.DependencyReference]bool{}
	}
	if s.dependencies[epKey] == nil {
		s.dependencies[epKey] = map[edgev2alpha1.DependencyReference]bool{}
	}
	s.dependencies[epKey][ref] = true
}

// dependenciesOf returns a placement's followed dependencies, sorted.
func (s *selection) dependenciesOf(epKey string) []edgev2alpha1.DependencyReference {
	set := s.dependencies[epKey]
	if len(set) == 0 {
		return nil
	}
	out := make([]edgev2alpha1.DependencyReference, 0, len(set))
	for ref := range set {
		out = append(out, ref)
	}
	sortDependencies(out)
	return out
}

// reasonAccessUnknown is a problem's reason when whether the placement's
// writer may read something could not be asked (see mayRead).
const reasonAccessUnknown = "AccessNotChecked"

// retryLater reports whether a clause names a resource not served (yet).
func (s *selection) retryLater() bool { return len(s.withReason("UnknownResource")) > 0 }

// withReason returns the messages of the problems with a reason.
func (s *selection) withReason(reason string) []string {
	var out []string
	for _, k := range sortedKeys(s.problems) {
		for _, p := range s.problems[k] {
			if p.Reason == reason {
				out = append(out, p.Message)
			}
		}
	}
	return out
}

// selectAll gathers what the placements select; false when a cache it
// needs has not synced yet.
func (r *mailboxReconciler) selectAll(ctx context.Context, sources []placed) (*selection, bool) {
	sel := &selection{claims: map[string][]*claim{}, crdNames: map[string]bool{}, upsyncCRDs: map[string]bool{}, problems: map[string][]problem{}, placements: map[string]bool{}}
	for _, p := range sources {
		epKey := p.key()
		sel.placements[epKey] = true
		probs, synced := r.selectFor(ctx, p, sel)
		if !synced {
			return nil, false
		}
		for i, c := range p.ep.Spec.Upsync {
			if r.mayUpsync != nil {
				ok, why, err := r.mayUpsync(ctx, p.wds, p.ep, i, c)
				switch {
				case err != nil:
					probs = append(probs, problem{Reason: reasonAccessUnknown, Message: err.Error()})
					continue
				case !ok:
					probs = append(probs, problem{Reason: "NotPermitted", Message: why})
					continue
				}
			}
			sel.upsync = append(sel.upsync, c)
			for _, crd := range r.upsyncedCRDs(p.wds, c) {
				sel.upsyncCRDs[crd.Name] = true
				sel.claimCRD(p.source, crd, false)
			}
		}
		sel.problems[epKey] = append(sel.problems[epKey], probs...)
	}
	return sel, true
}

// selectFor adds what one placement selects for its destination to sel,
// and returns the problems met; false when a cache it needs has not synced
// yet.
func (r *mailboxReconciler) selectFor(ctx context.Context, p placed, sel *selection) (problems []problem, synced bool) {
	wds := p.wds
	// What the placement's writer may not read is not placed; each
	// (resource, namespace) is asked about, and refused is reported, once
	// per reconcile (not once per object: at 3,000 mailboxes, asking for
	// each object was a sixth of one update's CPU). When the answer cannot
	// be had, the reconcile changes nothing (see reconcile).
	type access struct {
		gvr       schema.GroupVersionResource
		namespace string
	}
	answered := map[access]bool{}
	permitted := func(gvr schema.GroupVersionResource, namespace string) bool {
		if r.mayRead == nil {
			return true
		}
		k := access{gvr, namespace}
		if ok, seen := answered[k]; seen {
			return ok
		}
		ok, why, err := r.mayRead(ctx, wds, p.ep, gvr, namespace)
		answered[k] = ok
		switch {
		case err != nil:
			problems = append(problems, problem{Reason: reasonAccessUnknown, Message: err.Error()})
		case !ok:
			problems = append(problems, problem{Reason: "NotPermitted", Message: why})
		}
		return ok
	}
	namespaceLabels := func(ns string) (map[string]string, bool) {
		n, ok := r.namespace(wds, ns)
		if !ok {
			return nil, false
		}
		return n.GetLabels(), true
	}
	// chosen are the copies this placement's clauses select here, whose
	// references Follow places too.
	var chosen []*claim
	for i, raw := range p.ep.Spec.Downsync {
		cl, err := parseClause(i, raw)
		if err != nil {
			problems = append(problems, problem{Reason: "InvalidDownsyncClause", Message: err.Error()})
			continue
		}
		resources, err := r.resolve(wds, raw.APIGroup, raw.Resources)
		if err != nil {
			problems = append(problems, problem{Reason: "UnknownResource", Message: fmt.Sprintf("spec.downsync[%d]: %v", i, err)})
		}
		for _, res := range resources {
			if res.GroupResource() == crdResource {
				// A WDS places the CRDs it serves.
				for _, crd := range r.crdsIn(wds) {
					if cl.matches("", crd.Name, crd.Labels, namespaceLabels) && permitted(res.GroupVersionResource, "") {
						sel.crdNames[crd.Name] = true
						sel.claimCRD(p.source, crd, true)
					}
				}
				continue
			}
			objs, ok := r.candidates(res.GroupVersionResource, wds, cl)
			if !ok {
				return nil, false
			}
			for _, obj := range objs {
				// Every mailbox's reconcile goes through every object its
				// placements might select, so this reads no more of an object
				// than it needs: GetLabels makes a map each time.
				if label(obj, edgev2alpha1.PlacementCopyLabel) == "true" || namespacedefaults.Owned(res.GroupResource(), obj.GetNamespace(), obj.GetName()) {
					continue
				}
				var objLabels map[string]string
				if len(cl.labelSelectors) > 0 {
					objLabels = obj.GetLabels()
				}
				if !cl.matches(obj.GetNamespace(), obj.GetName(), objLabels, namespaceLabels) {
					continue
				}
				if !permitted(res.GroupVersionResource, obj.GetNamespace()) {
					continue
				}
				k := copyKey(res.GroupVersionResource, obj.GetNamespace(), obj.GetName())
				if list := sel.claims[k]; len(list) > 0 && list[len(list)-1].source.same(p.source) {
					// Another clause of the same placement: a copy is create-only
					// only if every clause selecting it says so.
					last := list[len(list)-1]
					last.createOnly = last.createOnly && raw.CreateOnly
					last.clauses = append(last.clauses, raw)
					continue
				}
				cp, memo, prob := r.makeCopy(wds, obj, p.dest)
				if prob != nil {
					problems = append(problems, *prob)
					sel.claims[k] = append(sel.claims[k], &claim{source: p.source, res: res, obj: obj, src: obj, failed: true})
					continue
				}
				c := &claim{source: p.source, res: res, obj: cp, src: obj, memo: memo, createOnly: raw.CreateOnly,
					clauses: []edgev2alpha1.DownsyncClause{raw}}
				sel.claims[k] = append(sel.claims[k], c)
				chosen = append(chosen, c)
			}
		}
	}
	if p.ep.Spec.Dependencies == edgev2alpha1.DependenciesFollow {
		followed, synced := r.follow(p, sel, chosen, permitted)
		if !synced {
			return nil, false
		}
		problems = append(problems, followed...)
	}
	return problems, true
}

// byWorkloadNamespace indexes the shared caches' namespaced objects that
// are not copies in mailboxes by their space and namespace
// (spaces.Key(space, namespace, "")): a mailbox's reconcile goes over the
// objects each clause of each of its placements may select, and a clause
// that names its namespaces may select only theirs. Over a WDS of many
// namespaces, each with a placement of its own, every reconcile went
// through every object of the WDS once per placement: four fifths of
// selectFor's time in a fleet's rollouts. Copies are left out: they are
// most of what the caches hold, and never selected.
const byWorkloadNamespace = "placement-workload-namespace"

func indexByWorkloadNamespace(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok || m.GetNamespace() == "" || crossspace.Label(m, edgev2alpha1.PlacementCopyLabel) == "true" {
		return nil, nil
	}
	return []string{spaces.Key(crossspace.SpaceOf(m), m.GetNamespace(), "")}, nil
}

// inNamespace returns the objects of objs in a namespace.
func inNamespace(objs []*unstructured.Unstructured, namespace string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetNamespace() == namespace {
			out = append(out, obj)
		}
	}
	return out
}

// candidates returns the objects of a resource in a WDS that a clause may
// select: those of the namespaces it names, when it names them (and not
// "*"), else every object of the resource there. False when the cache of
// the resource has not synced yet.
func (r *mailboxReconciler) candidates(gvr schema.GroupVersionResource, wds string, cl *clause) ([]*unstructured.Unstructured, bool) {
	if len(cl.Namespaces) == 0 || slices.Contains(cl.Namespaces, "*") {
		return r.objects(gvr, wds)
	}
	var out []*unstructured.Unstructured
	// A namespace named twice is read once (a map, not a search of the
	// names before it: a tenant's clause may name very many).
	seen := make(map[string]bool, len(cl.Namespaces))
	for _, ns := range cl.Namespaces {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		var objs []*unstructured.Unstructured
		var synced bool
		if r.objectsIn != nil {
			objs, synced = r.objectsIn(gvr, wds, ns)
		} else if objs, synced = r.objects(gvr, wds); synced {
			objs = inNamespace(objs, ns)
		}
		if !synced {
			return nil, false
		}
		out = append(out, objs...)
	}
	return out, true
}

// follow adds to sel what the chosen copies of a placement reference in
// its WDS (see dependencies.go), and returns the problems met: references
// to objects the WDS does not hold. An object reached by two routes, or
// also selected by a clause, is one copy. What the placement's writer may
// not read is not placed (permitted reports it). False when a cache it
// needs has not synced yet.
func (r *mailboxReconciler) follow(p placed, sel *selection, chosen []*claim, permitted func(schema.GroupVersionResource, string) bool) (problems []problem, synced bool) {
	epKey := p.key()
	for _, cl := range chosen {
		if cl.res.Group != "" {
			// A custom resource goes with its CRD, as the WDS serves it
			// (a built-in resource has none by its name): the WDS's own
			// definition, not one the server serves in every space (its
			// own kinds).
			name := crossspace.CustomResourceName(cl.res.GroupResource())
			if crd, ok := r.crdIn(p.wds, name); ok && !sel.crdNames[name] && r.ownCRD(crd, p.wds) && permitted(crdGVR, "") {
				sel.crdNames[name] = true
				sel.claimCRD(p.source, crd, true)
				sel.addDependency(epKey, dependencyRef(crdGVR, "", name))
			}
		}
		for _, ref := range references(cl.res.GroupResource(), cl.obj) {
			if namespacedefaults.Owned(ref.gvr.GroupResource(), ref.namespace, ref.name) {
				continue
			}
			k := copyKey(ref.gvr, ref.namespace, ref.name)
			if list := sel.claims[k]; len(list) > 0 && list[len(list)-1].source.same(p.source) {
				continue
			}
			obj, found, ok := r.object(ref.gvr, p.wds, ref.namespace, ref.name)
			if !ok {
				return nil, false
			}
			if !found || label(obj, edgev2alpha1.PlacementCopyLabel) == "true" {
				if !ref.optional {
					problems = append(problems, problem{Reason: edgev2alpha1.DependencyReasonNotFound, Message: fmt.Sprintf(
						"%s %s references %s %s/%s (%s), which is not in the WDS", strings.ToLower(cl.obj.GetKind()), qualifiedName(cl.obj),
						ref.kind, ref.namespace, ref.name, ref.path)})
				}
				continue
			}
			if !permitted(ref.gvr, ref.namespace) {
				continue
			}
			res := resource{GroupVersionResource: ref.gvr, Kind: ref.kind, Namespaced: true}
			cp, memo, prob := r.makeCopy(p.wds, obj, p.dest)
			if prob != nil {
				problems = append(problems, *prob)
				sel.claims[k] = append(sel.claims[k], &claim{source: p.source, res: res, obj: obj, src: obj, failed: true})
				continue
			}
			// An empty clause: the copy is the placement's, with no
			// StatusCollector of its own.
			sel.claims[k] = append(sel.claims[k], &claim{source: p.source, res: res, obj: cp, src: obj, memo: memo,
				clauses: []edgev2alpha1.DownsyncClause{{}}})
			sel.addDependency(epKey, dependencyRef(ref.gvr, ref.namespace, ref.name))
		}
	}
	return problems, true
}

// makeCopy strips and customizes a workload object for a destination. A
// copy that no Customizer or parameter makes differ between destinations
// comes from the memo (when the reconciler has one) with its entry: it is
// shared, and read-only.
func (r *mailboxReconciler) makeCopy(wds string, obj *unstructured.Unstructured, dest destination) (*unstructured.Unstructured, *memoEntry, *problem) {
	what := func() string { return fmt.Sprintf("%s %s", strings.ToLower(obj.GetKind()), qualifiedName(obj)) }
	var cust *edgev2alpha1.Customizer
	if ref := annotation(obj, edgev2alpha1.CustomizerAnnotation); ref != "" {
		ns, name, ok := splitRef(ref, obj.GetNamespace())
		if !ok {
			return nil, nil, &problem{Reason: "CustomizerNotFound", Message: fmt.Sprintf("%s is cluster-scoped and must name its Customizer as NAMESPACE/NAME, not %q", what(), ref)}
		}
		found, ok := r.customizer(wds, ns, name)
		if !ok {
			return nil, nil, &problem{Reason: "CustomizerNotFound", Message: fmt.Sprintf("%s names Customizer %s/%s, which does not exist", what(), ns, name)}
		}
		cust = found
	}
	expand := annotation(obj, edgev2alpha1.ExpandParametersAnnotation) == "true" ||
		(cust != nil && cust.Annotations[edgev2alpha1.ExpandParametersAnnotation] == "true")
	if cust == nil && !expand && r.memo != nil {
		e := r.memo.copyOf(obj, func() *unstructured.Unstructured { return sourceCopy(wds, obj) })
		return e.copy, e, nil
	}
	cp := strip(obj)
	if err := customize(cp, cust, expand, dest); err != nil {
		return nil, nil, &problem{Reason: "CustomizationFailed", Message: fmt.Sprintf("%s for SyncTarget %s: %v", what(), dest.syncTarget.GetName(), err)}
	}
	setMeta(cp, "annotations", edgev2alpha1.SourceSpaceAnnotation, wds)
	return cp, nil, nil
}

// sourceCopy is the copy of a WDS object that no customization changes:
// stripped, and annotated with its source space.
func sourceCopy(wds string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	cp := strip(obj)
	setMeta(cp, "annotations", edgev2alpha1.SourceSpaceAnnotation, wds)
	return cp
}

// label reads one label of an object without making a map of them all.
func label(obj *unstructured.Unstructured, key string) string {
	v, _, _ := unstructured.NestedString(obj.Object, "metadata", "labels", key)
	return v
}

// annotation reads one annotation of an object as label reads a label.
func annotation(obj *unstructured.Unstructured, key string) string {
	v, _, _ := unstructured.NestedString(obj.Object, "metadata", "annotations", key)
	return v
}

// setMeta sets one label or annotation (field is "labels" or
// "annotations") of an object the caller owns, without a round trip
// through a map of them all.
func setMeta(obj *unstructured.Unstructured, field, key, value string) {
	md, _ := obj.Object["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj.Object["metadata"] = md
	}
	m, _ := md[field].(map[string]any)
	if m == nil {
		m = map[string]any{}
		md[field] = m
	}
	m[key] = value
}

func qualifiedName(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
