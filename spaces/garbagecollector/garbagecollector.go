// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package garbagecollector deletes, in each space, the objects whose owners
// are gone, as Kubernetes' garbage collector does in a cluster: background,
// foreground and orphan propagation, built-in kinds and custom resources
// alike, with each space's view only (a dependent in one space never holds
// up or follows an owner in another, though their names and even their
// UIDs' strings may meet).
//
// Kubernetes' collector keeps a graph of every object of every kind in
// memory, from informers on all of them; per space that would cost every
// idle space a watch of each kind. This one is driven instead by the writes
// the server commits (Observe wraps every resource's storage): a delete
// has the dependents of the deleted object looked up, in its namespace (a
// cluster-scoped owner: in the whole space) and by its UID, through the
// metadata of each kind the space serves; a create or update that names
// owners has them looked up by name and UID; an update that marks an
// object for deletion with the collector's finalizers (foregroundDeletion,
// orphan) has them worked off. What a space never deletes costs nothing.
//
// Each server collects for the writes it commits. A write committed just
// before a server stops, before its collection was done, is picked up by
// the sweep the leader makes when it starts to lead (Sweep).
package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/worker"
)

// ControllerName names the collector in logs and its queue.
const ControllerName = "garbage-collector"

// Clients are clients of one space with the server's identity.
type Clients interface {
	Metadata(space string) (metadata.Interface, error)
	Discovery(space string) (discovery.DiscoveryInterface, error)
	Dynamic(space string) (dynamic.Interface, error)
}

type op uint8

const (
	// opDependents looks for the dependents of the owners deleted in a
	// namespace (or, namespace empty, cluster-scoped ones), gathered in
	// Collector.gone until it runs.
	opDependents op = iota
	// opCheck looks at an object's owners, and deletes it if all are gone.
	opCheck
	// opFinalize works off the collector's finalizers of an object being
	// deleted. By kind (resource empty) when it names an owner from a
	// dependent's reference.
	opFinalize
)

type item struct {
	op                    op
	space                 string
	group, resource, kind string
	namespace, name       string
}

func (i item) String() string {
	what := i.resource
	if what == "" {
		what = i.kind
	}
	if i.group != "" {
		what += "." + i.group
	}
	return fmt.Sprintf("%d %s %s %s/%s", i.op, i.space, what, i.namespace, i.name)
}

type scope struct{ space, namespace string }

// Collector is the garbage collector of every space.
type Collector struct {
	queue   workqueue.TypedRateLimitingInterface[item]
	clients Clients

	mu sync.Mutex
	// gone are the UIDs of the owners deleted in each scope, whose
	// dependents an opDependents item will look for.
	gone map[scope]sets.Set[types.UID]

	views *lru.Cache[string, *view]
	now   func() time.Time
	// byDefinition: the sweep reads spaces' own custom resources by
	// definition (ReadByDefinition).
	byDefinition atomic.Bool
}

// New returns a collector; its queue fills from the writes Observe sees
// until Run works it off.
func New() *Collector {
	views, _ := lru.New[string, *view](viewsKept)
	return &Collector{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[item](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[item]{Name: ControllerName}),
		gone:  map[scope]sets.Set[types.UID]{},
		views: views,
		now:   time.Now,
	}
}

// Run works off the queue until ctx is done, with clients of the spaces.
func (c *Collector) Run(ctx context.Context, workers int, clients Clients) {
	c.clients = clients
	worker.Loop[item]{Name: ControllerName, Queue: c.queue, Process: c.process, Failure: "collecting garbage failed, will retry",
		Quiet: func(err error) bool { return worker.Conflicts(err) || errors.Is(err, errWaiting) }}.Run(ctx, workers, nil)
}

func (c *Collector) enqueue(i item) { c.queue.Add(i) }

// lookAfter is how long after a delete its owner's dependents are looked
// up, and after a create its owners: long enough for the watch caches the
// lookup lists from to hold every write that came before it (they are
// behind the datastore by milliseconds), so that a dependent created just
// before its owner's delete is seen by one lookup or the other. The wait
// also gathers the owners a namespace's deletion deletes into one lookup.
const lookAfter = time.Second

// ownerGone has the dependents of a deleted owner looked up.
func (c *Collector) ownerGone(space, namespace string, uid types.UID) {
	if uid == "" {
		return
	}
	s := scope{space, namespace}
	c.mu.Lock()
	if c.gone[s] == nil {
		c.gone[s] = sets.New[types.UID]()
	}
	c.gone[s].Insert(uid)
	c.mu.Unlock()
	c.queue.AddAfter(item{op: opDependents, space: space, namespace: namespace}, lookAfter)
}

// ownersChanged has the owners of refs looked at again: one deleting in
// the foreground may be waiting for its dependents to go.
func (c *Collector) ownersChanged(space, namespace string, refs []metav1.OwnerReference) {
	for _, r := range refs {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			continue
		}
		c.enqueue(item{op: opFinalize, space: space, group: gv.Group, kind: r.Kind, namespace: namespace, name: r.Name})
	}
}

// errWaiting says that an owner deleting in the foreground waits for
// dependents that block it.
var errWaiting = errors.New("waiting for dependents that block the owner's deletion")

// retries is how many times an item is retried before it is dropped (the
// leader's next sweep looks again): a space deleted meanwhile fails for
// good.
const retries = 20

func (c *Collector) process(ctx context.Context, i item) (bool, error) {
	logger := klog.FromContext(ctx).WithValues("space", i.space)
	ctx = klog.NewContext(ctx, logger)
	err := c.processItem(ctx, i)
	if err != nil && c.queue.NumRequeues(i) >= retries {
		logger.Error(err, "collecting garbage failed too often, giving up until the next sweep", "item", i.String())
		return false, nil
	}
	return false, err
}

func (c *Collector) processItem(ctx context.Context, i item) error {
	v, err := c.view(i.space)
	if err != nil {
		return err
	}
	switch i.op {
	case opDependents:
		return c.dependentsOfGone(ctx, v, i)
	case opCheck:
		return c.check(ctx, v, i)
	case opFinalize:
		return c.finalize(ctx, v, i)
	}
	return nil
}

// dependentsOfGone has every dependent of the owners gone in i's scope
// checked.
func (c *Collector) dependentsOfGone(ctx context.Context, v *view, i item) error {
	s := scope{i.space, i.namespace}
	c.mu.Lock()
	uids := c.gone[s]
	delete(c.gone, s)
	c.mu.Unlock()
	if len(uids) == 0 {
		return nil
	}
	deps, err := v.dependents(ctx, i.namespace, i.namespace == "", func(r metav1.OwnerReference) bool { return uids.Has(r.UID) })
	if err != nil {
		c.mu.Lock()
		if c.gone[s] == nil {
			c.gone[s] = sets.New[types.UID]()
		}
		c.gone[s] = c.gone[s].Union(uids)
		c.mu.Unlock()
		return err
	}
	klog.FromContext(ctx).V(4).Info("looked for dependents of deleted owners", "namespace", i.namespace, "owners", uids.Len(), "dependents", len(deps))
	for _, d := range deps {
		c.enqueue(item{op: opCheck, space: i.space, group: d.res.gvr.Group, resource: d.res.gvr.Resource, namespace: d.obj.Namespace, name: d.obj.Name})
	}
	return nil
}

// check deletes an object whose owners are all gone (in the foreground if
// one of them is deleting so), or drops its references to the gone ones
// if others remain, as Kubernetes' attemptToDeleteItem does.
func (c *Collector) check(ctx context.Context, v *view, i item) error {
	res, ok := v.byResource(schema.GroupResource{Group: i.group, Resource: i.resource})
	if !ok {
		return nil
	}
	obj, err := v.get(ctx, res, i.namespace, i.name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if obj.DeletionTimestamp != nil {
		return nil
	}
	if len(obj.OwnerReferences) == 0 {
		return nil
	}
	var solid, gone, waiting []metav1.OwnerReference
	for _, ref := range obj.OwnerReferences {
		state, err := c.ownerState(ctx, v, obj, ref)
		if err != nil {
			return err
		}
		switch state {
		case ownerSolid, ownerUnknown:
			solid = append(solid, ref)
		case ownerGone:
			gone = append(gone, ref)
		case ownerWaiting:
			waiting = append(waiting, ref)
		}
	}
	logger := klog.FromContext(ctx).WithValues("resource", res.gvr.GroupResource(), "namespace", obj.Namespace, "name", obj.Name)
	switch {
	case len(solid) > 0:
		if len(gone)+len(waiting) == 0 {
			return nil
		}
		// Its other owners keep it; the references to the gone ones go,
		// and to those deleting in the foreground, which then need not
		// wait for it.
		logger.V(2).Info("dropping references to deleted owners", "owners", len(gone)+len(waiting))
		if err := v.patchMeta(ctx, res, obj, "ownerReferences", solid); err != nil {
			return err
		}
		c.ownersChanged(i.space, obj.Namespace, waiting)
		return nil
	case len(waiting) > 0:
		// A dependent of its own that is deleting in the foreground too
		// may be waiting for it in a circle (a owns b owns c owns a):
		// as Kubernetes does, it stops blocking its owners, so that they
		// need not wait for it, and then goes in the foreground.
		deps, err := v.dependents(ctx, obj.Namespace, !res.namespaced, func(r metav1.OwnerReference) bool { return r.UID == obj.UID })
		if err != nil {
			return err
		}
		if slices.ContainsFunc(deps, func(d dependent) bool { return deletingDependents(d.obj) }) {
			if refs, changed := unblocked(obj.OwnerReferences); changed {
				logger.V(2).Info("a dependent of a dependent deletes its own in the foreground: unblocking its owners, against a circle")
				if err := v.patchMeta(ctx, res, obj, "ownerReferences", refs); err != nil {
					return err
				}
				c.ownersChanged(i.space, obj.Namespace, obj.OwnerReferences)
			}
		}
		logger.V(2).Info("deleting a dependent in the foreground, as its owner is")
		return v.delete(ctx, res, obj, metav1.DeletePropagationForeground)
	default:
		policy := metav1.DeletePropagationBackground
		switch {
		case slices.Contains(obj.Finalizers, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case slices.Contains(obj.Finalizers, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		logger.V(2).Info("deleting a dependent whose owners are gone", "propagation", policy)
		return v.delete(ctx, res, obj, policy)
	}
}

type ownerState uint8

const (
	ownerSolid ownerState = iota
	ownerGone
	// ownerWaiting is deleting in the foreground: it waits for its
	// dependents to go.
	ownerWaiting
	// ownerUnknown is of a kind the space does not serve (yet): kept as
	// if there, rather than delete on a guess.
	ownerUnknown
)

func (c *Collector) ownerState(ctx context.Context, v *view, dependent *metav1.PartialObjectMetadata, ref metav1.OwnerReference) (ownerState, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ownerGone, nil
	}
	res, ok := v.byKind(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if !ok {
		klog.FromContext(ctx).V(2).Info("an owner's kind is not served in the space: its dependent is kept", "owner", ref.Kind+"."+gv.Group, "name", dependent.Name)
		return ownerUnknown, nil
	}
	namespace := ""
	if res.namespaced {
		if dependent.Namespace == "" {
			// A cluster-scoped object cannot be owned by a namespaced one.
			return ownerGone, nil
		}
		namespace = dependent.Namespace
	}
	owner, err := v.get(ctx, res, namespace, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		return ownerGone, nil
	case err != nil:
		return 0, err
	case owner.UID != ref.UID:
		return ownerGone, nil
	case deletingDependents(owner):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

// finalize works off the collector's finalizers of an object being
// deleted: orphan drops the references of its dependents to it;
// foregroundDeletion deletes its dependents and waits for those that block
// its deletion to be gone. In a mailbox, which holds no owners, the
// finalizers just go.
func (c *Collector) finalize(ctx context.Context, v *view, i item) error {
	var res resource
	var ok bool
	namespace := i.namespace
	if i.resource != "" {
		res, ok = v.byResource(schema.GroupResource{Group: i.group, Resource: i.resource})
	} else {
		res, ok = v.byKind(schema.GroupKind{Group: i.group, Kind: i.kind})
		if ok && !res.namespaced {
			namespace = ""
		}
	}
	if !ok {
		return nil
	}
	obj, err := v.get(ctx, res, namespace, i.name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if obj.DeletionTimestamp == nil || !hasCollectorFinalizer(obj.Finalizers) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("resource", res.gvr.GroupResource(), "namespace", obj.Namespace, "name", obj.Name)
	var deps []dependent
	if collects(i.space) {
		deps, err = v.dependents(ctx, obj.Namespace, !res.namespaced, func(r metav1.OwnerReference) bool { return r.UID == obj.UID })
		if err != nil {
			return err
		}
	}
	if slices.Contains(obj.Finalizers, metav1.FinalizerOrphanDependents) {
		for _, d := range deps {
			refs := slices.DeleteFunc(slices.Clone(d.obj.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == obj.UID })
			if err := v.patchMeta(ctx, d.res, d.obj, "ownerReferences", refs); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		logger.V(2).Info("orphaned the dependents of an owner", "dependents", len(deps))
		return v.patchMeta(ctx, res, obj, "finalizers", without(obj.Finalizers, metav1.FinalizerOrphanDependents))
	}
	blocking := 0
	for _, d := range deps {
		if d.obj.DeletionTimestamp == nil {
			// check deletes it in the foreground, as its owner is.
			c.enqueue(item{op: opCheck, space: i.space, group: d.res.gvr.Group, resource: d.res.gvr.Resource, namespace: d.obj.Namespace, name: d.obj.Name})
		}
		for _, r := range d.obj.OwnerReferences {
			if r.UID == obj.UID && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				blocking++
			}
		}
	}
	if blocking > 0 {
		// Their deletes bring this item back (Observe); the retry is for
		// one whose delete another server commits.
		logger.V(4).Info("an owner deleting in the foreground waits for its dependents", "blocking", blocking)
		return errWaiting
	}
	logger.V(2).Info("deleted the dependents of an owner in the foreground", "dependents", len(deps))
	return v.patchMeta(ctx, res, obj, "finalizers", without(obj.Finalizers, metav1.FinalizerDeleteDependents))
}

// deletingDependents tells whether an object deletes in the foreground,
// waiting for its dependents.
func deletingDependents(obj *metav1.PartialObjectMetadata) bool {
	return obj.DeletionTimestamp != nil && slices.Contains(obj.Finalizers, metav1.FinalizerDeleteDependents)
}

// unblocked returns refs with none blocking its owner's deletion, and
// whether any did.
func unblocked(refs []metav1.OwnerReference) ([]metav1.OwnerReference, bool) {
	out := slices.Clone(refs)
	changed := false
	for j := range out {
		if out[j].BlockOwnerDeletion != nil && *out[j].BlockOwnerDeletion {
			no := false
			out[j].BlockOwnerDeletion = &no
			changed = true
		}
	}
	return out, changed
}

func without(finalizers []string, f string) []string {
	return slices.DeleteFunc(slices.Clone(finalizers), func(s string) bool { return s == f })
}

// viewsKept is how many spaces' views (clients and resources) are kept.
const viewsKept = 256

// resourcesFor is how long a space's resources are trusted before they are
// read again (a kind not found is looked up again at once).
const resourcesFor = 30 * time.Second

// forcedEvery is how often at most a kind not found has the resources read
// again.
const forcedEvery = 2 * time.Second

// view is what the collector knows of one space: its clients and the
// resources it serves.
type view struct {
	meta metadata.Interface
	disc discovery.DiscoveryInterface
	now  func() time.Time

	mu        sync.Mutex
	at        time.Time
	resources []resource
	byKindMap map[schema.GroupKind]resource
	byResMap  map[schema.GroupResource]resource
}

type resource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	listable   bool
}

type dependent struct {
	res resource
	obj *metav1.PartialObjectMetadata
}

func (c *Collector) view(space string) (*view, error) {
	if v, ok := c.views.Get(space); ok {
		return v, nil
	}
	m, err := c.clients.Metadata(space)
	if err != nil {
		return nil, err
	}
	d, err := c.clients.Discovery(space)
	if err != nil {
		return nil, err
	}
	v := &view{meta: m, disc: d, now: c.now}
	c.views.Add(space, v)
	return v, nil
}

// refresh reads the space's resources if they are older than resourcesFor
// or force is set.
func (v *view) refresh(force bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	age := v.now().Sub(v.at)
	if v.resources != nil && (age < forcedEvery || (!force && age < resourcesFor)) {
		return nil
	}
	lists, err := discovery.ServerPreferredResources(v.disc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovering the space's resources: %w", err)
	}
	var all []resource
	byKind := map[schema.GroupKind]resource{}
	byRes := map[schema.GroupResource]resource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			res := resource{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced,
				listable: slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "delete")}
			all = append(all, res)
			byKind[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = res
			byRes[res.gvr.GroupResource()] = res
		}
	}
	v.resources, v.byKindMap, v.byResMap, v.at = all, byKind, byRes, v.now()
	return nil
}

func (v *view) byKind(gk schema.GroupKind) (resource, bool) {
	return v.lookup(func() (resource, bool) { r, ok := v.byKindMap[gk]; return r, ok })
}

func (v *view) byResource(gr schema.GroupResource) (resource, bool) {
	return v.lookup(func() (resource, bool) { r, ok := v.byResMap[gr]; return r, ok })
}

// lookup finds a resource, reading the space's resources again once if it
// is not there (a CRD just made).
func (v *view) lookup(find func() (resource, bool)) (resource, bool) {
	for _, force := range []bool{false, true} {
		if err := v.refresh(force); err != nil {
			return resource{}, false
		}
		v.mu.Lock()
		r, ok := find()
		v.mu.Unlock()
		if ok {
			return r, true
		}
	}
	return resource{}, false
}

// dependentsPage is how many objects one list of a kind takes.
const dependentsPage = 500

// dependents lists the objects with a reference that owned says is to an
// owner: in namespace (namespaced kinds only), or with all in the whole
// space.
func (v *view) dependents(ctx context.Context, namespace string, all bool, owned func(metav1.OwnerReference) bool) ([]dependent, error) {
	if err := v.refresh(false); err != nil {
		return nil, err
	}
	v.mu.Lock()
	resources := v.resources
	v.mu.Unlock()
	var out []dependent
	var errs []error
	for _, res := range resources {
		if !res.listable || (!all && !res.namespaced) {
			continue
		}
		client := v.meta.Resource(res.gvr)
		var ri metadata.ResourceInterface = client
		if res.namespaced && !all {
			ri = client.Namespace(namespace)
		}
		// From the watch cache, as an informer would: a consistent list
		// would have the datastore asked for its progress, for every kind
		// at every delete. The cache is behind the datastore by moments,
		// and lookAfter gives it those.
		opts := metav1.ListOptions{Limit: dependentsPage, ResourceVersion: "0"}
		for {
			list, err := ri.List(ctx, opts)
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				break
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("listing %s: %w", res.gvr.GroupResource(), err))
				break
			}
			for j := range list.Items {
				if slices.ContainsFunc(list.Items[j].OwnerReferences, owned) {
					out = append(out, dependent{res: res, obj: &list.Items[j]})
				}
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	return out, errors.Join(errs...)
}

func (v *view) get(ctx context.Context, res resource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	client := v.meta.Resource(res.gvr)
	if res.namespaced {
		return client.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return client.Get(ctx, name, metav1.GetOptions{})
}

func (v *view) delete(ctx context.Context, res resource, obj *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	client := v.meta.Resource(res.gvr)
	var ri metadata.ResourceInterface = client
	if res.namespaced {
		ri = client.Namespace(obj.Namespace)
	}
	uid := obj.UID
	err := ri.Delete(ctx, obj.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && strings.Contains(err.Error(), "UID")) {
		// Gone, or another object of the name since.
		return nil
	}
	return err
}

// patchMeta sets one list of an object's metadata (ownerReferences or
// finalizers) with a merge patch that holds its resourceVersion: a change
// since it was read is a conflict, and the item is retried.
func (v *view) patchMeta(ctx context.Context, res resource, obj *metav1.PartialObjectMetadata, field string, value any) error {
	if s, ok := value.([]string); ok && len(s) == 0 {
		value = nil
	}
	if r, ok := value.([]metav1.OwnerReference); ok && len(r) == 0 {
		value = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": obj.ResourceVersion, field: value}})
	if err != nil {
		return err
	}
	client := v.meta.Resource(res.gvr)
	var ri metadata.ResourceInterface = client
	if res.namespaced {
		ri = client.Namespace(obj.Namespace)
	}
	_, err = ri.Patch(ctx, obj.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
