// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
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
	"github.com/kubestellar/kubestellar/spaces"
)

// errRetryLater asks for the mailbox to be looked at again, with backoff,
// without anything having failed.
var errRetryLater = errors.New("some resources named by placements are not served yet, or access to them could not be checked")

// problem is why something selected could not be written.
type problem struct {
	Reason  string
	Message string
	// Edge is a syncer's problem with a copy at its edge (edgeproblems.go),
	// reported in the Synced condition rather than Propagated.
	Edge bool
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
	// sourcePlacement is the placement whose copy this is, of sourceWDS.
	sourcePlacement string
	sourceWDS       string
	// revision is the rollout revision of a Progressive placement's copy
	// (RevisionAnnotation), for a syncer that reports on each copy.
	revision string
	// hash is the copy's content hash as write wrote or found it ("":
	// write did not look), for the mailbox's rollout records.
	hash string
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
	if d.revision != "" {
		annotations[edgev2alpha1.RevisionAnnotation] = d.revision
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
	// mailboxMade says whether a mailbox's space is made; nil: it is
	// taken as made.
	mailboxMade func(name string) bool
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
	// crdsIn returns the CRDs served in a space; crdIn the one that
	// defines a name there.
	crdsIn func(space string) []*apiextensionsv1.CustomResourceDefinition
	crdIn  func(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool)
	// perSpace: CRDs are each space's own (the server's --crds-per-space):
	// a mailbox gets its own copy of its WDSs' CRDs, and serves one
	// definition of a name (decideCRDs).
	perSpace bool
	// crdServed tells whether a space serves the custom resource of a CRD
	// name now (perSpace: a mailbox's CRD just made does not yet).
	crdServed func(space, name string) bool
	// crdServing returns the identity of the definition (of a CRD name)
	// a space is served by now.
	crdServing func(space, name string) (id string, ok bool)
	// migrateStored writes every object of a CRD's resource in the space
	// the context names again, stored in version storage then, and has
	// the CRD's status say that only storage holds objects.
	migrateStored func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, storage string) error
	specKeys      specKeys
	// resolve maps a clause's group and resources, in a WDS, to served
	// resources.
	resolve func(wds string, group *string, names []string) ([]resource, error)
	// objects returns the objects of a resource in a space; false when the
	// cache of the resource has not synced yet.
	objects func(gvr schema.GroupVersionResource, space string) ([]*unstructured.Unstructured, bool)
	// objectsIn returns the objects of a resource in one namespace of a
	// space, copies in mailboxes left out; false as for objects. nil:
	// objects is read, and filtered.
	objectsIn func(gvr schema.GroupVersionResource, space, namespace string) ([]*unstructured.Unstructured, bool)
	// object returns one object of a resource in a space, and whether it
	// exists; synced is false when the cache has not synced yet.
	object func(gvr schema.GroupVersionResource, space, namespace, name string) (obj *unstructured.Unstructured, exists, synced bool)
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
	// getSyncerConfig reads the mailbox's SyncerConfig from the server,
	// when the cache's is behind.
	getSyncerConfig func(ctx context.Context) (*edgev2alpha1.SyncerConfig, error)
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

	// full remembers the inventories found at their mailbox limit (nil:
	// none is).
	full *fullInventories

	// admits tells whether a destination (its SyncTarget's key) may take
	// a revision of a Progressive placement (its key) now (see gate); nil
	// admits nothing.
	admits func(placement, destination, revision string) bool
	// completed returns the snapshot of the last revision of a
	// Progressive placement that completed (nil: none is kept), for
	// destinations that join mid-rollout (atCompleted); nil: none is.
	completed func(ctx context.Context, p source) (*rolloutSnapshot, error)

	// recordProblems keeps, for the placements' status, what kept copies
	// of each placement targeting a mailbox from being written, and the
	// dependencies each placed there (sel.placements, sel.problems and
	// sel.dependencies).
	recordProblems func(mailbox string, sel *selection)
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

	sources := r.sources(ctx, st)
	sel, synced := r.selectAll(ctx, sources)
	if !synced {
		return true, nil
	}
	if unknown := sel.withReason(reasonAccessUnknown); len(unknown) > 0 {
		// Whether some objects may be placed cannot be known now: the
		// mailbox stays as it is rather than lose their copies, and is
		// looked at again, with backoff. (The placements' status shows
		// this, in place of conflicts, which are not decided meanwhile.)
		logger.Error(nil, "the access of a placement's writer could not be checked: the mailbox is left as it is until it can", "problems", unknown)
		r.recordProblems(mailbox, sel)
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
	where := "SyncTarget " + crossspace.SpaceOf(st) + "/" + st.Name
	given, err := r.atCompleted(ctx, key, sources, sel, current)
	if err != nil {
		return false, err
	}
	admitted := r.admission(key, sources, sel, given)
	r.pinCRDs(mailbox, sources, sel, cfg, admitted)
	crds := r.decideCRDs(mailbox, sel, where)
	desired := decideAll(sel, current, where)
	revisions := r.gate(sources, desired, current, admitted, cfg.Status.ReportsRollouts || st.Status.ReportsRollouts)
	r.keepCRDsOfKept(mailbox, desired, crds)
	edgeProblems(sel, current, where)
	r.recordProblems(mailbox, sel)
	addImpliedNamespaces(desired)
	r.holdEmptyNamespaces(key, mailbox, desired, current)

	written, deleted, leftOut, pending, err := r.writeMailbox(spaces.WithSpace(ctx, mailbox), st, mailbox, sel, crds, cfg, exists, desired, current, revisions)
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
	if len(leftOut) > 0 {
		// The placements say which copies are missing, and why; room may
		// be made elsewhere (another placement shrinks, an admin raises
		// the limit) without this mailbox hearing of it: look again.
		for key, probs := range leftOut {
			sel.problems[key] = append(sel.problems[key], probs...)
		}
		r.recordProblems(mailbox, sel)
		if r.requeueAfter != nil {
			r.requeueAfter(key, mailboxLimitRetry)
		}
	}
	if sel.retryLater() || pending > 0 {
		// A resource not served yet may be about to be (a CRD being
		// established): look again later, with backoff.
		if pending > 0 {
			logger.V(2).Info("some copies wait for the mailbox's CRDs to be served", "copies", pending)
		}
		return false, errRetryLater
	}
	return false, nil
}

// mailboxLimitRetry is how long a mailbox some copies were left out of
// for a mailbox limit waits before it is looked at again.
const mailboxLimitRetry = 30 * time.Second

// writeMailbox makes the mailbox what is desired: the CRDs it must serve
// (crds) served, the copies written, those no longer desired deleted, and
// its SyncerConfig. It returns how many copies it wrote and deleted, the
// problems of those left out for a mailbox limit, and how many wait for
// the mailbox to serve their CRD (a copy of the WDS's, just made).
//
// A mailbox that has nothing placed and whose syncer has never come gets
// no SyncerConfig yet: its syncer reads the mailbox only once it has one,
// and the condition its tunnel sets when it comes has the mailbox looked
// at again (mailboxRelevant). Writing an empty one at once cost a fleet
// made in bulk a write, its events and their decodes per SyncTarget: at
// 3,000 SyncTargets, 15 % of the server's CPU while their mailboxes were
// made.
func (r *mailboxReconciler) writeMailbox(mctx context.Context, st *edgev2alpha1.SyncTarget, mailbox string, sel *selection, crds map[string]*apiextensionsv1.CustomResourceDefinition,
	cfg *edgev2alpha1.SyncerConfig, exists bool, desired map[string]*desiredCopy, current map[string]metav1.Object, revisions map[string]string) (written, deleted int, leftOut map[string][]problem, pending int, err error) {
	inventory := crossspace.SpaceOf(st)
	if err := r.bindCRDs(mctx, mailbox, crds); err != nil {
		return 0, 0, nil, 0, err
	}
	writable := desired
	if r.perSpace && r.crdServed != nil {
		writable = make(map[string]*desiredCopy, len(desired))
		for k, d := range desired {
			if d.res.Group != "" && !r.crdServed(mailbox, crossspace.CustomResourceName(d.res.GroupResource())) {
				pending++
				continue
			}
			writable[k] = d
		}
	}
	if written, leftOut, err = r.writeCopies(mctx, inventory, writable, current); err != nil {
		return written, 0, leftOut, pending, err
	}
	if deleted, err = r.prune(mctx, mailbox, desired, current); err != nil {
		return written, deleted, leftOut, pending, err
	}
	if err := r.unbindCRDs(mctx, mailbox, crds); err != nil {
		return written, deleted, leftOut, pending, err
	}
	spec := syncerConfigSpec(desired, sel.crdNames, sel.upsync)
	spec.Rollouts = rolloutRecords(cfg, revisions, desired, current, sel.crdClaims)
	if !exists && !syncerCame(st) && apiequality.Semantic.DeepEqual(spec, edgev2alpha1.SyncerConfigSpec{}) {
		return written, deleted, leftOut, pending, nil
	}
	return written, deleted, leftOut, pending, r.writeSyncerConfig(mctx, cfg, exists, spec)
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
// SyncTarget's space and UID name, once its status names it and the
// mailbox controller has made its space (a SyncTarget is stored naming
// it, moments before). Copies never go where a status field alone points.
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
	if st.Status.MailboxSpace != mailbox || r.mailboxMade != nil && !r.mailboxMade(mailbox) {
		return nil, "", false
	}
	return st, mailbox, true
}

// syncerCame reports whether a SyncTarget's syncer has ever reached the
// server: its tunnel set the SyncerConnected condition (True or, since,
// False), or it heartbeated.
func syncerCame(st *edgev2alpha1.SyncTarget) bool {
	return meta.FindStatusCondition(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected) != nil ||
		st.Status.LastSyncerHeartbeatTime != nil
}

// clock is r.now, or the time.
func (r *mailboxReconciler) clock() time.Time {
	if r.now == nil {
		return time.Now()
	}
	return r.now()
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
