// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/server/quota"
	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
)

// spaceQuotas puts together what server/quota needs to bound tenant
// spaces: what each space stores (counted in the datastore, plus the CRDs
// it serves), its limits (SpaceQuotas over the flags' defaults), and the
// watches open in it on this server.
type spaceQuotas struct {
	usage   *storage.Usage
	limits  *quota.Resolver
	watches *quota.Watches
	spaces  *spaceLookup
	crds    *crdIndex
	// crdSizes memoizes the JSON size of each CRD, by UID and
	// resourceVersion.
	crdSizes *lru.Cache[string, int64]
	once     sync.Once
	builtIn  []schema.GroupResource
}

func newSpaceQuotas(defaults quota.Defaults, lookup *spaceLookup, crds *crdIndex) *spaceQuotas {
	sizes, _ := lru.New[string, int64](4096)
	q := &spaceQuotas{limits: &quota.Resolver{Defaults: defaults}, watches: &quota.Watches{}, spaces: lookup, crds: crds, crdSizes: sizes}
	q.usage = storage.NewUsage(q.resources)
	q.usage.InventoryOf = q.inventoryOf
	q.usage.MailboxResources = q.mailboxResources
	q.usage.PerResource = map[string]schema.GroupResource{"synctargets": edgev2alpha1.SchemeGroupVersion.WithResource("synctargets").GroupResource()}
	return q
}

// inventoryOf returns the inventory space of a mailbox, from the label the
// mailbox controller sets on its Space (a mailbox's name may shorten it).
func (q *spaceQuotas) inventoryOf(mailbox string) (string, bool) {
	if !spaces.IsMailboxName(mailbox) {
		return "", false
	}
	typ, found, err := q.spaces.SpaceType(mailbox)
	if err != nil || !found || typ != tenancyv1alpha1.SpaceTypeMailbox {
		return "", false
	}
	inventory, found, err := q.spaces.field(mailbox, "metadata", "labels", edgev2alpha1.MailboxSyncTargetSpaceLabel)
	return inventory, err == nil && found && inventory != ""
}

// mailboxResources are those the mailboxes of an inventory space may hold:
// the built-in ones and those of the CRDs bound to every space or to one
// of its mailboxes.
func (q *spaceQuotas) mailboxResources(inventory string) ([]schema.GroupResource, error) {
	out, err := q.resources(spaces.Root)
	if err != nil {
		return nil, err
	}
	// The CRDs bound to each of its mailboxes (those every space serves
	// are in out already, as root's).
	seen := map[string]bool{}
	for _, mailbox := range q.spaces.mailboxesOf(inventory) {
		for _, crd := range q.servedCRDs(mailbox, false) {
			if !seen[crd.Name] {
				seen[crd.Name] = true
				out = append(out, schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural})
			}
		}
	}
	return out, nil
}

// chargedInventory returns the inventory space a mailbox's writes are
// charged to: one a user created (it has an owner). The inventories of the
// server's admins are the fleet operator's own, and their copies are not
// bounded (an admin may give one an owner to bound it).
func (q *spaceQuotas) chargedInventory(mailbox string) (string, bool) {
	inventory, ok := q.inventoryOf(mailbox)
	if !ok {
		return "", false
	}
	return inventory, q.owned(inventory)
}

// owned reports whether a user (not an admin) created space.
func (q *spaceQuotas) owned(space string) bool {
	owner, found, err := q.spaces.field(space, "metadata", "annotations", tenancyv1alpha1.SpaceOwnerAnnotation)
	return err == nil && found && owner != ""
}

// statusUsage is what a Space's status shows: what it stores, and for an
// inventory space under a mailbox limit what its mailboxes hold.
func (q *spaceQuotas) statusUsage(ctx context.Context, space string) (tenancyv1alpha1.SpaceUsage, error) {
	objects, bytes, err := q.Of(ctx, space)
	if err != nil {
		return tenancyv1alpha1.SpaceUsage{}, err
	}
	usage := tenancyv1alpha1.SpaceUsage{Objects: objects, Bytes: bytes}
	if typ, _, _ := q.spaces.SpaceType(space); typ != tenancyv1alpha1.SpaceTypeInventory {
		return usage, nil
	}
	limits, err := q.limits.For(space)
	if err != nil {
		return tenancyv1alpha1.SpaceUsage{}, err
	}
	if limits.SyncTargets.Value != 0 {
		syncTargets, _, err := q.usage.OfResource(ctx, space, "synctargets")
		if err != nil {
			return tenancyv1alpha1.SpaceUsage{}, err
		}
		usage.SyncTargets = &syncTargets
	}
	if !q.owned(space) || !limits.Mailboxes() {
		return usage, nil
	}
	mailboxObjects, mailboxBytes, err := q.usage.OfMailboxes(ctx, space)
	if err != nil {
		return tenancyv1alpha1.SpaceUsage{}, err
	}
	usage.MailboxObjects, usage.MailboxBytes = &mailboxObjects, &mailboxBytes
	return usage, nil
}

// governed reports whether a space's users are bounded: every space but
// root, the wildcard and mailboxes.
func (q *spaceQuotas) governed(space string) bool {
	if space == spaces.Root || space == spaces.Wildcard {
		return false
	}
	typ, found, err := q.spaces.SpaceType(space)
	return err == nil && found && typ != tenancyv1alpha1.SpaceTypeMailbox
}

// resources are those a space may store: the built-in ones and those of
// the CRDs it serves; none until the CRD cache has synced.
func (q *spaceQuotas) resources(space string) ([]schema.GroupResource, error) {
	if q.crds.lister.Load() == nil {
		return nil, errors.New("the server is starting: its CRD cache has not synced")
	}
	q.once.Do(func() {
		for _, k := range builtin.Kinds() {
			q.builtIn = append(q.builtIn, k.GroupResource())
		}
	})
	out := append([]schema.GroupResource(nil), q.builtIn...)
	for _, crd := range q.servedCRDs(space, true) {
		out = append(out, schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural})
	}
	return out, nil
}

// servedCRDs returns the CRDs space serves; with all false, not those
// every space serves (kubestellar's own). It reads the CRD cache's index
// by space: a tenant's every write asks it, and the server may hold many
// spaces' CRDs.
func (q *spaceQuotas) servedCRDs(space string, all bool) []*apiextensionsv1.CustomResourceDefinition {
	crds, err := q.crds.servedBy(space, all)
	if err != nil {
		return nil
	}
	return crds
}

// Of returns what space stores: its objects in the datastore, and the
// definitions of the CRDs it serves (every space's charged for a CRD
// several share), but for the server's own, which every space serves.
func (q *spaceQuotas) Of(ctx context.Context, space string) (objects, bytes int64, err error) {
	objects, bytes, err = q.usage.Of(ctx, space)
	if err != nil {
		return 0, 0, err
	}
	crdObjects, crdBytes, err := q.crdCharge(space)
	return objects + crdObjects, bytes + crdBytes, err
}

// crdCharge is what the CRDs space serves count in it.
func (q *spaceQuotas) crdCharge(space string) (objects, bytes int64, err error) {
	for _, crd := range q.servedCRDs(space, false) {
		if q.crds.perSpace {
			// Stored in the space (--crds-per-space): counted with its
			// objects.
			continue
		}
		key := string(crd.UID) + "/" + crd.ResourceVersion
		size, ok := q.crdSizes.Get(key)
		if !ok {
			data, err := json.Marshal(crd)
			if err != nil {
				return 0, 0, err
			}
			size = int64(len(data))
			q.crdSizes.Add(key, size)
		}
		objects++
		bytes += size
	}
	return objects, bytes, nil
}

// Admit implements quota.Usage, with the space's CRDs charged first.
func (q *spaceQuotas) Admit(ctx context.Context, space, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (int64, int64, bool, error) {
	crdObjects, crdBytes, err := q.crdCharge(space)
	if err != nil {
		return 0, 0, false, err
	}
	less := func(limit, charge int64) int64 {
		if limit == 0 {
			return 0
		}
		if limit -= charge; limit <= 0 {
			return -1 // full already: nothing more fits
		}
		return limit
	}
	stored, storedBytes, ok, err := q.usage.Admit(ctx, space, key, objects, bytes, less(maxObjects, crdObjects), less(maxBytes, crdBytes), dryRun)
	return stored + crdObjects, storedBytes + crdBytes, ok, err
}

// AdmitResource implements quota.Usage.
func (q *spaceQuotas) AdmitResource(ctx context.Context, space, resource, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (int64, int64, bool, error) {
	return q.usage.AdmitResource(ctx, space, resource, key, objects, bytes, maxObjects, maxBytes, dryRun)
}

// AdmitMailbox implements quota.Usage.
func (q *spaceQuotas) AdmitMailbox(ctx context.Context, inventory, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (int64, int64, bool, error) {
	return q.usage.AdmitMailbox(ctx, inventory, key, objects, bytes, maxObjects, maxBytes, dryRun)
}

// key is where a write is stored; "" for a CRD, which is stored outside
// every space (and counted from the CRD cache).
func (q *spaceQuotas) key(space string, a admission.Attributes) string {
	gr := a.GetResource().GroupResource()
	if gr == apiextensionsv1.Resource("customresourcedefinitions") {
		return ""
	}
	return storage.Key(gr, space, a.GetNamespace(), a.GetName())
}

func (q *spaceQuotas) admission() admission.Interface {
	return quota.NewAdmission(q.limits.For, q, quota.Scope{Governed: q.governed, MailboxOf: q.chargedInventory, Key: q.key})
}

// forgetEvery is how often the counts of deleted spaces are forgotten.
const forgetEvery = time.Minute

// forgetDeleted forgets, every forgetEvery until ctx ends, the counts of
// spaces the cache of Spaces no longer has.
func (q *spaceQuotas) forgetDeleted(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) {
		q.usage.Retain(func(space string) bool {
			_, found, err := q.spaces.SpaceType(space)
			return err != nil || found
		})
	}, forgetEvery)
}

// spaceQuotasGVR are the SpaceQuotas, in the root space.
var spaceQuotasGVR = tenancyv1alpha1.SchemeGroupVersion.WithResource("spacequotas")

// startQuotaCache starts the cache of SpaceQuotas the limits are read
// from, and returns its informer.
func (q *spaceQuotas) startQuotaCache(ctx context.Context, root dynamic.Interface) (cache.SharedIndexInformer, error) {
	informer := dynamicinformer.NewFilteredDynamicInformer(root, spaceQuotasGVR, "", 0, cache.Indexers{}, nil).Informer()
	// Held typed: the limits are read on every tenant's write.
	if err := informer.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		typed := &tenancyv1alpha1.SpaceQuota{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, err
		}
		typed.ManagedFields = nil
		return typed, nil
	}); err != nil {
		return nil, err
	}
	go informer.RunWithContext(ctx)
	q.limits.SetQuotas(func() ([]*tenancyv1alpha1.SpaceQuota, error) {
		var out []*tenancyv1alpha1.SpaceQuota
		for _, obj := range informer.GetStore().List() {
			if typed, ok := obj.(*tenancyv1alpha1.SpaceQuota); ok {
				out = append(out, typed)
			}
		}
		return out, nil
	})
	return informer, nil
}
