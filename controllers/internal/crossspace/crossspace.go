// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package crossspace gives controllers caches of one kind across all spaces
// (through the read-only wildcard space), keyed by space|namespace/name, and
// the scheme and clients they share.
package crossspace

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/listpages"
	"github.com/kubestellar/kubestellar/spaces"
)

// NewScheme returns the scheme controllers use: built-in kinds, CRDs and ours.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		edgev2alpha1.AddToScheme, tenancyv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// Clients are the clients controllers share. Each addresses the space named
// in the context of a call (spaces.WithSpace), root by default.
type Clients struct {
	Client    client.WithWatch
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	Scheme    *runtime.Scheme
	// Local, when set, lists and watches some resources in the server's
	// process; the caches of the others go through Dynamic.
	Local LocalReader

	mu sync.Mutex
	// typed holds the one cache of each of our kinds and built-in ones
	// (Typed), by the type of its list.
	typed map[reflect.Type]*Informer
}

// LocalReader lists and watches the objects of some resources in a space
// (spaces.Wildcard: every space) without a round trip through the API,
// as unstructured objects, as a dynamic client would; false for a
// resource it does not serve.
type LocalReader interface {
	ListerWatcher(gvr schema.GroupVersionResource, space, labelSelector string) (cache.ListerWatcher, bool)
}

// convertingReader is a LocalReader that offers each object, typed, to a
// cache's convert before making it unstructured (see
// server.storeWriter.ListerWatcherConverting): a Copy record is then
// made from the typed object, without an unstructured one in between.
type convertingReader interface {
	ListerWatcherConverting(gvr schema.GroupVersionResource, space, labelSelector string,
		convert func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool)) (cache.ListerWatcher, bool)
}

// NewClients builds the clients from a root-space configuration.
func NewClients(root *rest.Config) (*Clients, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	scoped := spaces.ScopedConfig(root)
	scoped.QPS, scoped.Burst = 2000, 4000
	// The client's logger is klog's, as the server's is: left unset, it
	// would be controller-runtime's global one, which nothing sets, and
	// a server that starts the controllers more than 30 s after its own
	// start (a survivor that takes over the lead) would print a stack
	// trace saying so.
	c, err := client.NewWithWatch(scoped, client.Options{Scheme: scheme, Log: klog.Background().WithName("controller-client")})
	if err != nil {
		return nil, fmt.Errorf("controller client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(scoped)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(root)
	if err != nil {
		return nil, err
	}
	return &Clients{Client: c, Dynamic: dyn, Discovery: disco, Scheme: scheme}, nil
}

// Informer is a cache of one kind across all spaces.
type Informer struct {
	cache.Indexer
	cache.Controller
	// handlers are those of every controller sharing the cache (Typed);
	// nil for a cache of one controller's.
	handlers *fanout
	running  atomic.Bool
}

// RunWithContext runs the cache until ctx is done. A cache that several
// controllers share runs once, until the context of whichever of them
// starts it first is done (the controllers share one); the others return
// at once.
func (i *Informer) RunWithContext(ctx context.Context) {
	if i.running.CompareAndSwap(false, true) {
		i.Controller.RunWithContext(ctx)
	}
}

// AddIndexers adds the indexes the cache does not have yet: controllers
// sharing a cache each add those they use, and the same name is the same
// index. A new index must be added before the cache holds anything.
func (i *Informer) AddIndexers(indexers cache.Indexers) error {
	have := i.GetIndexers()
	add := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := have[name]; !ok {
			add[name] = fn
		}
	}
	if len(add) == 0 {
		return nil
	}
	return i.Indexer.AddIndexers(add)
}

// Typed returns the cache of a kind of ours or a built-in one, with the
// handler added to those it calls; list is an empty list object of the
// kind (for example &edgev2alpha1.SyncTargetList{}). Every controller
// asking for a kind gets the same cache, as kube-controller-manager's
// controllers share one informer per resource: each object is decoded
// and held once, however many controllers read it, and the server serves
// one watch of it. The controllers share the cached objects, which none
// may change (each changes a DeepCopy). A handler added once the cache
// holds objects is first called with each of them, as an add.
func (c *Clients) Typed(list client.ObjectList, obj runtime.Object, handler cache.ResourceEventHandler) *Informer {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := reflect.TypeOf(list)
	if inf, ok := c.typed[key]; ok {
		inf.handlers.add(handler, inf.List)
		return inf
	}
	handlers := &fanout{handlers: []cache.ResourceEventHandler{handler}}
	inf := c.typedInformer(list, obj, handlers)
	inf.handlers = handlers
	if c.typed == nil {
		c.typed = map[reflect.Type]*Informer{}
	}
	c.typed[key] = inf
	return inf
}

// fanout is a shared cache's handler: it calls those of every controller.
type fanout struct {
	mu       sync.RWMutex
	handlers []cache.ResourceEventHandler
}

// add adds a handler, calling it first with each object cached (cached
// lists them): a cache already running calls it with later events only.
// An event between the listing and the add may reach it twice, which an
// enqueuing handler does not tell from once.
func (f *fanout) add(h cache.ResourceEventHandler, cached func() []any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = append(f.handlers, h)
	for _, obj := range cached() {
		h.OnAdd(obj, true)
	}
}

func (f *fanout) OnAdd(obj any, isInInitialList bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, h := range f.handlers {
		h.OnAdd(obj, isInInitialList)
	}
}

func (f *fanout) OnUpdate(old, obj any) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, h := range f.handlers {
		h.OnUpdate(old, obj)
	}
}

func (f *fanout) OnDelete(obj any) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, h := range f.handlers {
		h.OnDelete(obj)
	}
}

// typedInformer is an informer of one kind, for Typed.
func (c *Clients) typedInformer(list client.ObjectList, obj runtime.Object, handler cache.ResourceEventHandler) *Informer {
	wildcard := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, spaces.Wildcard) }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return l, c.Client.List(wildcard(ctx), l, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return c.Client.Watch(wildcard(ctx), l, &client.ListOptions{Raw: &opts})
		},
	}
	// A client that says it cannot stream a list (a test's fake) is listed.
	return newInformer(cache.ToListWatcherWithWatchListSemantics(lw, c.Client), obj, handler)
}

// BySpace indexes cached objects by their space.
const BySpace = "space"

func newInformer(lw cache.ListerWatcher, obj runtime.Object, handler cache.ResourceEventHandler) *Informer {
	return newTransformingInformer(lw, obj, handler, nil)
}

func newTransformingInformer(lw cache.ListerWatcher, obj runtime.Object, handler cache.ResourceEventHandler, transform cache.TransformFunc) *Informer {
	indexer, controller := spaces.NewInformerWithOptions(lw, obj, handler, spaces.InformerOptions{
		Resync: Resync, Transform: transform, NoResync: isCopy})
	if err := indexer.AddIndexers(cache.Indexers{BySpace: func(obj any) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		return []string{SpaceOf(m)}, nil
	}}); err != nil {
		panic(err) // only fails once objects are cached
	}
	return &Informer{Indexer: indexer, Controller: controller}
}

// InSpace returns the cached objects of one space.
func InSpace[T runtime.Object](inf *Informer, space string) []T {
	out, _ := Indexed[T](inf, BySpace, space)
	return out
}

// Indexed returns the cached objects that an index files under value;
// false when the cache has no such index.
func Indexed[T runtime.Object](inf *Informer, index, value string) ([]T, bool) {
	objs, err := inf.ByIndex(index, value)
	if err != nil {
		return nil, false
	}
	var out []T
	for _, obj := range objs {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	return out, true
}

// Dynamic returns an informer over any resource, as unstructured objects.
// A label selector, when set, limits it to matching objects.
func (c *Clients) DynamicInformer(gvr schema.GroupVersionResource, labelSelector string, handler cache.ResourceEventHandler) *Informer {
	return c.dynamicInformer(gvr, spaces.Wildcard, labelSelector, handler, nil, nil)
}

// DynamicInformerIn is DynamicInformer across the spaces wildcard names:
// spaces.Wildcard, or spaces.WildcardOf a definition (the spaces whose
// CRD of the resource has that definition).
func (c *Clients) DynamicInformerIn(gvr schema.GroupVersionResource, wildcard, labelSelector string, handler cache.ResourceEventHandler) *Informer {
	return c.dynamicInformer(gvr, wildcard, labelSelector, handler, nil, nil)
}

// dynamicInformer returns an informer over any resource across the spaces
// wildcard names (spaces.Wildcard, or spaces.WildcardOf a definition),
// its objects passed through transform (when set). typed, when set, is offered the
// objects a LocalReader holds typed first (see convertingReader): it must
// return what transform would make of the object as unstructured, or
// decline it.
func (c *Clients) dynamicInformer(gvr schema.GroupVersionResource, wildcard, labelSelector string, handler cache.ResourceEventHandler,
	transform cache.TransformFunc, typed func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool)) *Informer {
	if c.Local != nil && wildcard == spaces.Wildcard {
		var lw cache.ListerWatcher
		var ok bool
		// The objects' type, which the informer's reflector checks each
		// watch event against: none when typed may make some of them.
		var objType runtime.Object = &unstructured.Unstructured{}
		if cr, converts := c.Local.(convertingReader); converts && typed != nil {
			lw, ok = cr.ListerWatcherConverting(gvr, spaces.Wildcard, labelSelector, typed)
			objType = nil
		} else {
			lw, ok = c.Local.ListerWatcher(gvr, spaces.Wildcard, labelSelector)
		}
		if ok {
			return newTransformingInformer(transformLists(lw, transform), objType, handler, transform)
		}
	}
	across := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, wildcard) }
	var lw cache.ListerWatcher = &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = labelSelector
			return c.Dynamic.Resource(gvr).List(across(ctx), opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = labelSelector
			return c.Dynamic.Resource(gvr).Watch(across(ctx), opts)
		},
	}
	return newTransformingInformer(transformLists(lw, transform), &unstructured.Unstructured{}, handler, transform)
}

// transformLists applies a cache's transform to the items of each page
// its lists return, as well as (by the cache) to each object it adds. A
// reflector gathers every page of a list before the cache sees any: a
// restart's list of every copy in every mailbox was held whole, copies
// and their bodies, until the cache trimmed them one by one. Each page
// comes back as a list of runtime.Objects (listpages.MapObjects), so that
// it holds the Copy records. The cache's transform must accept what it
// returned.
func transformLists(lw cache.ListerWatcher, transform cache.TransformFunc) cache.ListerWatcher {
	if transform == nil {
		return lw
	}
	return listpages.MapObjects(lw, func(u *unstructured.Unstructured) (runtime.Object, error) {
		t, err := transform(u)
		if err != nil {
			return nil, err
		}
		obj, ok := t.(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("transform of %s gave %T, not an object", u.GetName(), t)
		}
		return obj, nil
	})
}

// Get returns the cached object of a space, namespace and name.
func Get[T runtime.Object](inf *Informer, space, namespace, name string) (T, bool) {
	var zero T
	obj, exists, err := inf.GetByKey(spaces.Key(space, namespace, name))
	if err != nil || !exists {
		return zero, false
	}
	t, ok := obj.(T)
	return t, ok
}

// List returns every cached object, of every space.
func List[T runtime.Object](inf *Informer) []T {
	var out []T
	for _, obj := range inf.List() {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// SpaceOf returns the space a cached object belongs to.
func SpaceOf(obj metav1.Object) string {
	if s, ok := obj.(spaces.Spaced); ok {
		return s.Space()
	}
	return Annotation(obj, spaces.Annotation)
}

// Label returns one label of an object. An unstructured object's is read
// where it is: GetLabels copies them all into a new map at each call, and
// every event of a copy is read by several handlers and indexes.
// So is a Copy record's, without expanding it.
func Label(obj metav1.Object, key string) string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		v, _, _ := unstructured.NestedString(o.Object, "metadata", "labels", key)
		return v
	case *Copy:
		return o.label(key)
	}
	return obj.GetLabels()[key]
}

// Annotation returns one annotation of an object, as Label a label.
func Annotation(obj metav1.Object, key string) string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		v, _, _ := unstructured.NestedString(o.Object, "metadata", "annotations", key)
		return v
	case *Copy:
		return o.annotation(key)
	}
	return obj.GetAnnotations()[key]
}

// StatusOf returns the status of an unstructured object or a Copy record
// (nil for anything else), which the caller must not change.
func StatusOf(obj metav1.Object) any {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.Object["status"]
	case *Copy:
		return o.Status()
	}
	return nil
}

// InSpaceRecords returns the cached objects of a space as the cache holds
// them: a copy as its Copy record, not expanded (see InSpace), anything
// else as it is. For readers of a few fields of many copies (Label,
// Annotation, StatusOf): the record is read in place.
func InSpaceRecords(inf *Informer, space string) []metav1.Object {
	return ByIndexRecords(inf, BySpace, space)
}

// ByIndexRecords returns the cached objects an index gives for value as
// the cache holds them (a copy as its Copy record, see InSpaceRecords): for
// a reader of a few fields of each of an object's copies on every
// SyncTarget, which expanding each into an unstructured object would cost
// more than the reading.
func ByIndexRecords(inf *Informer, index, value string) []metav1.Object {
	indexer := inf.Indexer
	if e, ok := indexer.(expanding); ok {
		indexer = e.Indexer
	}
	objs, _ := indexer.ByIndex(index, value)
	out := make([]metav1.Object, 0, len(objs))
	for _, obj := range objs {
		if m, ok := obj.(metav1.Object); ok {
			out = append(out, m)
		}
	}
	return out
}

// GetRecord returns one cached object as the cache holds it (a copy as its
// Copy record, see InSpaceRecords).
func GetRecord(inf *Informer, space, namespace, name string) (metav1.Object, bool) {
	indexer := inf.Indexer
	if e, ok := indexer.(expanding); ok {
		indexer = e.Indexer
	}
	obj, exists, err := indexer.GetByKey(spaces.Key(space, namespace, name))
	if err != nil || !exists {
		return nil, false
	}
	m, ok := obj.(metav1.Object)
	return m, ok
}

// WaitForSync waits until every informer has synced, or ctx is done.
func WaitForSync(ctx context.Context, informers ...*Informer) bool {
	var synced []cache.InformerSynced
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Run starts informers; they stop with ctx.
func Run(ctx context.Context, informers ...*Informer) {
	for _, inf := range informers {
		go inf.RunWithContext(ctx)
	}
}

// Enqueue returns an event handler that maps every event to keys.
func Enqueue(add func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			add(obj)
		},
	}
}

// EnqueueSpec is Enqueue but for updates of an object's status alone
// (StatusOnly), which status passes instead (nil: drops them): the
// controllers that write a placement's status (a rollout's counts move
// many times a second) need not reconcile, each time, everything made
// from its spec.
func EnqueueSpec(add, status func(obj any)) cache.ResourceEventHandlerFuncs {
	h := Enqueue(add)
	h.UpdateFunc = func(old, obj any) {
		switch {
		case !StatusOnly(old, obj):
			add(obj)
		case status != nil:
			status(obj)
		}
	}
	return h
}

// StatusOnly tells whether an update changed an object's status alone:
// not its spec (its generation, which must be set), labels, annotations,
// owners, finalizers or deletion.
func StatusOnly(old, obj any) bool {
	a, errA := meta.Accessor(old)
	b, errB := meta.Accessor(obj)
	return errA == nil && errB == nil && a.GetUID() == b.GetUID() && a.GetGeneration() == b.GetGeneration() && a.GetGeneration() != 0 &&
		maps.Equal(a.GetLabels(), b.GetLabels()) && maps.Equal(a.GetAnnotations(), b.GetAnnotations()) &&
		a.GetDeletionTimestamp().Equal(b.GetDeletionTimestamp()) && slices.Equal(a.GetFinalizers(), b.GetFinalizers()) &&
		reflect.DeepEqual(a.GetOwnerReferences(), b.GetOwnerReferences())
}

// Resync is how often controllers re-examine everything, as a safety net:
// everything but the mailbox copies cached as records (see TrimCopies),
// which the placements, SyncTargets and WDS objects they come from are
// re-examined with. A resync queues every object at once, and calls every
// handler with each; with 10,000 SyncTargets, a million copies.
const Resync = 10 * time.Minute

// isCopy tells whether a cached object is a Copy record.
func isCopy(obj any) bool {
	_, ok := obj.(*Copy)
	return ok
}

// CoreNamespace is the GVR of Namespaces.
var CoreNamespace = corev1.SchemeGroupVersion.WithResource("namespaces")

// ByMailbox indexes SyncTargets by their mailbox space.
const ByMailbox = "mailbox"

// IndexSyncTargetsByMailbox adds the ByMailbox index to a SyncTarget
// informer. A SyncTarget's mailbox is the one its space and UID name
// (spaces.MailboxName), once its status says the server made it: no other
// status value makes a space anyone's mailbox.
func IndexSyncTargetsByMailbox(inf *Informer) {
	if err := inf.AddIndexers(cache.Indexers{ByMailbox: func(obj any) ([]string, error) {
		if st, ok := obj.(*edgev2alpha1.SyncTarget); ok && st.Status.MailboxSpace != "" &&
			st.Status.MailboxSpace == spaces.MailboxName(SpaceOf(st), string(st.UID)) {
			return []string{st.Status.MailboxSpace}, nil
		}
		return nil, nil
	}}); err != nil {
		panic(err) // only fails once objects are cached
	}
}

// ByDestination indexes SinglePlacementSlices by the SyncTargets they
// name (inventory|name), so that the work for one SyncTarget reads the
// slices that target it instead of scanning every slice of every space.
const ByDestination = "destination"

// IndexSlicesByDestination adds the ByDestination index to an informer of
// SinglePlacementSlices.
func IndexSlicesByDestination(inf *Informer) {
	if err := inf.AddIndexers(cache.Indexers{ByDestination: indexByDestination}); err != nil {
		panic(err) // only fails once objects are cached
	}
}

func indexByDestination(obj any) ([]string, error) {
	slice, ok := obj.(*edgev2alpha1.SinglePlacementSlice)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, d := range slice.Destinations {
		k := spaces.Key(d.Space, "", d.SyncTargetName)
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// SlicesTo returns the SinglePlacementSlices (from an informer indexed by
// IndexSlicesByDestination) that name a SyncTarget of an inventory space.
func SlicesTo(inf *Informer, inventory, syncTarget string) []*edgev2alpha1.SinglePlacementSlice {
	objs, _ := inf.ByIndex(ByDestination, spaces.Key(inventory, "", syncTarget))
	out := make([]*edgev2alpha1.SinglePlacementSlice, 0, len(objs))
	for _, obj := range objs {
		if s, ok := obj.(*edgev2alpha1.SinglePlacementSlice); ok {
			out = append(out, s)
		}
	}
	return out
}

// SpaceOfType returns a Space (from an informer of Spaces) when it exists
// and is of the type given.
func SpaceOfType(inf *Informer, name, typ string) (*tenancyv1alpha1.Space, bool) {
	sp, ok := Get[*tenancyv1alpha1.Space](inf, spaces.Root, "", name)
	if !ok || sp.Spec.Type != typ || sp.DeletionTimestamp != nil {
		return nil, false
	}
	return sp, true
}

// SyncTargetOfMailbox returns the SyncTarget whose mailbox is a space.
func SyncTargetOfMailbox(inf *Informer, mailbox string) (*edgev2alpha1.SyncTarget, bool) {
	objs, _ := inf.ByIndex(ByMailbox, mailbox)
	if len(objs) == 0 {
		return nil, false
	}
	st, ok := objs[0].(*edgev2alpha1.SyncTarget)
	return st, ok
}

// Qualified names an object as NAMESPACE/NAME, or NAME when it is
// cluster-scoped.
func Qualified(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
