// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

// errRetryLater asks for the mailbox to be looked at again, with backoff,
// without anything having failed.
var errRetryLater = errors.New("some resources named by placements are not served yet, or access to them could not be checked")

// problem is why something selected could not be written.
type problem struct {
	Reason  string
	Message string
}

// desiredCopy is one object a mailbox should hold.
type desiredCopy struct {
	res        resource
	obj        *unstructured.Unstructured
	createOnly bool
	// keep leaves an existing copy as it is: its new version could not be
	// made (for example a customization failed), and a half-made copy is
	// never written.
	keep bool
	// implied namespaces are created when missing and never updated.
	implied bool
	// placements select the copy; collectors are the StatusCollectors of
	// each placement's selecting clauses; singleton is set when a placement
	// wants the singleton reported state. The status controller reads them
	// from the copy's annotations.
	placements map[string]bool
	collectors map[string][]string
	singleton  bool
	// sourcePlacement is the placement whose copy this is.
	sourcePlacement string
	// memo, when set, is where obj comes from: obj is shared with other
	// mailboxes, and the memo knows hashes of what was written from it.
	memo *memoEntry
}

// selectedBy records that a placement's clause selects the copy.
func (d *desiredCopy) selectedBy(ep *edgev2alpha1.EdgePlacement, c edgev2alpha1.DownsyncClause) {
	if d.placements == nil {
		d.placements, d.collectors = map[string]bool{}, map[string][]string{}
	}
	d.placements[ep.Name] = true
	for _, sc := range c.StatusCollectors {
		if !slices.Contains(d.collectors[ep.Name], sc) {
			d.collectors[ep.Name] = append(d.collectors[ep.Name], sc)
			sort.Strings(d.collectors[ep.Name])
		}
	}
	d.singleton = d.singleton || ep.Spec.WantSingletonReportedState
}

// annotate writes what selected the copy into its annotations.
func (d *desiredCopy) annotate(annotations map[string]string) {
	if len(d.placements) == 0 {
		return
	}
	annotations[edgev2alpha1.PlacementsAnnotation] = strings.Join(sortedKeys(d.placements), ",")
	if d.sourcePlacement != "" {
		annotations[edgev2alpha1.SourcePlacementAnnotation] = d.sourcePlacement
	}
	if len(d.collectors) > 0 {
		data, _ := json.Marshal(d.collectors)
		annotations[edgev2alpha1.StatusCollectorsAnnotation] = string(data)
	}
	if d.singleton {
		annotations[edgev2alpha1.WantSingletonAnnotation] = "true"
	}
}

func copyKey(gvr schema.GroupVersionResource, namespace, name string) string {
	return gvr.String() + "|" + namespace + "/" + name
}

var namespaceResource = resource{GroupVersionResource: corev1.SchemeGroupVersion.WithResource("namespaces"), Kind: "Namespace"}

// mailboxReconciler makes one mailbox hold exactly what the placements
// that target its SyncTarget select. Its steps are the methods below, in
// the order reconcile runs them; its dependencies are function fields,
// which the controller binds to its caches and clients (see
// newMailboxReconciler) and tests to stubs.
type mailboxReconciler struct {
	// writers bounds the copies one reconcile writes at once (1: one at a
	// time, in key order).
	writers int
	// memo shares copies, and knows their hashes, across mailboxes (nil:
	// every reconcile makes its own).
	memo *copyMemo
	// Reads, from caches.
	syncTarget func(space, name string) (*edgev2alpha1.SyncTarget, bool)
	// slicesFor returns the SinglePlacementSlices that name a SyncTarget
	// (by inventory space and name) among their destinations.
	slicesFor func(inventory, syncTarget string) []*edgev2alpha1.SinglePlacementSlice
	placement func(space, name string) (*edgev2alpha1.EdgePlacement, bool)
	// inventories returns the inventory spaces a WDS names
	// (spec.inventorySpaces of its Space): nil for a space that is no WDS.
	// Nil: every destination is trusted (tests of other steps).
	inventories func(wds string) []string
	location    func(space, name string) (*edgev2alpha1.Location, bool)
	namespace   func(space, name string) (metav1.Object, bool)
	customizer  func(space, namespace, name string) (*edgev2alpha1.Customizer, bool)
	crds        func() []*apiextensionsv1.CustomResourceDefinition
	// resolve maps a clause's group and resources to served resources.
	resolve func(group *string, names []string) ([]resource, error)
	// objects returns the objects of a resource in a space; false when the
	// cache of the resource has not synced yet.
	objects func(gvr schema.GroupVersionResource, space string) ([]*unstructured.Unstructured, bool)
	// records returns the objects of a resource in a mailbox as the cache
	// holds them (a copy as its crossspace.Copy record): the translator
	// reads a few fields of each (crossspace.Label, Annotation, StatusOf)
	// at every reconcile of the mailbox. false as for objects.
	records      func(gvr schema.GroupVersionResource, space string) ([]metav1.Object, bool)
	syncerConfig func(mailbox string) (*edgev2alpha1.SyncerConfig, bool)

	// Writes, into the space the context names.
	create             func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error
	update             func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error
	delete             func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) error
	createSyncerConfig func(ctx context.Context, cfg *edgev2alpha1.SyncerConfig) error
	updateSyncerConfig func(ctx context.Context, cfg *edgev2alpha1.SyncerConfig) error
	// get reads an object from the server, for a copy the cache has not
	// seen yet.
	get func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)

	// mayRead tells whether the writer of a placement in a WDS may get
	// objects of a resource in a namespace ("" for cluster-scoped ones),
	// and if not, why; an error when that cannot be known now. nil lets
	// everything through.
	mayRead func(ctx context.Context, wds string, ep *edgev2alpha1.EdgePlacement, gvr schema.GroupVersionResource, namespace string) (bool, string, error)
	// mayUpsync tells whether the writer of a placement may write into
	// the WDS what its upsync clause i brings there, and if not, why; an
	// error when that cannot be known now. nil lets everything through.
	mayUpsync func(ctx context.Context, wds string, ep *edgev2alpha1.EdgePlacement, i int, c edgev2alpha1.UpsyncClause) (bool, string, error)

	// emptyNamespaces holds mailbox namespaces a grace period before they
	// go (nil: none); now is its clock, and requeueAfter looks at a
	// mailbox again once one may go.
	emptyNamespaces *emptyNamespaces
	now             func() time.Time
	requeueAfter    func(key string, after time.Duration)

	// recordProblems keeps, for the placements' status, what kept copies
	// of each placement targeting a mailbox from being written.
	recordProblems func(mailbox string, placements map[string]bool, problems map[string][]problem)
}

// reconcile makes the mailbox of a SyncTarget (key: inventory|name) hold
// what its placements select. It reports requeue when a cache it needs has
// not synced yet.
func (r *mailboxReconciler) reconcile(ctx context.Context, key string) (requeue bool, err error) {
	st, mailbox, ok := r.target(key)
	if !ok {
		return false, nil
	}
	logger := klog.FromContext(ctx).WithValues("syncTarget", key, "mailbox", mailbox)
	ctx = klog.NewContext(ctx, logger)

	sel, synced := r.selectAll(ctx, r.sources(ctx, st))
	if !synced {
		return true, nil
	}
	if unknown := sel.withReason(reasonAccessUnknown); len(unknown) > 0 {
		// Whether some objects may be placed cannot be known now: the
		// mailbox stays as it is rather than lose their copies, and is
		// looked at again, with backoff. (The placements' status shows
		// this, in place of conflicts, which are not decided meanwhile.)
		logger.Error(nil, "the access of a placement's writer could not be checked: the mailbox is left as it is until it can", "problems", unknown)
		r.recordProblems(mailbox, sel.placements, sel.problems)
		return false, errRetryLater
	}
	cfg, exists := r.syncerConfig(mailbox)
	if !exists {
		cfg = &edgev2alpha1.SyncerConfig{}
	}
	current, synced := r.contents(mailbox, sel.claims, cfg)
	if !synced {
		return true, nil
	}
	desired := decideAll(sel, current, "SyncTarget "+crossspace.SpaceOf(st)+"/"+st.Name)
	r.recordProblems(mailbox, sel.placements, sel.problems)
	addImpliedNamespaces(desired)
	r.holdEmptyNamespaces(key, mailbox, desired, current)

	written, deleted, err := r.writeMailbox(spaces.WithSpace(ctx, mailbox), mailbox, sel, cfg, exists, desired, current)
	if notServedYet(err, mailbox) {
		// The mailbox controller made the Space a moment ago, and the
		// server's cache of Spaces has not seen it yet (many SyncTargets
		// at once): nothing failed, the mailbox is looked at again.
		logger.V(2).Info("the mailbox space is not served yet: looking again later")
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if written+deleted > 0 {
		logger.V(2).Info("mailbox updated", "written", written, "deleted", deleted, "copies", len(desired))
	}
	if sel.retryLater() {
		// A resource not served yet may be about to be (a CRD being
		// established): look again later, with backoff.
		return false, errRetryLater
	}
	return false, nil
}

// writeMailbox makes the mailbox what is desired: the CRDs its copies need
// bound, the copies written, those no longer desired deleted, and its
// SyncerConfig. It returns how many copies it wrote and deleted.
func (r *mailboxReconciler) writeMailbox(mctx context.Context, mailbox string, sel *selection, cfg *edgev2alpha1.SyncerConfig, exists bool,
	desired map[string]*desiredCopy, current map[string]metav1.Object) (written, deleted int, err error) {
	crds := r.crdsFor(desired, sel.crdNames, sel.upsyncCRDs)
	if err := r.bindCRDs(mctx, mailbox, crds); err != nil {
		return 0, 0, err
	}
	if written, err = r.writeCopies(mctx, desired, current); err != nil {
		return written, 0, err
	}
	if deleted, err = r.prune(mctx, mailbox, desired, current); err != nil {
		return written, deleted, err
	}
	if err := r.unbindCRDs(mctx, mailbox, crds); err != nil {
		return written, deleted, err
	}
	return written, deleted, r.writeSyncerConfig(mctx, cfg, exists, syncerConfigSpec(desired, sel.crdNames, sel.upsync))
}

// notServedYet tells whether err is the server's answer that the mailbox
// space does not exist (spaces.WithSpaceAdmission and the edge admission
// plugin answer from a cache of Spaces).
func notServedYet(err error, mailbox string) bool {
	var status apierrors.APIStatus
	if err == nil || !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Group == tenancyv1alpha1.SchemeGroupVersion.Group && d.Kind == "spaces" && d.Name == mailbox
}

// target returns the SyncTarget of a key and its mailbox: the one the
// SyncTarget's space and UID name, once the mailbox controller has made it.
// Copies never go where a status field alone points.
func (r *mailboxReconciler) target(key string) (*edgev2alpha1.SyncTarget, string, bool) {
	inventory, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return nil, "", false
	}
	st, ok := r.syncTarget(inventory, name)
	if !ok || st.DeletionTimestamp != nil {
		return nil, "", false
	}
	mailbox := spaces.MailboxName(inventory, string(st.UID))
	if st.Status.MailboxSpace != mailbox {
		return nil, "", false
	}
	return st, mailbox, true
}

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
	claims   map[string][]*claim
	crdNames map[string]bool
	upsync   []edgev2alpha1.UpsyncClause
	// upsyncCRDs are the CRDs, served in the placements' WDSs, of the
	// resources upsync clauses name: the mailbox must serve them for the
	// syncer to write what it upsyncs.
	upsyncCRDs map[string]bool
	// problems are per placement key; placements are those targeting the
	// mailbox.
	problems   map[string][]problem
	placements map[string]bool
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
					probs = append(probs, problem{reasonAccessUnknown, err.Error()})
					continue
				case !ok:
					probs = append(probs, problem{"NotPermitted", why})
					continue
				}
			}
			sel.upsync = append(sel.upsync, c)
			for _, name := range r.upsyncedCRDs(p.wds, c) {
				sel.upsyncCRDs[name] = true
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
			problems = append(problems, problem{reasonAccessUnknown, err.Error()})
		case !ok:
			problems = append(problems, problem{"NotPermitted", why})
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
	for i, raw := range p.ep.Spec.Downsync {
		cl, err := parseClause(i, raw)
		if err != nil {
			problems = append(problems, problem{"InvalidDownsyncClause", err.Error()})
			continue
		}
		resources, err := r.resolve(raw.APIGroup, raw.Resources)
		if err != nil {
			problems = append(problems, problem{"UnknownResource", fmt.Sprintf("spec.downsync[%d]: %v", i, err)})
		}
		for _, res := range resources {
			if res.GroupResource() == crdResource {
				for _, crd := range r.crds() {
					// A WDS places the CRDs it serves.
					if !spaces.BindingsOf(crd.Annotations).Has(wds) {
						continue
					}
					if cl.matches("", crd.Name, crd.Labels, namespaceLabels) && permitted(res.GroupVersionResource, "") {
						sel.crdNames[crd.Name] = true
					}
				}
				continue
			}
			objs, ok := r.objects(res.GroupVersionResource, wds)
			if !ok {
				return nil, false
			}
			for _, obj := range objs {
				// Every mailbox's reconcile goes through every object its
				// placements might select, so this reads no more of an object
				// than it needs: GetLabels makes a map each time.
				if label(obj, edgev2alpha1.PlacementCopyLabel) == "true" {
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
					sel.claims[k] = append(sel.claims[k], &claim{source: p.source, res: res, obj: obj, failed: true})
					continue
				}
				sel.claims[k] = append(sel.claims[k], &claim{source: p.source, res: res, obj: cp, memo: memo, createOnly: raw.CreateOnly,
					clauses: []edgev2alpha1.DownsyncClause{raw}})
			}
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
		ns, name, hasNS := strings.Cut(ref, "/")
		if !hasNS {
			ns, name = obj.GetNamespace(), ref
			if ns == "" {
				return nil, nil, &problem{"CustomizerNotFound", fmt.Sprintf("%s is cluster-scoped and must name its Customizer as NAMESPACE/NAME, not %q", what(), ref)}
			}
		}
		found, ok := r.customizer(wds, ns, name)
		if !ok {
			return nil, nil, &problem{"CustomizerNotFound", fmt.Sprintf("%s names Customizer %s/%s, which does not exist", what(), ns, name)}
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
		return nil, nil, &problem{"CustomizationFailed", fmt.Sprintf("%s for SyncTarget %s: %v", what(), dest.syncTarget.GetName(), err)}
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

// contents returns what the mailbox holds now, by copy key: the objects of
// every resource the placements select or its SyncerConfig names (which
// the mailbox may still hold copies of); false when a cache has not synced.
func (r *mailboxReconciler) contents(mailbox string, claims map[string][]*claim, cfg *edgev2alpha1.SyncerConfig) (map[string]metav1.Object, bool) {
	resources := map[schema.GroupVersionResource]bool{}
	for _, cl := range claims {
		resources[cl[0].res.GroupVersionResource] = true
		if cl[0].obj.GetNamespace() != "" {
			resources[namespaceResource.GroupVersionResource] = true
		}
	}
	for _, res := range cfg.Spec.Resources {
		resources[schema.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Resource}] = true
	}
	current := map[string]metav1.Object{}
	for gvr := range resources {
		objs, ok := r.records(gvr, mailbox)
		if !ok {
			return nil, false
		}
		for _, obj := range objs {
			current[copyKey(gvr, obj.GetNamespace(), obj.GetName())] = obj
		}
	}
	return current, true
}

// decideAll makes one copy per key of what the placements claim (see
// decide), and adds the conflicts to the losers' problems.
func decideAll(sel *selection, current map[string]metav1.Object, where string) map[string]*desiredCopy {
	desired := map[string]*desiredCopy{}
	for _, k := range sortedKeys(sel.claims) {
		d, conflicts := decide(sel.claims[k], current[k], where)
		desired[k] = d
		for _, cf := range conflicts {
			sel.problems[cf.loser.key()] = append(sel.problems[cf.loser.key()], cf.problem)
		}
	}
	return desired
}

// addImpliedNamespaces adds the namespaces of namespaced copies that no
// placement places: they must exist in the mailbox, and are created when
// missing, never updated.
func addImpliedNamespaces(desired map[string]*desiredCopy) {
	for _, d := range desired {
		ns := d.obj.GetNamespace()
		if ns == "" {
			continue
		}
		k := copyKey(namespaceResource.GroupVersionResource, "", ns)
		if _, ok := desired[k]; !ok {
			desired[k] = &desiredCopy{res: namespaceResource, obj: namespaceObject(ns), implied: true}
		}
	}
}

// namespaceObject is a Namespace of that name, as a desired copy holds it.
func namespaceObject(name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("Namespace")
	obj.SetName(name)
	return obj
}

func isNamespaces(gvr schema.GroupVersionResource) bool {
	return gvr.Group == "" && gvr.Resource == "namespaces"
}

// writeCopies writes the desired copies, namespaces first, and returns how
// many it wrote, r.writers at a time (see inParallel).
func (r *mailboxReconciler) writeCopies(ctx context.Context, desired map[string]*desiredCopy, current map[string]metav1.Object) (int, error) {
	var written atomic.Int64
	for _, namespaces := range []bool{true, false} {
		var keys []string
		for _, k := range sortedKeys(desired) {
			if isNamespaces(desired[k].res.GroupVersionResource) == namespaces {
				keys = append(keys, k)
			}
		}
		if err := r.inParallel(ctx, keys, func(k string) error {
			d := desired[k]
			did, err := r.write(ctx, d, current[k])
			if err != nil {
				return fmt.Errorf("writing %s %s: %w", d.res.Resource, qualifiedName(d.obj), err)
			}
			if did {
				written.Add(1)
			}
			return nil
		}); err != nil {
			return int(written.Load()), err
		}
	}
	return int(written.Load()), nil
}

// inParallel calls fn for each key, in key order, with up to r.writers
// calls running at once. A mailbox's copies are independent of one
// another once their namespaces exist; one at a time, a reconcile would
// wait on the server for each (with 100 objects placed on 1,000
// SyncTargets, the translator's workers spent most of the fan-out so).
// After a call fails (or panics) no new one starts; the first error seen
// is returned once the calls running are done.
func (r *mailboxReconciler) inParallel(ctx context.Context, keys []string, fn func(key string) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	slots := make(chan struct{}, max(r.writers, 1))
	for _, k := range keys {
		slots <- struct{}{}
		if failed() {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			// A panic fails this reconcile, as the worker loop makes it do
			// when it happens there, and never the server.
			defer func() {
				if p := recover(); p != nil {
					klog.FromContext(ctx).Error(nil, "panic writing a mailbox", "key", k, "panic", p, "stack", string(debug.Stack()))
					fail(fmt.Errorf("panic on %s: %v", k, p))
				}
			}()
			if err := fn(k); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return firstErr
}

// write creates or updates one copy, unless it is unchanged (by content
// hash), create-only and present, or to be kept as it is.
func (r *mailboxReconciler) write(ctx context.Context, d *desiredCopy, current metav1.Object) (bool, error) {
	if d.keep || (current != nil && (d.createOnly || d.implied)) {
		return false, nil
	}
	if current != nil && crossspace.Label(current, edgev2alpha1.UpsyncedLabel) == "true" {
		// The edge made it (upsynced): a copy never replaces it.
		klog.FromContext(ctx).V(2).Info("not writing a copy over an object its syncer upsynced",
			"resource", d.res.GroupVersionResource.String(), "object", qualifiedName(current))
		return false, nil
	}
	var (
		hashKey, hash string
		known         bool
	)
	if d.memo != nil {
		// Most reconciles find most copies unchanged: known by the hash
		// of what was written from this version, the copy is not made.
		hashKey = d.hashKey()
		hash, known = d.memo.hash(hashKey)
		if known && current != nil && crossspace.Annotation(current, ContentHashAnnotation) == hash {
			return false, nil
		}
	}
	obj := d.obj.DeepCopy()
	setMeta(obj, "labels", edgev2alpha1.PlacementCopyLabel, "true")
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	if d.createOnly {
		annotations[edgev2alpha1.CreateOnlyAnnotation] = "true"
	}
	d.annotate(annotations)
	if known {
		// The same object as the one hashed for another mailbox (what
		// hashKey names is all write adds): its hash, without encoding
		// it again.
		annotations[ContentHashAnnotation] = hash
		obj.SetAnnotations(annotations)
	} else {
		annotations[ContentHashAnnotation] = ""
		obj.SetAnnotations(annotations)
		var err error
		if hash, err = contentHash(obj); err != nil {
			return false, err
		}
		annotations[ContentHashAnnotation] = hash
		setMeta(obj, "annotations", ContentHashAnnotation, hash)
		if d.memo != nil {
			d.memo.setHash(hashKey, hash)
		}
	}
	if current != nil && crossspace.Annotation(current, ContentHashAnnotation) == hash {
		return false, nil
	}
	// The copy is exactly what the translator says, so it is created and
	// then replaced whole (a create costs the server far less than an apply:
	// no read of a missing object, no merge). What syncers write is carried
	// over: the state of descendants, sync errors, and status for kinds whose status is
	// not a subresource (for the others the server keeps it anyway).
	if current == nil {
		exists := r.create(ctx, d.res.GroupVersionResource, obj)
		if !apierrors.IsAlreadyExists(exists) {
			return exists == nil, exists
		}
		if d.createOnly || d.implied {
			return false, nil // there, whoever made it: as with the cache's
		}
		// The cache has not seen it yet: most often a copy an earlier
		// reconcile made a moment ago, while more of the WDS's objects
		// keep the mailbox busy. Compare with the server's: failing the
		// reconcile instead would retry it with growing backoff, and under
		// a steady stream of changes delay the whole mailbox by seconds.
		live, err := r.get(ctx, d.res.GroupVersionResource, obj.GetNamespace(), obj.GetName())
		if err != nil {
			return false, err
		}
		switch ann := live.GetAnnotations(); {
		case live.GetLabels()[edgev2alpha1.PlacementCopyLabel] != "true":
			// Not a copy: what becomes of it is for a reconcile whose
			// cache has it (the error retries).
			return false, exists
		case ann[edgev2alpha1.SourceSpaceAnnotation] != annotations[edgev2alpha1.SourceSpaceAnnotation] ||
			ann[edgev2alpha1.SourcePlacementAnnotation] != annotations[edgev2alpha1.SourcePlacementAnnotation]:
			// Held by another source: which one keeps it is decide's to
			// say, from a cache that has it (the error retries).
			return false, exists
		case ann[ContentHashAnnotation] == hash:
			return false, nil
		}
		current = live
	}
	for _, key := range []string{edgev2alpha1.AssociatedStateAnnotation, edgev2alpha1.SyncErrorAnnotation} {
		if v := crossspace.Annotation(current, key); v != "" {
			annotations[key] = v
		}
	}
	obj.SetAnnotations(annotations)
	if status := crossspace.StatusOf(current); status != nil {
		obj.Object["status"] = status
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return true, r.update(ctx, d.res.GroupVersionResource, obj)
}

// prune deletes the translator's copies no longer desired, namespaces
// last, r.writers at a time (see inParallel), and returns how many it
// deleted.
func (r *mailboxReconciler) prune(ctx context.Context, mailbox string, desired map[string]*desiredCopy, current map[string]metav1.Object) (int, error) {
	var deleted atomic.Int64
	for _, namespaces := range []bool{false, true} {
		var keys []string
		for _, k := range sortedKeys(current) {
			if _, want := desired[k]; !want && crossspace.Label(current[k], edgev2alpha1.PlacementCopyLabel) == "true" && isNamespaces(gvrOfKey(k)) == namespaces {
				keys = append(keys, k)
			}
		}
		if err := r.inParallel(ctx, keys, func(k string) error {
			obj, gvr := current[k], gvrOfKey(k)
			if err := r.delete(ctx, gvr, obj.GetNamespace(), obj.GetName()); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s %s: %w", gvr.Resource, qualifiedName(obj), err)
			}
			if namespaces {
				r.emptyNamespaces.forget(mailbox, obj.GetName())
			}
			deleted.Add(1)
			return nil
		}); err != nil {
			return int(deleted.Load()), err
		}
	}
	return int(deleted.Load()), nil
}

// holdEmptyNamespaces keeps, for a grace period, the translator's mailbox
// namespaces that nothing desired is in any more and that are not placed
// themselves: under churn their contents come back soon, and a namespace
// being deleted takes no new copies. They stay as they are (and in the
// SyncerConfig) until the period ends, when the mailbox is looked at
// again and they go.
func (r *mailboxReconciler) holdEmptyNamespaces(key, mailbox string, desired map[string]*desiredCopy, current map[string]metav1.Object) {
	if r.emptyNamespaces == nil {
		return
	}
	now := r.now()
	for k, obj := range current {
		if !isNamespaces(gvrOfKey(k)) {
			continue
		}
		if _, want := desired[k]; want {
			r.emptyNamespaces.forget(mailbox, obj.GetName())
			continue
		}
		if crossspace.Label(obj, edgev2alpha1.PlacementCopyLabel) != "true" {
			continue
		}
		if wait := r.emptyNamespaces.wait(mailbox, obj.GetName(), now); wait > 0 {
			desired[k] = &desiredCopy{res: namespaceResource, obj: namespaceObject(obj.GetName()), keep: true}
			r.requeueAfter(key, wait)
		}
	}
}

// namespaceGrace is how long a mailbox namespace stays once nothing
// placed is in it and it is not placed itself.
const namespaceGrace = 15 * time.Second

// emptyNamespaces remembers since when mailbox namespaces have been on
// their way out. A nil one has no grace period.
type emptyNamespaces struct {
	grace time.Duration
	mu    sync.Mutex
	since map[string]time.Time // "mailbox/namespace"
}

func newEmptyNamespaces(grace time.Duration) *emptyNamespaces {
	return &emptyNamespaces{grace: grace, since: map[string]time.Time{}}
}

// wait returns how long the namespace has still to wait before it goes,
// starting its grace period now if it had none.
func (e *emptyNamespaces) wait(mailbox, name string, now time.Time) time.Duration {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := mailbox + "/" + name
	since, ok := e.since[k]
	if !ok {
		e.since[k], since = now, now
	}
	return max(0, since.Add(e.grace).Sub(now))
}

// forget ends the namespace's grace period: it is placed again, or gone.
func (e *emptyNamespaces) forget(mailbox, name string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	delete(e.since, mailbox+"/"+name)
	e.mu.Unlock()
}

// writeSyncerConfig creates the mailbox's SyncerConfig, or updates it when
// its spec changed.
func (r *mailboxReconciler) writeSyncerConfig(ctx context.Context, cfg *edgev2alpha1.SyncerConfig, exists bool, spec edgev2alpha1.SyncerConfigSpec) error {
	switch {
	case !exists:
		cfg = &edgev2alpha1.SyncerConfig{ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName}, Spec: spec}
		// AlreadyExists means the cache is behind (this reconciler made it
		// a moment ago, maybe with another spec): the error retries, and
		// the retry compares the spec.
		if err := r.createSyncerConfig(ctx, cfg); err != nil {
			return fmt.Errorf("creating the SyncerConfig: %w", err)
		}
	case !apiequality.Semantic.DeepEqual(cfg.Spec, spec):
		cfg = cfg.DeepCopy()
		cfg.Spec = spec
		if err := r.updateSyncerConfig(ctx, cfg); err != nil {
			return fmt.Errorf("updating the SyncerConfig: %w", err)
		}
	}
	return nil
}

func contentHash(obj *unstructured.Unstructured) (string, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16]), nil
}

func syncerConfigSpec(desired map[string]*desiredCopy, crdNames map[string]bool, upsync []edgev2alpha1.UpsyncClause) edgev2alpha1.SyncerConfigSpec {
	spec := edgev2alpha1.SyncerConfigSpec{Upsync: upsync}
	namespaces := map[string]bool{}
	resources := map[schema.GroupVersionResource]bool{}
	for _, d := range desired {
		resources[d.res.GroupVersionResource] = d.res.Namespaced
		if ns := d.obj.GetNamespace(); ns != "" {
			namespaces[ns] = true
		}
	}
	for ns := range namespaces {
		spec.Namespaces = append(spec.Namespaces, ns)
	}
	sort.Strings(spec.Namespaces)
	for gvr, namespaced := range resources {
		spec.Resources = append(spec.Resources, edgev2alpha1.SyncedResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Namespaced: namespaced})
	}
	sort.Slice(spec.Resources, func(i, j int) bool {
		a, b := spec.Resources[i], spec.Resources[j]
		return a.Group+"/"+a.Resource < b.Group+"/"+b.Resource
	})
	for name := range crdNames {
		spec.CRDs = append(spec.CRDs, name)
	}
	sort.Strings(spec.CRDs)
	return spec
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func gvrOfKey(k string) schema.GroupVersionResource {
	gvrString, _, _ := strings.Cut(k, "|")
	// GroupVersionResource.String() is "group/version, Resource=resource".
	gv, res, _ := strings.Cut(gvrString, ", Resource=")
	parsed, _ := schema.ParseGroupVersion(gv)
	return parsed.WithResource(res)
}

func metaOf(obj any) (metav1.Object, bool) {
	if r, ok := obj.(runtime.Object); ok {
		m, err := meta.Accessor(r)
		return m, err == nil
	}
	return nil, false
}

// recordProblems stores what kept copies from a mailbox and enqueues the
// placements whose status may change.
func (c *Controller) recordProblems(mailbox string, placementsHere map[string]bool, problems map[string][]problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for epKey, byMailbox := range c.problems {
		if _, ok := byMailbox[mailbox]; ok && !placementsHere[epKey] {
			delete(byMailbox, mailbox)
			c.statuses.Add(epKey)
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
		c.mu.Unlock()
		return nil
	}
	c.mu.Lock()
	var all []problem
	mailboxes := sortedKeys(c.problems[key])
	for _, mb := range mailboxes {
		all = append(all, c.problems[key][mb]...)
	}
	c.mu.Unlock()
	updated := ep.DeepCopy()
	if !placementConditions(updated, all) {
		return nil
	}
	return c.clients.Client.Status().Update(spaces.WithSpace(ctx, space), updated)
}

// isConflict reports whether a problem is a conflict with another source.
func isConflict(p problem) bool {
	return p.Reason == edgev2alpha1.ConflictReasonOtherSpace || p.Reason == edgev2alpha1.ConflictReasonCustomization
}

// placementConditions sets a placement's Propagated and Conflicted
// conditions from its problems (in mailbox order) and reports whether
// anything changed.
func placementConditions(ep *edgev2alpha1.EdgePlacement, all []problem) bool {
	var failures, conflicts []problem
	for _, p := range all {
		if isConflict(p) {
			conflicts = append(conflicts, p)
		} else {
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
