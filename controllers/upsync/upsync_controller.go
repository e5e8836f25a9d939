// Package upsync copies objects that syncers report from their edge
// clusters (into their mailboxes, labelled edge.kubestellar.io/upsynced)
// into the WDS of every placement targeting that cluster whose upsync
// clauses select them, keeps them in step, and removes them when they go
// at the edge or stop being selected.
package upsync

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs and its queue.
const ControllerName = "upsync"

// Controller upsyncs.
type Controller struct {
	clients       *crossspace.Clients
	queue         workqueue.TypedRateLimitingInterface[string] // SyncTarget keys
	placements    *crossspace.Informer
	slices        *crossspace.Informer
	syncTargets   *crossspace.Informer
	syncerConfigs *crossspace.Informer

	// mu guards ctx and resources: workers add caches (informerFor) while
	// others list them (knownResources).
	mu        sync.Mutex
	ctx       context.Context
	resources map[schema.GroupVersionResource]*crossspace.Informer
}

// New returns the controller.
func New(clients *crossspace.Clients) *Controller {
	c := &Controller{clients: clients, resources: map[schema.GroupVersionResource]*crossspace.Informer{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})}
	all := crossspace.Enqueue(func(any) { c.enqueueAll() })
	c.placements = clients.Typed(&edgev2alpha1.EdgePlacementList{}, &edgev2alpha1.EdgePlacement{}, all)
	c.slices = clients.Typed(&edgev2alpha1.SinglePlacementSliceList{}, &edgev2alpha1.SinglePlacementSlice{}, all)
	c.syncTargets = clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, crossspace.Enqueue(func(obj any) {
		if key, err := spaces.KeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}))
	crossspace.IndexSyncTargetsByMailbox(c.syncTargets)
	c.syncerConfigs = clients.Typed(&edgev2alpha1.SyncerConfigList{}, &edgev2alpha1.SyncerConfig{}, all)
	return c
}

func (c *Controller) enqueueAll() {
	for _, key := range c.syncTargets.ListKeys() {
		c.queue.Add(key)
	}
}

// enqueueMailbox enqueues the SyncTarget of a mailbox.
func (c *Controller) enqueueMailbox(space string) {
	if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, space); ok {
		c.queue.Add(spaces.Key(crossspace.SpaceOf(st), "", st.Name))
	}
}

// informerFor returns the cache of upsynced objects (in mailboxes and
// WDSes) of a resource, starting it on first use.
func (c *Controller) informerFor(gvr schema.GroupVersionResource) *crossspace.Informer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.resources[gvr]; ok {
		return inf
	}
	inf := c.clients.DynamicInformer(gvr, UpsyncedLabel+"=true", crossspace.Enqueue(func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if from := u.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation]; from != "" {
			// A WDS copy changed or went: its source's mailbox decides.
			inv, st, _ := strings.Cut(from, "/")
			c.queue.Add(spaces.Key(inv, "", st))
			return
		}
		c.enqueueMailbox(crossspace.SpaceOf(u))
	}))
	c.resources[gvr] = inf
	go inf.RunWithContext(c.ctx)
	return inf
}

// knownResources returns the resources whose upsynced objects are cached.
func (c *Controller) knownResources() []schema.GroupVersionResource {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]schema.GroupVersionResource, 0, len(c.resources))
	for gvr := range c.resources {
		out = append(out, gvr)
	}
	return out
}

// Run upsyncs until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	all := []*crossspace.Informer{c.placements, c.slices, c.syncTargets, c.syncerConfigs}
	crossspace.Run(ctx, all...)
	if !crossspace.WaitForSync(ctx, all...) {
		return
	}
	logger.Info("started controller")
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "upsync failed, will retry",
		Process: c.reconcile, Quiet: worker.Conflicts}.Start(ctx, workers)
	<-ctx.Done()
}

// reconcile makes the WDSes hold exactly the selected upsynced objects of
// one SyncTarget's mailbox.
func (c *Controller) reconcile(ctx context.Context, key string) (bool, error) {
	invSpace, _, stName, err := spaces.SplitKey(key)
	if err != nil {
		return false, nil
	}
	from := invSpace + "/" + stName
	st, ok := crossspace.Get[*edgev2alpha1.SyncTarget](c.syncTargets, invSpace, "", stName)
	mailbox := ""
	// The mailbox is derived from the SyncTarget's UID, never taken from a
	// status a syncer could have written.
	if ok && st.DeletionTimestamp == nil && st.Status.MailboxSpace == spaces.MailboxName(invSpace, string(st.UID)) {
		mailbox = st.Status.MailboxSpace
	}
	// The placements targeting this SyncTarget, and their upsync clauses.
	type target struct {
		wds     string
		clauses []edgev2alpha1.UpsyncClause
	}
	var targets []target
	if mailbox != "" {
		for _, slice := range crossspace.List[*edgev2alpha1.SinglePlacementSlice](c.slices) {
			for _, d := range slice.Destinations {
				if d.Space != invSpace || d.SyncTargetName != stName {
					continue
				}
				ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, crossspace.SpaceOf(slice), "", slice.Name)
				if ok && len(ep.Spec.Upsync) > 0 {
					targets = append(targets, target{wds: crossspace.SpaceOf(slice), clauses: ep.Spec.Upsync})
				}
			}
		}
	}
	// Resources to look at: those of the mailbox's upsync sets, and those
	// already upsynced anywhere (to remove what is no longer selected).
	gvrs := map[schema.GroupVersionResource]bool{}
	for _, gvr := range c.knownResources() {
		gvrs[gvr] = true
	}
	for _, t := range targets {
		for _, cl := range t.clauses {
			for _, r := range cl.Resources {
				if r == "*" || cl.APIGroup == "*" {
					continue // wildcards upsync only resources already in use
				}
				mapped, err := c.clients.Client.RESTMapper().ResourcesFor(schema.GroupVersionResource{Group: cl.APIGroup, Resource: r})
				if err == nil && len(mapped) > 0 {
					gvrs[mapped[0]] = true
				}
			}
		}
	}
	for gvr := range gvrs {
		inf := c.informerFor(gvr)
		if !inf.HasSynced() {
			return true, nil
		}
		desired := map[string]*unstructured.Unstructured{} // wds|ns/name
		if mailbox != "" {
			for _, obj := range crossspace.InSpace[*unstructured.Unstructured](inf, mailbox) {
				// Only what the syncer upsynced, never the server's copies.
				if obj.GetLabels()[UpsyncedLabel] != "true" || obj.GetLabels()[edgev2alpha1.PlacementCopyLabel] == "true" {
					continue
				}
				for _, t := range targets {
					for _, cl := range t.clauses {
						if matches(cl, gvr.Group, gvr.Resource, obj.GetNamespace(), obj.GetName()) {
							cp := wdsCopy(obj, invSpace, stName)
							desired[spaces.Key(t.wds, cp.GetNamespace(), cp.GetName())] = cp
						}
					}
				}
			}
		}
		for k, cp := range desired {
			wds, _, _, _ := spaces.SplitKey(k)
			if err := c.write(spaces.WithSpace(ctx, wds), gvr, cp, obj(inf, k)); err != nil {
				return false, err
			}
		}
		for _, item := range inf.List() {
			u := item.(*unstructured.Unstructured)
			if u.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation] != from || u.GetLabels()[UpsyncedLabel] != "true" {
				continue
			}
			k := spaces.Key(crossspace.SpaceOf(u), u.GetNamespace(), u.GetName())
			if _, want := desired[k]; want {
				continue
			}
			err := c.clients.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Delete(spaces.WithSpace(ctx, crossspace.SpaceOf(u)), u.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
	}
	return false, nil
}

func obj(inf *crossspace.Informer, key string) *unstructured.Unstructured {
	o, ok, _ := inf.GetByKey(key)
	if !ok {
		return nil
	}
	return o.(*unstructured.Unstructured)
}

// write creates or updates an upsynced object in a WDS (and its namespace).
func (c *Controller) write(ctx context.Context, gvr schema.GroupVersionResource, cp, current *unstructured.Unstructured) error {
	if current != nil && sameContent(current, cp) {
		return nil
	}
	if ns := cp.GetNamespace(); ns != "" {
		err := c.clients.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	_, err := c.clients.Dynamic.Resource(gvr).Namespace(cp.GetNamespace()).Apply(ctx, cp.GetName(), cp, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

// sameContent compares what upsync writes: everything but server-set metadata.
func sameContent(current, cp *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		out := wdsCopy(u, "", "").Object
		meta, _ := out["metadata"].(map[string]any)
		delete(meta, "name")
		if a, ok := meta["annotations"].(map[string]any); ok {
			delete(a, edgev2alpha1.UpsyncedFromAnnotation)
			delete(a, OriginalNameAnnotation)
		}
		return out
	}
	a, b := strip(current), strip(cp)
	return equalJSON(a, b) && current.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation] == cp.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation]
}
