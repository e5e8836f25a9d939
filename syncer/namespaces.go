// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/crdversion"
)

// Namespaces and CRDs hold other objects: deleting one at the edge deletes
// everything in it (every object of the namespace, every instance of the
// CRD), whoever made it. The syncer never deletes what it did not make, so
// a namespace or CRD that it made and that left the mailbox is deleted only
//   - after it has been out of the mailbox for removalGrace, with nothing the
//     mailbox still holds in it: a namespace whose placed objects briefly
//     went to zero (a workload deleted and applied again, placements being
//     edited) is not deleted and made again;
//   - when it holds nothing but what the syncer made (see holders), as the
//     edge's API says (not a cache) right before the delete; the delete is
//     conditional on the namespace or CRD being the one read, unchanged
//     (its UID and resourceVersion), so one adopted meanwhile (its owner
//     label removed) stays. Kubernetes has no delete-if-empty: an object
//     made in the moment between the reading and the delete goes with it.
//
// Otherwise it stays at the edge, the SyncTarget's status lists it with
// reason KeptInUse and what holds it, and the syncer looks again every
// keptRecheck: it goes once what held it is gone.
const (
	removalGrace = 30 * time.Second
	keptRecheck  = time.Minute
	// maxHolderNames is how many holders a KeptInUse message names.
	maxHolderNames = 5
)

// Objects that every namespace has, made by Kubernetes' own controllers,
// which never keep a namespace.
const (
	defaultServiceAccount = "default"
	rootCAConfigMap       = "kube-root-ca.crt"
	// endpointsManagedByLabel marks the Endpoints that the endpoints
	// controller keeps for a Service, and deletes with it.
	endpointsManagedByLabel = "endpoints.kubernetes.io/managed-by"
	endpointsController     = "endpoint-controller"
)

var (
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	configMapsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	servicesGVR        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	endpointsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}
)

// metricsGroup serves views of other objects (pods, nodes), through an
// aggregated API that is often unavailable.
const metricsGroup = "metrics.k8s.io"

// unlisted says whether a resource is not looked into: events are a record
// of what happened, not content; metrics are views of other objects.
func unlisted(gr schema.GroupResource) bool {
	return gr.Group == metricsGroup || (gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io"))
}

// isContainer says whether deleting an object of gvr deletes other objects.
func isContainer(gvr schema.GroupVersionResource) bool {
	return gvr == namespacesGVR || gvr == crdsGVR
}

// servedResource is a resource the edge cluster serves.
type servedResource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Listable   bool
}

// edgeItem is an object found at the edge, by its metadata.
type edgeItem struct {
	GVR  schema.GroupVersionResource
	Meta metav1.ObjectMeta
}

// edgeContents reads the edge cluster's API directly, never a cache: what
// it says decides a deletion.
type edgeContents struct {
	// resources lists the resources the edge serves, in their preferred
	// versions.
	resources func(ctx context.Context) ([]servedResource, error)
	// list lists the objects of a resource in a namespace ("" for all).
	list func(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]metav1.ObjectMeta, error)
}

// newEdgeContents reads through discovery and metadata-only lists.
func newEdgeContents(disc discovery.DiscoveryInterface, md metadata.Interface) edgeContents {
	return edgeContents{
		resources: func(context.Context) ([]servedResource, error) { return servedResources(disc) },
		list: func(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]metav1.ObjectMeta, error) {
			return listMetadata(ctx, md, gvr, namespace)
		},
	}
}

func servedResources(disc discovery.DiscoveryInterface) ([]servedResource, error) {
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		failed := &discovery.ErrGroupDiscoveryFailed{}
		if !errors.As(err, &failed) {
			return nil, fmt.Errorf("reading which resources the edge cluster serves: %w", err)
		}
		for gv, gerr := range failed.Groups {
			if gv.Group != metricsGroup {
				return nil, fmt.Errorf("the edge cluster cannot say which resources %s serves (is its API service available?): %w", gv, gerr)
			}
		}
	}
	var out []servedResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource
			}
			out = append(out, servedResource{GVR: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced,
				Listable: slices.Contains(r.Verbs, "list")})
		}
	}
	return out, nil
}

func listMetadata(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, namespace string) ([]metav1.ObjectMeta, error) {
	var out []metav1.ObjectMeta
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := md.Resource(gvr).Namespace(namespace).List(ctx, opts)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			// No longer served (its CRD went meanwhile), or not listable.
			return out, nil
		case err != nil:
			where := "in namespace " + namespace
			if namespace == "" {
				where = "in every namespace"
			}
			return nil, fmt.Errorf("listing %s %s at the edge: %w", schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}, where, err)
		}
		for i := range l.Items {
			out = append(out, l.Items[i].ObjectMeta)
		}
		if l.Continue == "" {
			return out, nil
		}
		opts.Continue = l.Continue
	}
}

// reconcileRemoval deletes a namespace or CRD that left the mailbox, if
// and when the rule above allows it; cur is the edge object as the cache
// has it.
func (s *Syncer) reconcileRemoval(ctx context.Context, key objKey, cur *unstructured.Unstructured) error {
	s.mu.Lock()
	owner := s.owner
	logger := klog.FromContext(ctx).WithValues("object", key.String())
	if cur == nil || !ownedBy(cur, owner) || cur.GetDeletionTimestamp() != nil {
		// Not there, not the syncer's, or on its way out: nothing to do.
		s.forgetRemovalLocked(key)
		s.mu.Unlock()
		logger.V(4).Info("left the mailbox; at the edge it is gone, being deleted, or not the syncer's: nothing to remove")
		return nil
	}
	now := s.now()
	left, ok := s.removing[key]
	if !ok {
		// It left the mailbox before this syncer started.
		left = now
		s.removing[key] = now
	}
	inside := s.desiredInsideLocked(key)
	s.mu.Unlock()

	if wait := left.Add(s.removalGrace).Sub(now); wait > 0 {
		logger.V(2).Info("left the mailbox; kept for its grace period", "until", left.Add(s.removalGrace))
		s.downQ.AddAfter(key, wait)
		return nil
	}
	if inside > 0 {
		logger.V(2).Info("left the mailbox, but the mailbox still holds objects in it: looking again later", "objects", inside)
		// The translator removes a namespace after its contents: this is
		// a moment between the two, or a mailbox being rewritten.
		s.downQ.AddAfter(key, s.removalGrace)
		return nil
	}
	// From here on the edge's API, not the cache, decides.
	cur, err := s.edgeResource(key).Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.forgetRemoval(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s at the edge: %w", key, err)
	}
	if !ownedBy(cur, owner) || cur.GetDeletionTimestamp() != nil {
		s.forgetRemoval(key)
		logger.V(2).Info("left the mailbox; adopted at the edge, or being deleted there already: nothing to remove")
		return nil
	}
	what := describe(key)
	held, err := s.holdersOf(ctx, key, cur, owner)
	if err != nil {
		s.setProblem(key, problem{Reason: edgev2alpha1.SyncReasonKeptInUse, Message: fmt.Sprintf(
			"%s left the mailbox; it stays at the edge until the syncer can tell that it holds nothing the syncer did not make: %v", what, err)})
		return fmt.Errorf("looking into %s at the edge: %w", key, err)
	}
	if len(held) > 0 {
		s.keep(ctx, key, held, problem{Reason: edgev2alpha1.SyncReasonKeptInUse, Message: keptMessage(key, what, held)})
		s.downQ.AddAfter(key, s.keptRecheck)
		return nil
	}
	uid, rv := cur.GetUID(), cur.GetResourceVersion()
	err = s.edgeResource(key).Delete(ctx, key.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsConflict(err):
		// Changed since it was read (adopted, relabelled): look again.
		return fmt.Errorf("deleting %s at the edge: %w", key, err)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("deleting %s at the edge: %w", key, err)
	}
	s.forgetRemoval(key)
	logger.V(2).Info("deleted at the edge")
	return nil
}

// desiredInsideLocked counts the objects the mailbox holds in a namespace,
// or of a CRD; s.mu is held.
func (s *Syncer) desiredInsideLocked(key objKey) int {
	n := 0
	for k := range s.desired {
		switch {
		case key.GVR == namespacesGVR && k.Namespace == key.Name:
			n++
		case key.GVR == crdsGVR && k.GVR.Group != "" && k.GVR.Resource+"."+k.GVR.Group == key.Name:
			n++
		}
	}
	return n
}

// keep records why a namespace or CRD stays at the edge; the heartbeat
// reports it on the SyncTarget.
func (s *Syncer) keep(ctx context.Context, key objKey, held []edgeItem, p problem) {
	s.mu.Lock()
	old, had := s.problems[key]
	s.mu.Unlock()
	if !had || old.Reason != p.Reason {
		klog.FromContext(ctx).Info("kept at the edge: deleting it would delete objects the syncer did not make",
			"object", key.String(), "holders", holderNames(key, held, maxHolderNames))
	}
	s.setProblem(key, p)
}

func (s *Syncer) forgetRemoval(key objKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetRemovalLocked(key)
}

func (s *Syncer) forgetRemovalLocked(key objKey) {
	delete(s.removing, key)
	delete(s.inStep, key)
	delete(s.problems, key)
	delete(s.applied, key)
}

// holdersOf lists what would go with a namespace or CRD and returns what
// keeps it.
func (s *Syncer) holdersOf(ctx context.Context, key objKey, cur *unstructured.Unstructured, owner string) ([]edgeItem, error) {
	if key.GVR == crdsGVR {
		gvr, err := crdversion.Served(cur)
		if err != nil {
			return nil, err
		}
		metas, err := s.contents.list(ctx, gvr, "")
		if err != nil {
			return nil, err
		}
		items := make([]edgeItem, 0, len(metas))
		for _, m := range metas {
			items = append(items, edgeItem{GVR: gvr, Meta: m})
		}
		// Instances of a CRD are not all a namespace holds: an owner not
		// among them may be anything, so it is not presumed gone.
		return holders(items, owner, nil), nil
	}
	resources, err := s.contents.resources(ctx)
	if err != nil {
		return nil, err
	}
	scope := map[schema.GroupKind]bool{}
	for _, r := range resources {
		scope[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = r.Namespaced
	}
	var items []edgeItem
	for _, r := range resources {
		gr := r.GVR.GroupResource()
		if !r.Namespaced || !r.Listable || unlisted(gr) {
			continue
		}
		metas, err := s.contents.list(ctx, r.GVR, key.Name)
		if err != nil {
			return nil, err
		}
		for _, m := range metas {
			items = append(items, edgeItem{GVR: r.GVR, Meta: m})
		}
	}
	return holders(items, owner, scope), nil
}

// holders returns the items that keep their namespace (or CRD) at the
// edge. An item does not keep it when
//   - the syncer made it (it carries the syncer's owner label);
//   - it is being deleted already;
//   - every namespace has it: the ServiceAccount "default" and the
//     ConfigMap "kube-root-ca.crt" (events are not listed at all);
//   - it is a dependent that goes with what the syncer made, as the garbage
//     collector removes it: each of its owner references names an object
//     the syncer made, or one that is itself such a dependent, or one that
//     is being deleted or gone (only when scope is set: items are all the
//     namespace holds, and scope says which kinds are namespaced; an owner
//     of a cluster-scoped or unknown kind keeps its dependents, and so the
//     namespace). The pods and ReplicaSets of a placed Deployment go with
//     it; the PersistentVolumeClaims of a placed StatefulSet stay, unless
//     its persistentVolumeClaimRetentionPolicy made them its dependents;
//   - it is the Endpoints the endpoints controller keeps for a Service
//     that does not keep the namespace (or that is gone).
func holders(items []edgeItem, owner string, scope map[schema.GroupKind]bool) []edgeItem {
	byUID := map[string]int{}
	services := map[string]int{}
	for i, it := range items {
		if it.Meta.UID != "" {
			byUID[string(it.Meta.UID)] = i
		}
		if it.GVR == servicesGVR {
			services[it.Meta.Name] = i
		}
	}
	going := func(i int) bool { return items[i].Meta.DeletionTimestamp != nil }
	mine := func(i int) bool { return items[i].Meta.Labels[edgev2alpha1.SyncerOwnerLabel] == owner }
	// follows[i]: item i goes with what the syncer made.
	follows := map[int]bool{}
	var goesWithSyncer func(i int) bool
	goesWithSyncer = func(i int) bool {
		if mine(i) {
			return true
		}
		if v, ok := follows[i]; ok {
			return v
		}
		follows[i] = false // an ownership cycle keeps what is in it
		refs := items[i].Meta.OwnerReferences
		result := len(refs) > 0
		for _, ref := range refs {
			if j, ok := byUID[string(ref.UID)]; ok {
				result = result && (going(j) || goesWithSyncer(j))
				continue
			}
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			namespaced, known := scope[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
			// Gone: the garbage collector removes the dependent.
			result = result && scope != nil && err == nil && known && namespaced
		}
		follows[i] = result
		return result
	}
	var out []edgeItem
	for i, it := range items {
		switch {
		case going(i) || goesWithSyncer(i):
		case it.GVR == serviceAccountsGVR && it.Meta.Name == defaultServiceAccount:
		case it.GVR == configMapsGVR && it.Meta.Name == rootCAConfigMap:
		case it.GVR == endpointsGVR && it.Meta.Labels[endpointsManagedByLabel] == endpointsController && endpointsGo(items, services, it.Meta.Name, scope != nil, goesWithSyncer):
		default:
			out = append(out, it)
		}
	}
	return out
}

// endpointsGo says whether the controller-kept Endpoints of the Service
// name go with it: the Service goes with what the syncer made, is being
// deleted, or is gone (known only when items are the whole namespace).
func endpointsGo(items []edgeItem, services map[string]int, name string, whole bool, goesWithSyncer func(int) bool) bool {
	i, ok := services[name]
	if !ok {
		return whole
	}
	return items[i].Meta.DeletionTimestamp != nil || goesWithSyncer(i)
}

// describe names a namespace or CRD in messages.
func describe(key objKey) string {
	if key.GVR == crdsGVR {
		return "CRD " + key.Name
	}
	return "namespace " + key.Name
}

func keptMessage(key objKey, what string, held []edgeItem) string {
	contents := "holds objects"
	if key.GVR == crdsGVR {
		contents = "has instances"
	}
	return fmt.Sprintf("%s left the mailbox but %s that this syncer did not make (%s), which deleting it would delete: it stays at the edge. "+
		"Delete them there to let the syncer remove it, or remove its label %s to keep it for good",
		what, contents, holderNames(key, held, maxHolderNames), edgev2alpha1.SyncerOwnerLabel)
}

// holderNames names up to limit holders, sorted, and says how many more.
func holderNames(key objKey, held []edgeItem, limit int) string {
	names := make([]string, 0, len(held))
	for _, it := range held {
		switch {
		case key.GVR == crdsGVR && it.Meta.Namespace != "":
			names = append(names, it.Meta.Namespace+"/"+it.Meta.Name)
		case key.GVR == crdsGVR:
			names = append(names, it.Meta.Name)
		default:
			names = append(names, it.GVR.GroupResource().String()+"/"+it.Meta.Name)
		}
	}
	sort.Strings(names)
	if len(names) > limit {
		return strings.Join(names[:limit], ", ") + fmt.Sprintf(" and %d more", len(names)-limit)
	}
	return strings.Join(names, ", ")
}
