// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// The copies of a resource are read across mailboxes, a reader per way of
// reading them: through the wildcard (every space's objects of the
// resource) for a built-in resource, and for any resource when CRDs are
// bound, one definition to a name; with CRDs per space (the server's
// --crds-per-space), a custom resource's copies are read one definition at
// a time (spaces.WildcardOf), each mailbox's by the definition its CRD of
// the name has: a read through the wildcard of a name that two spaces
// define differently cannot be served at all, and a tenant defining
// another's name its own way would have hidden every copy of it.
//
// A reader reads for the mailboxes whose SyncerConfig names its resource
// and whose CRD has its definition; it starts with the first and stops
// with the last. A mailbox moves from reader to reader as its CRD changes
// (the server ends the old reader's watch with 410 Expired, and its next
// list leaves the mailbox out); a reader's list replaces the records of
// its own mailboxes only (copyStore.Replace).

// Definitions say, with CRDs per space, how a space's objects of a custom
// resource are read across spaces: the server's cache of every space's
// CRDs (see controllers' crossspace.Definitions).
type Definitions interface {
	// ReadBy returns the identity of the definition by which a space's
	// objects of the resource name (plural.group) are read across spaces,
	// or "" when they are read through the wildcard (built-in resources,
	// custom ones served in every space). ok is false when the space
	// serves no such resource.
	ReadBy(space, name string) (id string, ok bool)
	// AddEventHandler adds a handler of every space's CRDs' events.
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// ReadByDefinition has the store read the copies of custom resources, in
// each mailbox, by the definition of the mailbox's CRD of the resource.
// It may be called before or after Start.
func (s *Store) ReadByDefinition(defs Definitions) error {
	s.mu.Lock()
	s.defs = defs
	s.rereadAll()
	s.mu.Unlock()
	_, err := defs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.crdChanged,
		UpdateFunc: func(_, obj any) { s.crdChanged(obj) },
		DeleteFunc: s.crdChanged,
	})
	return err
}

// copiesOf are the readers of one resource's copies.
type copiesOf struct {
	// mailboxes are the mailboxes whose SyncerConfig names the resource,
	// each with the version it names and the reader of its copies.
	mailboxes map[string]mailboxRead
	// readers are by what they read across (spaces.Wildcard, or a
	// definition's wildcard).
	readers map[string]*copyReader
	// pending counts the mailboxes whose space serves no such resource
	// yet.
	pending int
}

// mailboxRead is how a mailbox's copies of a resource are read: across is
// the reader's ("" while the mailbox serves no such resource).
type mailboxRead struct{ version, across string }

// copyReader is a reflector of copies, into a copyStore.
type copyReader struct {
	store  *copyStore
	cancel context.CancelFunc
	// users counts the mailboxes read.
	users int
}

// acrossOf returns how a mailbox's copies of gr are read across mailboxes,
// or "" when its space serves no such resource.
func (s *Store) acrossOf(mailbox string, gr schema.GroupResource) string {
	if s.defs == nil {
		return spaces.Wildcard
	}
	id, ok := s.defs.ReadBy(mailbox, gr.String())
	switch {
	case !ok:
		return ""
	case id == "":
		return spaces.Wildcard
	default:
		return spaces.WildcardOf(id)
	}
}

// readCopies has a mailbox's copies of gvr read, by the reader its space's
// definition of the resource calls for. s.mu is held.
func (s *Store) readCopies(gvr schema.GroupVersionResource, mailbox string) {
	gr := gvr.GroupResource()
	c := s.copyReaders[gr]
	if c == nil {
		c = &copiesOf{mailboxes: map[string]mailboxRead{}, readers: map[string]*copyReader{}}
		s.copyReaders[gr] = c
	}
	mailbox = intern(mailbox) // a copy's key holds it too
	old, had := c.mailboxes[mailbox]
	now := mailboxRead{version: intern(gvr.Version), across: s.acrossOf(mailbox, gr)}
	if had && old == now {
		return
	}
	c.mailboxes[mailbox] = now
	if now.across == "" {
		c.pending++
	}
	if had && old.across == "" {
		c.pending--
	}
	if had && old.across == now.across {
		return // the version named changed: the reader reads on in its own
	}
	s.use(gvr, c, now.across, 1)
	if had {
		s.use(gvr.GroupResource().WithVersion(old.version), c, old.across, -1)
	}
}

// unreadCopies stops reading a mailbox's copies of gr. s.mu is held.
func (s *Store) unreadCopies(gr schema.GroupResource, mailbox string) {
	c := s.copyReaders[gr]
	if c == nil {
		return
	}
	old, had := c.mailboxes[mailbox]
	if !had {
		return
	}
	delete(c.mailboxes, mailbox)
	if old.across == "" {
		c.pending--
	}
	s.use(gr.WithVersion(old.version), c, old.across, -1)
}

// use counts a mailbox in or out of the reader across, starting it with
// its first and stopping it with its last. s.mu is held.
func (s *Store) use(gvr schema.GroupVersionResource, c *copiesOf, across string, delta int) {
	if across == "" {
		return
	}
	r := c.readers[across]
	if r == nil {
		if delta < 0 {
			return
		}
		r = s.startReader(gvr, across)
		c.readers[across] = r
	}
	r.users += delta
	if r.users > 0 {
		return
	}
	r.cancel()
	delete(c.readers, across)
	klog.FromContext(s.runCtx).V(2).Info("dashboard stops reading copies", "resource", gvr.GroupResource().String(), "across", across)
	// Forget the copies no reader reads now: the reader's mailboxes left
	// it (for another reader, whose list records them again) or no longer
	// name the resource.
	gr := gvr.GroupResource()
	changed := false
	for sk := range s.copies {
		if o := sk.object.Value(); o.group != gr.Group || o.resource != gr.Resource {
			continue
		}
		if !c.reads(sk.mailbox.Value(), "") {
			changed = s.deleteCopy(sk.key()) || changed
		}
	}
	if changed {
		s.notifyLocked()
	}
}

// reads tells whether the mailbox's copies are read by a running reader
// other than across.
func (c *copiesOf) reads(mailbox, across string) bool {
	m, ok := c.mailboxes[mailbox]
	return ok && m.across != "" && m.across != across && c.readers[m.across] != nil
}

// startReader runs a reflector of gvr's copies across, until its cancel
// or the store's end. s.mu is held.
func (s *Store) startReader(gvr schema.GroupVersionResource, across string) *copyReader {
	ctx, cancel := context.WithCancel(s.runCtx)
	store := &copyStore{ctx: ctx, s: s, gr: gvr.GroupResource(), across: across}
	selector := edgev2alpha1.PlacementCopyLabel + "=true"
	var lw cache.ListerWatcher = s.listWatch(s.dyn, gvr, across, selector)
	if s.local != nil {
		var local cache.ListerWatcher
		var ok bool
		if cr, converts := s.local.(convertingReader); converts {
			local, ok = cr.ListerWatcherConverting(gvr, across, selector, slimTyped)
		} else {
			local, ok = s.local.ListerWatcher(gvr, across, selector)
		}
		if ok {
			lw = local
		}
	}
	r := cache.NewReflectorWithOptions(slimLists(lw),
		&unstructured.Unstructured{}, store, cache.ReflectorOptions{Name: "dashboard copies of " + gvr.String() + " in " + across})
	go r.RunWithContext(ctx)
	klog.FromContext(ctx).V(2).Info("dashboard reads copies", "resource", gvr.String(), "across", across)
	return &copyReader{store: store, cancel: cancel}
}

// crdChanged reads again the copies, of the CRD's resource, of the
// mailbox whose CRD it is; of every mailbox, for the root's CRDs (which
// may be served in every space).
func (s *Store) crdChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return
	}
	space := crd.Annotations[spaces.Annotation]
	if space == "" {
		space = spaces.Root
	}
	gr := schema.ParseGroupResource(crd.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.copyReaders[gr]
	if c == nil || s.runCtx == nil {
		return
	}
	if space == spaces.Root {
		s.reread(gr, c)
		return
	}
	if m, ok := c.mailboxes[space]; ok {
		s.readCopies(gr.WithVersion(m.version), space)
	}
}

// reread reads again each mailbox's copies of gr, by the reader its
// definition calls for now. s.mu is held.
func (s *Store) reread(gr schema.GroupResource, c *copiesOf) {
	for mailbox, m := range c.mailboxes {
		s.readCopies(gr.WithVersion(m.version), mailbox)
	}
}

// rereadAll is reread of every resource. s.mu is held.
func (s *Store) rereadAll() {
	if s.runCtx == nil {
		return
	}
	for gr, c := range s.copyReaders {
		s.reread(gr, c)
	}
}

// rereadPending reads again the copies of the mailboxes that served no
// such resource when last looked at: their CRD's event is their cue, and
// this the safety net. s.mu is held.
func (s *Store) rereadPending() {
	for gr, c := range s.copyReaders {
		if c.pending == 0 {
			continue
		}
		for mailbox, m := range c.mailboxes {
			if m.across == "" {
				s.readCopies(gr.WithVersion(m.version), mailbox)
			}
		}
	}
}
