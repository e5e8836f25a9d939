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
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// writeCopies writes the desired copies, namespaces first, and returns how
// many it wrote, r.writers at a time (see inParallel), and the problems of
// the copies the server refused for the mailbox limit of the inventory
// space (by placement key): those are left out, and the rest written.
//
// While the inventory is known to be at its limit (full), new copies are
// left out without being sent: each would cost the server a refused write
// of the whole object, for every mailbox, at every look.
func (r *mailboxReconciler) writeCopies(ctx context.Context, inventory string, desired map[string]*desiredCopy, current map[string]metav1.Object) (int, map[string][]problem, error) {
	var written atomic.Int64
	limited := &leftOut{problems: map[string][]problem{}, namespaces: map[string]bool{}}
	for _, namespaces := range []bool{true, false} {
		var keys []string
		for _, k := range sortedKeys(desired) {
			if isNamespaces(desired[k].res.GroupVersionResource) == namespaces {
				keys = append(keys, k)
			}
		}
		if err := r.inParallel(ctx, keys, func(k string) error {
			d := desired[k]
			if msg, ok := limited.namespace(d.obj.GetNamespace()); ok {
				limited.add(d, msg)
				return nil
			}
			if msg, full := r.full.is(inventory, r.clock()); full && current[k] == nil && !d.keep {
				limited.add(d, msg)
				if namespaces {
					limited.namespaceLeftOut(d.obj.GetName(), msg)
				}
				return nil
			}
			did, err := r.write(ctx, d, current[k])
			if msg, ok := mailboxLimit(err); ok {
				klog.FromContext(ctx).V(2).Info("a copy is left out: the mailboxes of its inventory space are at their limit",
					"resource", d.res.GroupVersionResource.String(), "object", qualifiedName(d.obj), "err", err)
				r.full.mark(inventory, msg, r.clock())
				limited.add(d, msg)
				if namespaces {
					limited.namespaceLeftOut(d.obj.GetName(), msg)
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("writing %s %s: %w", d.res.Resource, qualifiedName(d.obj), err)
			}
			if did {
				written.Add(1)
			}
			return nil
		}); err != nil {
			return int(written.Load()), limited.problems, err
		}
	}
	return int(written.Load()), limited.problems, nil
}

// fullInventories remembers, for mailboxLimitRetry, the inventory spaces
// whose mailboxes the server refused a copy for their limit, and why.
// Nil: none is remembered.
type fullInventories struct {
	mu   sync.Mutex
	full map[string]fullInventory
}

type fullInventory struct {
	message string
	until   time.Time
}

func newFullInventories() *fullInventories {
	return &fullInventories{full: map[string]fullInventory{}}
}

func (f *fullInventories) mark(inventory, message string, now time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range f.full {
		if now.After(v.until) {
			delete(f.full, k)
		}
	}
	f.full[inventory] = fullInventory{message: message, until: now.Add(mailboxLimitRetry)}
}

// is reports whether inventory was found full less than mailboxLimitRetry
// ago, and why.
func (f *fullInventories) is(inventory string, now time.Time) (string, bool) {
	if f == nil {
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.full[inventory]
	return v.message, ok && !now.After(v.until)
}

// leftOut gathers the copies a reconcile left out for a mailbox limit.
type leftOut struct {
	mu         sync.Mutex
	problems   map[string][]problem
	namespaces map[string]bool
	message    string
}

// add records that a copy was left out, as a problem of each placement
// that selects it (implied namespaces have none of their own: the copies
// in them say it).
func (l *leftOut) add(d *desiredCopy, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wds := d.obj.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation]
	for name := range d.placements {
		key := spaces.Key(wds, "", name)
		if !slices.ContainsFunc(l.problems[key], func(p problem) bool { return p.Message == message }) {
			l.problems[key] = append(l.problems[key], problem{Reason: edgev2alpha1.MailboxLimitReason, Message: message})
		}
	}
}

func (l *leftOut) namespaceLeftOut(name, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.namespaces[name] = true
	l.message = message
}

// namespace reports whether a namespace's copy was left out, and why:
// the copies in it are left out too.
func (l *leftOut) namespace(name string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.message, name != "" && l.namespaces[name]
}

// mailboxLimit tells whether err is the server's refusal of a copy for
// the mailbox limit of the destination's inventory space (server/quota
// names it as a cause), and returns the cause's message, which says which
// limit and where it is set.
func mailboxLimit(err error) (string, bool) {
	var status apierrors.APIStatus
	if err == nil || !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return "", false
	}
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if string(c.Type) == edgev2alpha1.MailboxLimitReason {
				return c.Message, true
			}
		}
	}
	return "", false
}

// inParallel calls fn for each key, in key order, with up to r.writers
// calls running at once. A mailbox's copies are independent of one
// another once their namespaces exist; one at a time, a reconcile would
// wait on the server for each (with 100 objects placed on 1,000
// SyncTargets, the translator's workers spent most of the fan-out so).
// After a call fails (or panics) no new one starts; the first error seen
// is returned once the calls running are done.
func (r *mailboxReconciler) inParallel(ctx context.Context, keys []string, fn func(key string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.writers, 1))
	for _, k := range keys {
		if gctx.Err() != nil {
			break // a call failed, or ctx ended
		}
		g.Go(func() (err error) {
			if gctx.Err() != nil {
				return nil // a call failed while this one waited for its turn
			}
			// A panic fails this reconcile, as the worker loop makes it do
			// when it happens there, and never the server.
			defer func() {
				if p := recover(); p != nil {
					klog.FromContext(ctx).Error(nil, "panic writing a mailbox", "key", k, "panic", p, "stack", string(debug.Stack()))
					err = fmt.Errorf("panic on %s: %v", k, p)
				}
			}()
			return fn(k)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
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
			d.hash = hash
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
	d.hash = hash
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
	for _, key := range []string{edgev2alpha1.AssociatedStateAnnotation, edgev2alpha1.SyncErrorAnnotation, edgev2alpha1.AppliedAnnotation} {
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
//
// The SyncerConfig in the cache may be behind this reconciler's own last
// write of it (many mailboxes at once): an AlreadyExists or a conflict is
// met by reading it again from the server and writing the spec onto that.
// Failing the mailbox instead would hold its syncer back from its copies
// (a syncer watches what its SyncerConfig names) until the retry, which
// the queue's rate limit puts behind every other failed mailbox's: at 500
// edges, stalls of half a minute.
func (r *mailboxReconciler) writeSyncerConfig(ctx context.Context, cfg *edgev2alpha1.SyncerConfig, exists bool, spec edgev2alpha1.SyncerConfigSpec) error {
	err := r.putSyncerConfig(ctx, cfg, exists, spec)
	if r.getSyncerConfig == nil || !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := r.getSyncerConfig(ctx)
		if err != nil {
			return fmt.Errorf("reading the SyncerConfig again: %w", err)
		}
		return r.putSyncerConfig(ctx, latest, true, spec)
	})
}

// putSyncerConfig creates the SyncerConfig, or updates cfg when its spec is
// not spec.
func (r *mailboxReconciler) putSyncerConfig(ctx context.Context, cfg *edgev2alpha1.SyncerConfig, exists bool, spec edgev2alpha1.SyncerConfigSpec) error {
	switch {
	case !exists:
		cfg = &edgev2alpha1.SyncerConfig{ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName}, Spec: spec}
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
