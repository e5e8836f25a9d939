// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// retriesBeforeReporting is how often an apply that waits for something
// that normally comes soon (its namespace, its CRD) is retried before it is
// reported as a problem (about 6 s, by the queues' backoff).
const retriesBeforeReporting = 5

// retriesBeforeReportingNamespace is how often an apply whose namespace is
// on its way is retried before it is reported (about 50 s): the namespace
// is in the mailbox before the object, but comes through another watch,
// which a busy center may deliver seconds later; meanwhile the object
// waits for it (awaitNamespace), and saying "namespace missing" for every
// object of a namespace, then taking it back, would cost the center two
// writes per object for nothing.
const retriesBeforeReportingNamespace = 8

// reconcileDownsync makes one edge object match the mailbox.
func (s *Syncer) reconcileDownsync(ctx context.Context, key objKey) (bool, error) {
	s.mu.Lock()
	d := s.desired[key]
	live, owner := s.live, s.owner
	s.mu.Unlock()
	logger := klog.FromContext(ctx).WithValues("object", key.String())

	cur, err := s.edgeGet(ctx, key)
	if apierrors.IsForbidden(err) {
		return false, s.forbidden(ctx, key, "get", err)
	}
	if err != nil {
		return false, err
	}
	if d == nil {
		if !live {
			s.clearState(key)
			// Never remove anything because the center is silent.
			s.mu.Lock()
			if s.deferred != nil {
				s.deferred[key] = true
			}
			s.mu.Unlock()
			return false, nil
		}
		s.mu.Lock()
		waiting, moved := s.handover[key], s.desiredInAnotherVersionLocked(key)
		s.mu.Unlock()
		if waiting {
			// Its resource changed version: whether the new version holds
			// it is not known yet (awaitHandover queues it again).
			return false, nil
		}
		if moved {
			// The edge object is the new version's key's now: only this
			// key's state goes.
			s.clearState(key)
			logger.V(2).Info("desired under another version of its resource: kept at the edge")
			return false, nil
		}
		if cur != nil && ownedBy(cur, owner) && s.holding(key) {
			return false, nil // the edge holds: its delete waits (hold.go)
		}
		if isContainer(key.GVR) {
			// Deleting it would delete what is in it: see namespaces.go.
			return false, s.reconcileRemoval(ctx, key, cur)
		}
		s.clearState(key)
		if cur == nil || !ownedBy(cur, owner) {
			return false, nil
		}
		uid := cur.GetUID()
		err := s.edgeResource(key).Delete(ctx, key.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("deleting %s at the edge: %w", key, err)
		}
		logger.V(2).Info("deleted at the edge")
		return false, nil
	}
	if isContainer(key.GVR) {
		// Back in the mailbox: no longer on its way out.
		s.mu.Lock()
		delete(s.removing, key)
		s.mu.Unlock()
	}
	s.mu.Lock()
	rec := s.applied[key]
	s.mu.Unlock()
	v := judge(d, cur, rec, owner)
	if v == driftSuspected {
		// The cache may not have caught up with the syncer's own last
		// apply: ask the edge before reverting anything.
		if cur, err = s.edgeGetFresh(ctx, key); err != nil {
			return false, err
		}
		v = judge(d, cur, rec, owner)
	}
	switch v {
	case notOurs:
		if key.GVR == namespacesGVR {
			// Namespaces are shared: one that is there already is used as
			// it is, never taken over.
			s.setInStep(key)
			return false, nil
		}
		s.setProblem(key, problem{Reason: edgev2alpha1.SyncReasonConflict, Message: fmt.Sprintf(
			"the edge cluster already has %s, not made by this syncer; it is left as it is (delete it there to let kubestellar manage it)", key)})
		return false, nil
	case inStep:
		s.setInStep(key)
		s.ensureEdgeInformer(ctx, key.GVR)
		return false, nil
	}
	if s.holding(key) {
		return false, nil // the edge holds: the apply waits (hold.go)
	}
	obj, err := s.edgeResource(key).Apply(ctx, key.Name, d.Object, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return false, s.applyFailed(ctx, key, d, err)
	}
	s.mu.Lock()
	s.applied[key] = &applied{Hash: d.Hash, UID: obj.GetUID(), Fields: ownFields(obj)}
	s.mu.Unlock()
	logger.V(2).Info("applied at the edge", "verdict", v.String())
	if v == driftSuspected || v == applyToVerify {
		s.countDrift(ctx, key, v == driftSuspected && cur == nil, cur, obj)
	}
	s.setInStep(key)
	s.ensureEdgeInformer(ctx, key.GVR)
	return false, nil
}

// countDrift counts an apply that reverted a change made at the edge: the
// object had been deleted, or the apply took fields back. An apply that
// changed nothing is not counted.
func (s *Syncer) countDrift(ctx context.Context, key objKey, deleted bool, before, after *unstructured.Unstructured) {
	logger := klog.FromContext(ctx)
	fields, err := reclaimed(before, after)
	if err != nil {
		// The revert is done; only its description is lost.
		logger.Error(err, "cannot tell which fields were reverted", "object", key.String())
		return
	}
	if !deleted && len(fields) == 0 {
		return
	}
	r := driftRevert(key, deleted, fields, metav1.NewTime(s.now()))
	s.mu.Lock()
	s.drift.add(r)
	s.mu.Unlock()
	logger.Info("reverted a change made at the edge", "object", key.String(), "reason", r.Reason, "fields", r.Fields)
	s.reportSoon()
}

// applyFailed records why an apply failed and asks for a retry with
// backoff. Waiting for a namespace or a CRD is normal for a little while.
func (s *Syncer) applyFailed(ctx context.Context, key objKey, d *desired, err error) error {
	retries := s.downQ.NumRequeues(key)
	switch {
	case apierrors.IsNotFound(err) && key.Namespace != "" && isNamespaceMissing(err):
		nsKey := objKey{GVR: namespacesGVR, Name: key.Namespace}
		s.mu.Lock()
		_, wanted := s.desired[nsKey]
		_, nsFailed := s.problems[nsKey]
		if s.awaiting[key.Namespace] == nil {
			s.awaiting[key.Namespace] = map[objKey]bool{}
		}
		s.awaiting[key.Namespace][key] = true
		s.mu.Unlock()
		if wanted {
			s.downQ.Add(nsKey)
		}
		// A namespace that cannot be made is reported soon (on it, and on
		// what waits for it); one on its way, only if it does not come.
		if nsFailed && retries >= retriesBeforeReporting || retries >= retriesBeforeReportingNamespace {
			s.setProblem(key, problem{Reason: edgev2alpha1.SyncReasonRejected, Message: fmt.Sprintf("namespace %s does not exist at the edge", key.Namespace)})
		}
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		s.edgeMapper.Reset()
		if retries >= retriesBeforeReporting {
			s.setProblem(key, problem{Reason: edgev2alpha1.SyncReasonResourceNotServed, Message: fmt.Sprintf(
				"the edge cluster does not serve %s (is its CRD established there?)", schema.GroupResource{Group: key.GVR.Group, Resource: key.GVR.Resource})})
		}
	case apierrors.IsForbidden(err):
		return s.forbidden(ctx, key, "patch", err)
	case isRejection(err):
		s.setProblem(key, problem{Reason: edgev2alpha1.SyncReasonRejected, Message: "the edge cluster refused it: " + err.Error()})
	}
	klog.FromContext(ctx).V(4).Info("apply failed", "object", key.String(), "hash", d.Hash, "err", err)
	return fmt.Errorf("applying %s at the edge: %w", key, err)
}

func isNamespaceMissing(err error) bool {
	if s, ok := err.(apierrors.APIStatus); ok {
		if details := s.Status().Details; details != nil {
			return details.Kind == "namespaces" && details.Group == ""
		}
	}
	return false
}

// isRejection is an error the edge gives for the object itself, which
// retrying unchanged will likely not fix.
func isRejection(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsUnsupportedMediaType(err)
}

func (s *Syncer) edgeResource(key objKey) interface {
	Apply(ctx context.Context, name string, obj *unstructured.Unstructured, options metav1.ApplyOptions, subresources ...string) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, name string, options metav1.DeleteOptions, subresources ...string) error
	Get(ctx context.Context, name string, options metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
} {
	if key.Namespace == "" {
		return s.edge.Resource(key.GVR)
	}
	return s.edge.Resource(key.GVR).Namespace(key.Namespace)
}

// edgeGet returns the edge object from the cache once it is synced, else
// from the edge cluster; nil when there is none (or its resource is not
// served there).
func (s *Syncer) edgeGet(ctx context.Context, key objKey) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	r := s.edgeObjs[key.GVR]
	s.mu.Unlock()
	if r != nil && r.informer.HasSynced() {
		return r.get(key.Namespace, key.Name), nil
	}
	return s.edgeGetFresh(ctx, key)
}

// edgeGetFresh reads an edge object from the edge cluster, not the cache;
// nil when there is none.
func (s *Syncer) edgeGetFresh(ctx context.Context, key objKey) (*unstructured.Unstructured, error) {
	obj, err := s.edgeResource(key).Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s at the edge: %w", key, err)
	}
	return obj, nil
}

func (s *Syncer) setInStep(key objKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inStep[key] = true
	if key.GVR == namespacesGVR {
		// What waited for the namespace goes now, not at its next retry.
		for k := range s.awaiting[key.Name] {
			s.downQ.Add(k)
		}
		delete(s.awaiting, key.Name)
	}
	if _, had := s.problems[key]; had {
		delete(s.problems, key)
		s.reportQ.Add(key)
	}
}

func (s *Syncer) setProblem(key objKey, p problem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inStep, key)
	if old, had := s.problems[key]; had && old == p {
		return
	}
	s.problems[key] = p
	s.reportQ.Add(key)
}

// clearState forgets an object that is no longer desired, with the record
// of its last apply: if it comes back, the syncer's next apply is a first
// one, not a revert.
func (s *Syncer) clearState(key objKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inStep, key)
	delete(s.problems, key)
	delete(s.applied, key)
	if w := s.awaiting[key.Namespace]; w != nil {
		delete(w, key)
		if len(w) == 0 {
			delete(s.awaiting, key.Namespace)
		}
	}
}

// ensureEdgeInformer starts the cache of an edge resource, once it is known
// to be served there.
func (s *Syncer) ensureEdgeInformer(ctx context.Context, gvr schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureEdgeInformerLocked(ctx, gvr)
}

func (s *Syncer) ensureEdgeInformerLocked(ctx context.Context, gvr schema.GroupVersionResource) {
	if _, ok := s.edgeObjs[gvr]; ok {
		return
	}
	// The edge objects keep the syncer's managed fields: that is how it
	// tells drift (drift.go).
	s.edgeObjs[gvr] = startInformer(ctx, s.edge, gvr, nil, nil, handlerFunc(func(obj any) { s.onEdge(ctx, gvr, obj) }), keepOwnManagedFields)
	if isWorkload(gvr) && s.pods == nil {
		s.pods = s.startInformer(ctx, s.edge, podsGVR, nil, cache.Indexers{byController: indexByController},
			handlerFunc(func(obj any) { s.onDescendant(obj) }))
		s.rsets = s.startInformer(ctx, s.edge, replicaSetsGVR, nil, cache.Indexers{byController: indexByController, byUID: indexByUID},
			handlerFunc(func(obj any) { s.onDescendant(obj) }))
	}
}

// onEdge follows a change at the edge: an object kept in step is looked at
// again (someone may have changed or removed it, or freed its name), its
// status reported, and upsync sets refreshed.
func (s *Syncer) onEdge(_ context.Context, gvr schema.GroupVersionResource, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := keyOf(gvr, u)
	s.mu.Lock()
	_, wanted := s.desired[key]
	upsync := s.upsyncGVRs[gvr]
	owned := ownedBy(u, s.owner)
	if owned && isWorkload(gvr) {
		s.workloadUID[string(u.GetUID())] = key
	}
	s.mu.Unlock()
	if wanted || owned {
		s.downQ.Add(key)
		s.reportQ.Add(key)
	}
	if upsync {
		s.upQ.Add(gvr)
	}
}
