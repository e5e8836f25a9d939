// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crdcontroller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/finalizer"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// StatusControllerName names the status controller in logs and its queue.
const StatusControllerName = "crd-status"

// BySpace is the index of the informer of CRDs by space that NewStatus
// adds: what a space's CRDs are judged against is read through it, so
// that no CRD of another space is ever looked at.
const BySpace = "space"

// byGroup indexes the CRDs by group, for the spaces' CRDs of a group whose
// names a CRD every space serves takes or frees.
const byGroup = "kubestellar.io/crd-group"

// SpacePurger removes the stored instances of a resource in one space.
type SpacePurger interface {
	PurgeResourceIn(ctx context.Context, gr schema.GroupResource, space string) (int, error)
}

// StatusController keeps the status of the CRDs of every space but root,
// as the apiextensions server's controllers keep a cluster's (naming,
// establishing, finalizer, non-structural schema, API approval), which
// key by name and so are left to the root space's CRDs
// (docs/design/crds.md). Everything is judged within the CRD's space:
// its names against the space's other CRDs of the group and those every
// space serves, never against another space's.
type StatusController struct {
	queue    workqueue.TypedRateLimitingInterface[string]
	informer Informer
	crds     func(space string) (apiextensionsv1client.CustomResourceDefinitionInterface, error)
	purger   SpacePurger
	// everywhere are the root space's CRDs every space serves: their
	// names are taken in every space.
	everywhere func() []*apiextensionsv1.CustomResourceDefinition
	prepare    func(*apiextensionsv1.CustomResourceDefinition) error
	// recent and groups make one space's judgments of names consistent
	// across workers and ahead of the informer; see judge.
	recent recentWrites
	groups keyedLocks
}

// Informer is what the status controller asks of a cache of every
// space's CRDs (keyed by spaces.KeyFunc): a cache.SharedIndexInformer has
// it, and so does one that adds indexes once filled.
type Informer interface {
	GetIndexer() cache.Indexer
	AddIndexers(cache.Indexers) error
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	HasSynced() bool
}

// NewStatus returns a status controller over an informer of every space's
// CRDs, keyed by spaces.KeyFunc, that has not started (NewStatus adds its
// indexes to it). crds returns a client of one space's CRDs. everywhere
// returns the root space's CRDs that every space serves. prepare, when
// set, builds what serves a CRD before it is marked Established: it is
// handed the CRD as it will be written, its names accepted, and must not
// change it; until it succeeds, the CRD stays Installing.
func NewStatus(informer Informer,
	crds func(space string) (apiextensionsv1client.CustomResourceDefinitionInterface, error),
	purger SpacePurger,
	everywhere func() []*apiextensionsv1.CustomResourceDefinition,
	prepare func(*apiextensionsv1.CustomResourceDefinition) error) (*StatusController, error) {
	c := &StatusController{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: StatusControllerName}),
		informer:   informer,
		crds:       crds,
		purger:     purger,
		everywhere: everywhere,
		prepare:    prepare,
		recent:     recentWrites{crds: map[string]*apiextensionsv1.CustomResourceDefinition{}},
		groups:     keyedLocks{locks: map[string]*keyedLock{}},
	}
	// An index of the same name already there is another status
	// controller's on the same informer: the same function.
	indexers := cache.Indexers{}
	existing := informer.GetIndexer().GetIndexers()
	if _, ok := existing[BySpace]; !ok {
		indexers[BySpace] = indexBySpace
	}
	if _, ok := existing[byGroup]; !ok {
		indexers[byGroup] = indexByGroup
	}
	if err := informer.AddIndexers(indexers); err != nil {
		return nil, fmt.Errorf("indexing CRDs by space: %w", err)
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				c.changed(crd, true)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				return
			}
			if space := spaceOf(crd); space != "" {
				c.recent.seen(spaces.Key(space, "", crd.Name), crd)
			}
			old, ok := oldObj.(*apiextensionsv1.CustomResourceDefinition)
			if ok && old.DeletionTimestamp != nil && old.ResourceVersion != crd.ResourceVersion && slices.Equal(old.Finalizers, crd.Finalizers) {
				// A CRD being deleted whose change is its progress (its
				// Terminating condition, written here), as upstream's
				// finalizer controller tells: looking again would loop
				// on a failure, which the queue retries with backoff.
				return
			}
			c.changed(crd, !ok || !equality.Semantic.DeepEqual(old.Status.AcceptedNames, crd.Status.AcceptedNames))
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				c.recent.forget(d.Key)
				obj = d.Obj
			}
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				if space := spaceOf(crd); space != "" {
					c.recent.forget(spaces.Key(space, "", crd.Name))
				}
				c.changed(crd, true)
			}
		},
	})
	return c, err
}

func spaceOf(obj metav1.Object) string { return obj.GetAnnotations()[spaces.Annotation] }

func indexBySpace(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if space := spaceOf(m); space != "" {
		return []string{space}, nil
	}
	return nil, nil
}

func indexByGroup(obj any) ([]string, error) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		return []string{crd.Spec.Group}, nil
	}
	return nil, nil
}

// changed queues what an event of crd may change: crd itself and, when
// names were taken or freed, the other CRDs of its group that could take
// them or lose them: in its space, or in every space for a root CRD,
// which every space serves.
func (c *StatusController) changed(crd *apiextensionsv1.CustomResourceDefinition, names bool) {
	space := spaceOf(crd)
	switch {
	case space == "":
		return
	case space == spaces.Root:
		if !names {
			return
		}
		objs, _ := c.informer.GetIndexer().ByIndex(byGroup, crd.Spec.Group)
		for _, obj := range objs {
			if other, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				if s := spaceOf(other); s != spaces.Root && s != "" {
					c.queue.Add(spaces.Key(s, "", other.Name))
				}
			}
		}
		return
	}
	c.queue.Add(spaces.Key(space, "", crd.Name))
	if !names {
		return
	}
	objs, _ := c.informer.GetIndexer().ByIndex(BySpace, space)
	for _, obj := range objs {
		if other, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && other.Spec.Group == crd.Spec.Group && other.Name != crd.Name {
			c.queue.Add(spaces.Key(space, "", other.Name))
		}
	}
}

// Run keeps the status of the spaces' CRDs with workers until ctx is done.
func (c *StatusController) Run(ctx context.Context, workers int) {
	worker.Loop[string]{Name: StatusControllerName, Queue: c.queue, Process: c.process, Quiet: worker.Conflicts,
		Failure: "keeping the status of a space's CRD failed, will retry"}.Run(ctx, workers, nil, c.informer.HasSynced)
}

// process brings one CRD's status (or, once it is being deleted, its
// instances and finalizer) up to date.
func (c *StatusController) process(ctx context.Context, key string) (bool, error) {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil || space == spaces.Root {
		return false, nil // the root space's are upstream's
	}
	crd, err := c.get(key)
	if crd == nil || err != nil {
		return false, err
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("space", space, "crd", name))
	client, err := c.crds(space)
	if err != nil {
		return false, err
	}
	var requeue bool
	if crd.DeletionTimestamp != nil {
		requeue, err = c.finalize(ctx, client, key, space, crd)
	} else {
		err = c.judge(ctx, client, key, space, crd.Spec.Group)
	}
	if apierrors.IsNotFound(err) {
		return false, nil // deleted meanwhile: the informer will say so
	}
	return requeue, err
}

// get returns the CRD of key as the cache has it, or as this controller
// last wrote it if the cache has not caught up; nil if the cache has none.
func (c *StatusController) get(key string) (*apiextensionsv1.CustomResourceDefinition, error) {
	obj, exists, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return nil, err
	}
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !exists || !ok {
		c.recent.forget(key)
		return nil, nil
	}
	return c.recent.newer(key, crd), nil
}

// inSpace returns the CRDs of one space, read through the index of the
// space alone.
func (c *StatusController) inSpace(space string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	objs, err := c.informer.GetIndexer().ByIndex(BySpace, space)
	if err != nil {
		return nil, err
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(objs))
	for _, obj := range objs {
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			out = append(out, c.recent.newer(spaces.Key(space, "", crd.Name), crd))
		}
	}
	return out, nil
}

// judge computes and writes the status of a CRD that is not being
// deleted. Names are judged one CRD of a space's group at a time, each
// against what the others were last given (written, if the informer has
// not shown it yet), as upstream's single naming worker judges them
// against its cache of mutations: two CRDs asking for one kind at once
// would otherwise both be given it.
func (c *StatusController) judge(ctx context.Context, client apiextensionsv1client.CustomResourceDefinitionInterface, key, space, group string) error {
	unlock := c.groups.lock(space + "|" + group)
	defer unlock()
	crd, err := c.get(key)
	if crd == nil || err != nil {
		return err
	}
	sameSpace, err := c.inSpace(space)
	if err != nil {
		return err
	}
	if c.everywhere != nil {
		sameSpace = append(sameSpace, c.everywhere()...)
	}
	want, prepareErr := c.status(klog.FromContext(ctx), crd, sameSpace)
	if _, err := c.writeStatus(ctx, client, key, crd, want); err != nil {
		return err
	}
	if prepareErr != nil {
		return fmt.Errorf("preparing to serve the CRD: %w", prepareErr)
	}
	return nil
}

// status returns the status a CRD should have, judged against the CRDs
// its names count against, and prepare's error if it kept the CRD from
// being Established.
func (c *StatusController) status(logger klog.Logger, crd *apiextensionsv1.CustomResourceDefinition,
	sameSpace []*apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	want := statusCopy(crd)
	names, namesAccepted, established := NamesAndConditions(crd, sameSpace)
	want.Status.AcceptedNames = names
	apiextensionshelpers.SetCRDCondition(want, namesAccepted)

	// The establishing controller's part, once the names are accepted;
	// Established, once True, stays so.
	var prepareErr error
	if established.Status != apiextensionsv1.ConditionTrue && namesAccepted.Status == apiextensionsv1.ConditionTrue {
		established, prepareErr = c.establish(want)
	}
	apiextensionshelpers.SetCRDCondition(want, established)

	if cond := nonStructuralCondition(logger, crd); cond != nil {
		apiextensionshelpers.SetCRDCondition(want, *cond)
	} else {
		apiextensionshelpers.RemoveCRDCondition(want, apiextensionsv1.NonStructuralSchema)
	}
	// A group is immutable: a CRD that has no approval condition to have
	// never had one.
	if cond := apiApprovalCondition(crd); cond != nil {
		apiextensionshelpers.SetCRDCondition(want, *cond)
	}
	return want, prepareErr
}

// establish returns the Established condition of a CRD whose names are
// accepted: True once what serves it is prepared, as upstream's
// establishing controller sets it (a CRD is served as soon as it is
// written); Installing, with prepare's error, until then.
func (c *StatusController) establish(crd *apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionCondition, error) {
	if invalidCABundle(crd) {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
			Reason: "InvalidCABundle", Message: "The conversion webhook CABundle is invalid"}, nil
	}
	if c.prepare != nil {
		if err := c.prepare(crd); err != nil {
			return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
				Reason: "Installing", Message: fmt.Sprintf("the initial names have been accepted, but the CRD cannot be served yet: %v", err)}, err
		}
	}
	return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
		Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}, nil
}

// finalize deletes the space's instances of a CRD being deleted, then
// removes its finalizer, as upstream's finalizer controller does for a
// cluster. It asks to be called again while a purge still finds
// instances (the purger leaves those that changed while it read).
func (c *StatusController) finalize(ctx context.Context, client apiextensionsv1client.CustomResourceDefinitionInterface,
	key, space string, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	if !apiextensionshelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
		return false, nil
	}
	logger := klog.FromContext(ctx)
	want := statusCopy(crd)
	apiextensionshelpers.SetCRDCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
		Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress"})
	crd, err := c.writeStatus(ctx, client, key, crd, want)
	if err != nil {
		return false, err
	}

	gr := schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
	want = statusCopy(crd)
	switch {
	case finalizer.OverlappingBuiltInResources()[gr]:
		apiextensionshelpers.SetCRDCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "OverlappingBuiltInResource", Message: "instances overlap with built-in resources in storage"})
	case crd.Status.AcceptedNames.Plural != crd.Spec.Names.Plural:
		// Upstream skips the instances of a CRD never Established; the
		// test here is that the CRD never held its resource in the space
		// (as served, a CRD whose names are accepted is), so that the
		// instances of a resource the space's CRD never had, such as one
		// of a CRD every space serves, are never taken for its own.
		apiextensionshelpers.SetCRDCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "NeverEstablished", Message: "resource was never established"})
	default:
		n, err := c.purger.PurgeResourceIn(ctx, gr, space)
		if err != nil {
			apiextensionshelpers.SetCRDCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
				Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not delete instances: %v", err)})
			if _, werr := c.writeStatus(ctx, client, key, crd, want); werr != nil {
				logger.Error(werr, "recording the failure to delete the instances of a deleted CRD")
			}
			return false, fmt.Errorf("deleting the instances of %s: %w", gr, err)
		}
		if n > 0 {
			logger.Info("removed the instances of a deleted CRD in its space", "resource", gr, "count", n)
			return true, nil
		}
		apiextensionshelpers.SetCRDCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"})
	}
	if crd, err = c.writeStatus(ctx, client, key, crd, want); err != nil {
		return false, err
	}
	done := statusCopy(crd)
	apiextensionshelpers.CRDRemoveFinalizer(done, apiextensionsv1.CustomResourceCleanupFinalizer)
	updated, err := client.Update(ctx, done, metav1.UpdateOptions{})
	if err != nil {
		return false, err
	}
	c.recent.record(key, updated)
	return false, nil
}

// writeStatus writes want's status if it is not crd's, and returns the
// CRD as it then is.
func (c *StatusController) writeStatus(ctx context.Context, client apiextensionsv1client.CustomResourceDefinitionInterface, key string,
	crd, want *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	if sameStatus(crd, want) {
		return crd, nil
	}
	updated, err := client.UpdateStatus(ctx, want, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("updated the status of a space's CRD", "resourceVersion", updated.ResourceVersion)
	c.recent.record(key, updated)
	return updated, nil
}

// statusCopy returns a copy of crd whose metadata and status may be
// changed; the spec (interned, shared across spaces) is crd's own.
func statusCopy(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := *crd
	out.ObjectMeta = *crd.ObjectMeta.DeepCopy()
	out.Status = *crd.Status.DeepCopy()
	return &out
}

// sameStatus compares two CRDs' status, conditions but for their time of
// transition (which SetCRDCondition keeps while the status is unchanged).
func sameStatus(a, b *apiextensionsv1.CustomResourceDefinition) bool {
	if !equality.Semantic.DeepEqual(a.Status.AcceptedNames, b.Status.AcceptedNames) ||
		!equality.Semantic.DeepEqual(a.Status.StoredVersions, b.Status.StoredVersions) ||
		len(a.Status.Conditions) != len(b.Status.Conditions) {
		return false
	}
	for i := range a.Status.Conditions {
		if !apiextensionshelpers.IsCRDConditionEquivalent(&a.Status.Conditions[i], &b.Status.Conditions[i]) {
			return false
		}
	}
	return true
}

// invalidCABundle is the establishing controller's check: a conversion
// webhook whose CA bundle is not valid PEM keeps a CRD from being
// Established.
func invalidCABundle(crd *apiextensionsv1.CustomResourceDefinition) bool {
	conv := crd.Spec.Conversion
	return conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil &&
		len(webhook.ValidateCABundle(field.NewPath(""), conv.Webhook.ClientConfig.CABundle)) > 0
}

// nonStructuralCondition is the NonStructuralSchema condition a CRD
// should have, nil for none, as upstream's nonstructuralschema controller
// computes it.
func nonStructuralCondition(logger klog.Logger, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionCondition {
	cond := &apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionUnknown}
	var errs field.ErrorList
	if crd.Spec.PreserveUnknownFields {
		errs = append(errs, field.Invalid(field.NewPath("spec", "preserveUnknownFields"), crd.Spec.PreserveUnknownFields, "must be false"))
	}
	for i, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			logger.Error(err, "converting a CRD's schema to the internal version", "version", v.Name)
			continue
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			cond.Reason = "StructuralError"
			cond.Message = fmt.Sprintf("failed to check validation schema for version %s: %v", v.Name, err)
			return cond
		}
		errs = append(errs, structuralschema.ValidateStructural(field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema"), s)...)
	}
	if len(errs) == 0 {
		return nil
	}
	cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionTrue, "Violations", errs.ToAggregate().Error()
	return cond
}

// apiApprovalCondition is the KubernetesAPIApprovalPolicyConformant
// condition a CRD should have, nil for none (a group not protected), as
// upstream's apiapproval controller computes it.
func apiApprovalCondition(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionCondition {
	if !apiextensionshelpers.IsProtectedCommunityGroup(crd.Spec.Group) {
		return nil
	}
	cond := &apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.KubernetesAPIApprovalPolicyConformant}
	state, reason := apiextensionshelpers.GetAPIApprovalState(crd.Annotations)
	cond.Message = reason
	switch state {
	case apiextensionshelpers.APIApprovalInvalid:
		cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "InvalidAnnotation"
	case apiextensionshelpers.APIApprovalMissing:
		cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "MissingAnnotation"
	case apiextensionshelpers.APIApproved:
		cond.Status, cond.Reason = apiextensionsv1.ConditionTrue, "ApprovedAnnotation"
	case apiextensionshelpers.APIApprovalBypassed:
		cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "UnapprovedAnnotation"
	default:
		cond.Status, cond.Reason = apiextensionsv1.ConditionUnknown, "UnknownAnnotation"
	}
	return cond
}

// recentWrites holds the CRDs the controller wrote until the informer
// shows them, as upstream's naming controller keeps a mutation cache:
// client-go's keys by namespace and name, not by space.
type recentWrites struct {
	mu   sync.Mutex
	crds map[string]*apiextensionsv1.CustomResourceDefinition
}

func (r *recentWrites) record(key string, crd *apiextensionsv1.CustomResourceDefinition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.crds[key]; old == nil || newerVersion(crd, old) {
		r.crds[key] = crd
	}
}

// newer returns what was written of key if it is newer than cached, and
// cached otherwise.
func (r *recentWrites) newer(key string, cached *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	r.mu.Lock()
	defer r.mu.Unlock()
	written := r.crds[key]
	if written == nil {
		return cached
	}
	if newerVersion(written, cached) {
		return written
	}
	delete(r.crds, key)
	return cached
}

// seen is told of each version of key the informer shows: once it is
// the one written or a newer, the write is forgotten.
func (r *recentWrites) seen(key string, cached *apiextensionsv1.CustomResourceDefinition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if written := r.crds[key]; written != nil && !newerVersion(written, cached) {
		delete(r.crds, key)
	}
}

func (r *recentWrites) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.crds, key)
}

// newerVersion tells whether a's resource version is after b's, taking
// them as the datastore's revisions; one that is not a number is not
// newer (the cache is then believed).
func newerVersion(a, b *apiextensionsv1.CustomResourceDefinition) bool {
	ra, err1 := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, err2 := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return err1 == nil && err2 == nil && ra > rb
}

// keyedLocks is a mutex per key, held only while used.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock locks key and returns its unlock.
func (l *keyedLocks) lock(key string) func() {
	l.mu.Lock()
	k := l.locks[key]
	if k == nil {
		k = &keyedLock{}
		l.locks[key] = k
	}
	k.users++
	l.mu.Unlock()
	k.Lock()
	return func() {
		k.Unlock()
		l.mu.Lock()
		defer l.mu.Unlock()
		if k.users--; k.users == 0 {
			delete(l.locks, key)
		}
	}
}
