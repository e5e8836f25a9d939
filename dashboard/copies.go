// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/listpages"
	"github.com/kubestellar/kubestellar/spaces"
)

// Mailbox copies: the placement translator writes one per object, placement
// and destination into the destination's mailbox, naming its WDS
// (SourceSpaceAnnotation) and the placements that select it there
// (PlacementsAnnotation); the syncer writes back, into the same copy, why
// it cannot keep it in step at the edge (SyncErrorAnnotation) and the state
// of the object's pods and ReplicaSets there (AssociatedStateAnnotation).
// The dashboard keeps what the views show of these annotations only, and
// counts them per placement and destination: the copies' watches feed
// copyStore, which holds nothing but the records (no cache of the copies
// beside them: with every object on every edge, they are most of the
// server's objects).

// copyAnnotations are the annotations of a copy the dashboard reads
// (copyStore.key, copyOf).
var copyAnnotations = []string{spaces.Annotation, edgev2alpha1.SourceSpaceAnnotation, edgev2alpha1.PlacementsAnnotation,
	edgev2alpha1.SyncErrorAnnotation, edgev2alpha1.AssociatedStateAnnotation}

// slimLists makes the pages of lw's lists hold, of each copy, only what
// copyStore reads: its name, namespace, resource version and the
// annotations it shows. A reflector gathers every page of a list before
// its store sees any, so that a restart's list of every copy in every
// mailbox was held whole, bodies and all, before copyStore kept its
// records of them. Watch events come one at a time, and are as lw sends
// them.
func slimLists(lw cache.ListerWatcher) cache.ListerWatcher {
	return listpages.Map(lw, func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		slim := slimCopy(u)
		return &slim, nil
	})
}

// slimCopy is what copyStore reads of a copy.
func slimCopy(u *unstructured.Unstructured) unstructured.Unstructured {
	return slim(u.GetAPIVersion(), u.GetKind(), u, u.GetAnnotations())
}

// slimTyped is slimCopy of a typed object, as the server's in-process
// reader offers each copy before converting it (ReadInProcess): the
// dashboard's record is read from the object's metadata, without an
// unstructured conversion of all of it (a ConfigMap's data, a
// Deployment's spec and status) in between. Only reads obj.
func slimTyped(obj runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	out := slim(apiVersion, kind, m, m.GetAnnotations())
	return &out, true
}

// slim is what copyStore reads of a copy: its kind, name, namespace and
// resource version, and the annotations it shows, of all (only read).
func slim(apiVersion, kind string, m metav1.Object, all map[string]string) unstructured.Unstructured {
	var out unstructured.Unstructured
	out.SetAPIVersion(apiVersion)
	out.SetKind(kind)
	out.SetName(m.GetName())
	out.SetNamespace(m.GetNamespace())
	out.SetResourceVersion(m.GetResourceVersion())
	kept := make(map[string]string, len(copyAnnotations))
	for _, k := range copyAnnotations {
		if v, ok := all[k]; ok {
			kept[k] = v
		}
	}
	out.SetAnnotations(kept)
	return out
}

// copyKey names a mailbox copy.
type copyKey struct {
	mailbox, group, resource, namespace, name string
}

func (k copyKey) object() string {
	obj := k.resource
	if k.group != "" {
		obj += "." + k.group
	}
	obj += "/"
	if k.namespace != "" {
		obj += k.namespace + "/"
	}
	return obj + k.name
}

// The store holds a copy's key and record as storedKey and storedRecord,
// 32 bytes for both: every part of them that repeats across copies held
// once, in unique's handles. With every object on every edge there is a
// record per object and SyncTarget (a million with 10,000 SyncTargets and
// 100 objects), where the five strings of a copyKey and the four fields of
// a copyRecord took about 300 bytes a copy, map included.

// objectID is the part of a copyKey that names the object in the mailbox.
type objectID struct{ group, resource, namespace, name string }

// storedKey is a copyKey as the store holds it.
type storedKey struct {
	mailbox unique.Handle[string]
	object  unique.Handle[objectID]
}

func (k copyKey) stored() storedKey {
	return storedKey{unique.Make(k.mailbox), unique.Make(objectID{k.group, k.resource, k.namespace, k.name})}
}

func (k storedKey) key() copyKey {
	o := k.object.Value()
	return copyKey{k.mailbox.Value(), o.group, o.resource, o.namespace, o.name}
}

// copyShape is what every copy of one version of a WDS object says alike:
// its WDS and its placements (sorted, joined by commas, which a name
// cannot hold).
type copyShape struct{ wds, placements string }

// storedRecord is a copyRecord as the store holds it.
type storedRecord struct {
	shape unique.Handle[copyShape]
	// extra is nil unless the syncer reports about the copy.
	extra *copyExtra
}

type copyExtra struct {
	syncError  string
	associated *edgev2alpha1.AssociatedState
}

func (r copyRecord) stored() storedRecord {
	out := storedRecord{shape: unique.Make(copyShape{r.wds, strings.Join(r.placements, ",")})}
	if r.syncError != "" || r.associated != nil {
		out.extra = &copyExtra{r.syncError, r.associated}
	}
	return out
}

func (r storedRecord) record() copyRecord {
	shape := r.shape.Value()
	out := copyRecord{wds: shape.wds}
	if shape.placements != "" {
		out.placements = strings.Split(shape.placements, ",")
	}
	if r.extra != nil {
		out.syncError, out.associated = r.extra.syncError, r.extra.associated
	}
	return out
}

// copyRecord is a mailbox copy reduced to what the views show.
type copyRecord struct {
	wds        string
	placements []string
	// syncError is the syncer's "Reason: message" when it cannot keep the
	// copy in step at the edge.
	syncError string
	// associated is the state of the object's descendants at the edge;
	// nil when the syncer has not reported it (or it does not decode).
	associated *edgev2alpha1.AssociatedState
}

// annotation returns one annotation of an object, read where it is
// (GetAnnotations copies them all into a new map at each call).
func annotation(u *unstructured.Unstructured, key string) string {
	v, _, _ := unstructured.NestedString(u.Object, "metadata", "annotations", key)
	return v
}

// copyOf reads what the views show of a copy.
func copyOf(u *unstructured.Unstructured) copyRecord {
	ann := func(key string) string { return annotation(u, key) }
	r := copyRecord{wds: intern(ann(edgev2alpha1.SourceSpaceAnnotation)), syncError: strings.Clone(ann(edgev2alpha1.SyncErrorAnnotation))}
	for p := range strings.SplitSeq(ann(edgev2alpha1.PlacementsAnnotation), ",") {
		if p = strings.TrimSpace(p); p != "" {
			r.placements = append(r.placements, intern(p))
		}
	}
	slices.Sort(r.placements)
	if a := ann(edgev2alpha1.AssociatedStateAnnotation); a != "" {
		var st edgev2alpha1.AssociatedState
		if json.Unmarshal([]byte(a), &st) == nil {
			r.associated = &st
		}
	}
	return r
}

func (r copyRecord) equal(o copyRecord) bool {
	if r.wds != o.wds || r.syncError != o.syncError || !slices.Equal(r.placements, o.placements) || (r.associated == nil) != (o.associated == nil) {
		return false
	}
	if r.associated == nil {
		return true
	}
	a, b := r.associated, o.associated
	return a.ReplicaSets == b.ReplicaSets && maps.Equal(a.PodPhases, b.PodPhases) && slices.Equal(a.NotReadyPods, b.NotReadyPods)
}

// copyTally counts the copies of one placement in one mailbox.
type copyTally struct {
	present int
	// failed maps each copy the syncer cannot keep in step to why.
	failed map[copyKey]string
}

// copyIndex tallies copies by placement (key(wds, placement)) and mailbox.
type copyIndex map[string]map[string]*copyTally

func (ix copyIndex) add(k copyKey, r copyRecord, delta int) {
	for _, p := range r.placements {
		pk := key(r.wds, p)
		byMailbox := ix[pk]
		if byMailbox == nil {
			byMailbox = map[string]*copyTally{}
			ix[pk] = byMailbox
		}
		t := byMailbox[k.mailbox]
		if t == nil {
			t = &copyTally{failed: map[copyKey]string{}}
			byMailbox[k.mailbox] = t
		}
		t.present += delta
		if r.syncError != "" {
			if delta > 0 {
				t.failed[k] = r.syncError
			} else {
				delete(t.failed, k)
			}
		}
		if t.present <= 0 {
			delete(byMailbox, k.mailbox)
			if len(byMailbox) == 0 {
				delete(ix, pk)
			}
		}
	}
}

// CopyCounts says whether a placement's copies at one destination are in
// step at the edge.
type CopyCounts struct {
	// Expected is how many copies the placement has at its fullest
	// destination: the translator writes the same selection to each, so a
	// destination with fewer is missing some (not written yet, held by
	// another source, or failed to customize).
	Expected int `json:"expected"`
	// InMailbox is how many are in the destination's mailbox.
	InMailbox int `json:"inMailbox"`
	// Synced: in the mailbox, the syncer connected and not reporting a
	// problem with them.
	Synced int `json:"synced"`
	// Failed: the syncer reports it cannot keep them in step.
	Failed int `json:"failed"`
	// Waiting: in the mailbox, but the edge's syncer is not connected (or
	// silent), so nothing says they are at the edge.
	Waiting int `json:"waiting"`
	// Missing is Expected − InMailbox.
	Missing int `json:"missing"`
	// Failures are the first few failed copies, with why.
	Failures []Problem `json:"failures,omitempty"`
	// Summary says it in words: "3/3 synced", "1/3 synced, 2 failed"...
	Summary string `json:"summary"`
}

// copiesAt counts the copies of a placement at a destination whose edge is
// in state, the placement having expected copies at its fullest.
func copiesAt(t *copyTally, expected int, state string) CopyCounts {
	c := CopyCounts{Expected: expected}
	if t != nil {
		c.InMailbox, c.Failed = t.present, len(t.failed)
		keys := slices.SortedFunc(maps.Keys(t.failed), func(a, b copyKey) int { return strings.Compare(a.object(), b.object()) })
		for _, k := range keys[:min(len(keys), maxProblemsShown)] {
			reason, message, _ := strings.Cut(t.failed[k], ": ")
			c.Failures = append(c.Failures, Problem{Object: k.object(), Reason: reason, Message: message})
		}
	}
	c.Missing = max(0, expected-c.InMailbox)
	inStep := max(0, c.InMailbox-c.Failed)
	if state == StateConnected {
		c.Synced = inStep
	} else {
		c.Waiting = inStep
	}
	switch {
	case expected == 0:
		c.Summary = "no copies"
	default:
		c.Summary = fmt.Sprintf("%d/%d synced", c.Synced, expected)
		for _, part := range []struct {
			n    int
			what string
		}{{c.Failed, "failed"}, {c.Missing, "missing"}, {c.Waiting, "waiting for the edge"}} {
			if part.n > 0 {
				c.Summary += fmt.Sprintf(", %d %s", part.n, part.what)
			}
		}
	}
	return c
}

// mailboxOf is the mailbox space of a destination.
func mailboxOf(d edgev2alpha1.SinglePlacement) string {
	return spaces.MailboxName(d.Space, string(d.SyncTargetUID))
}

// copyResource is the GroupResource of a copy informer.
func copyResource(r edgev2alpha1.SyncedResource) (schema.GroupVersionResource, bool) {
	gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
	return gvr, gvr.Version != "" && gvr.Resource != ""
}

// copyStore is the store a reflector of one resource's copies (in every
// mailbox, or in those of one definition) writes into: the dashboard's
// records of them, in place of a cache of the objects.
type copyStore struct {
	ctx context.Context
	s   *Store
	gr  schema.GroupResource
	// across is what the reflector reads across: spaces.Wildcard, or the
	// wildcard of a definition.
	across string

	mu sync.Mutex
	rv string // the last resource version seen
}

var _ cache.Store = &copyStore{}

func (c *copyStore) seen(rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rv = rv
}

func (c *copyStore) key(u *unstructured.Unstructured) copyKey {
	return copyKey{intern(annotation(u, spaces.Annotation)), c.gr.Group, c.gr.Resource, intern(u.GetNamespace()), intern(u.GetName())}
}

// intern returns the copy of s that unique.Make keeps. The names, spaces
// and placements of copies repeat across mailboxes; a record holding the
// strings of the object it was read from would keep, for every copy, the
// memory of its decoding (about 90 bytes a copy in make bench's fan-out).
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// Add records a copy that was added or changed.
func (c *copyStore) Add(obj any) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("copy of %s is a %T", c.gr, obj)
	}
	c.seen(u.GetResourceVersion())
	k, r := c.key(u), copyOf(u)
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.stopped() {
		return nil
	}
	if c.s.setCopy(k, r) {
		c.s.notifyLocked()
	}
	return nil
}

// Update is Add.
func (c *copyStore) Update(obj any) error { return c.Add(obj) }

// Delete forgets a copy.
func (c *copyStore) Delete(obj any) error {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("copy of %s is a %T", c.gr, obj)
	}
	c.seen(u.GetResourceVersion())
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.stopped() {
		return nil
	}
	if c.s.deleteCopy(c.key(u)) {
		c.s.notifyLocked()
	}
	return nil
}

// stopped tells whether the store's reader was stopped (under s.mu, which
// stopping it holds): an event it delivers after that is not recorded.
func (c *copyStore) stopped() bool { return c.ctx.Err() != nil }

// Replace makes the records of the reader's mailboxes those of a full
// list: the copies the list lacks were deleted while the watch was down.
// A mailbox another reader reads (its CRD's definition changed) is that
// reader's to replace.
func (c *copyStore) Replace(list []any, rv string) error {
	c.seen(rv)
	// Read the copies before taking the lock the views wait on.
	records := make(map[copyKey]*copyRecord, len(list))
	for _, obj := range list {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("copy of %s is a %T", c.gr, obj)
		}
		r := copyOf(u)
		records[c.key(u)] = &r
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.stopped() {
		return nil
	}
	changed := false
	for k, r := range records {
		changed = c.s.setCopy(k, *r) || changed
	}
	readers := c.s.copyReaders[c.gr]
	for sk := range c.s.copies {
		if o := sk.object.Value(); o.group != c.gr.Group || o.resource != c.gr.Resource {
			continue
		}
		if readers != nil && readers.reads(sk.mailbox.Value(), c.across) {
			continue
		}
		if k := sk.key(); records[k] == nil {
			changed = c.s.deleteCopy(k) || changed
		}
	}
	if changed {
		c.s.notifyLocked()
	}
	klog.FromContext(c.ctx).V(4).Info("dashboard listed copies", "resource", c.gr.String(), "across", c.across, "copies", len(list))
	return nil
}

// Bookmark notes the resource version of a bookmark.
func (c *copyStore) Bookmark(rv string) { c.seen(rv) }

// LastStoreSyncResourceVersion is the last resource version seen.
func (c *copyStore) LastStoreSyncResourceVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rv
}

// The reflector reads no object back from its store.

func (c *copyStore) List() []any                                { return nil }
func (c *copyStore) ListKeys() []string                         { return nil }
func (c *copyStore) Get(any) (item any, exists bool, err error) { return nil, false, nil }
func (c *copyStore) GetByKey(string) (any, bool, error)         { return nil, false, nil }
func (c *copyStore) Resync() error                              { return nil }
