// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// A resource's watch cache (k8s.io/apiserver's cacher) holds the objects of
// every space but the mailboxes, keyed <resourcePrefix>/<space>/<rest> as
// the datastore stores them, so a list or watch in a space is a range of the
// cache's ordered keys, the way kcp keys its cache by logical cluster.
// Mailbox spaces are left out: their copies are the fan-out, one per edge,
// written by the server's controllers and read by one syncer and by the
// controllers' wildcard watches, so caching them would double the memory the
// fan-out costs for reads that do not need it. Mailboxes and the wildcard
// space are served from the datastore, as every space was before.

// IsMailboxName reports whether name has the form MailboxName gives:
// "<inventory>-mb-<uid>" or "mb-<uid>".
func IsMailboxName(name string) bool {
	i := strings.LastIndex(name, "mb-")
	if i < 0 || (i > 0 && name[i-1] != '-') {
		return false
	}
	return isUID(name[i+len("mb-"):])
}

// isUID reports whether s is a UID as the API server makes them: 36
// lower-case hexadecimal digits and dashes, 8-4-4-4-12.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// cached reports whether a space's objects are in the watch cache.
func cached(space string) bool {
	return space != Wildcard && !IsMailboxName(space)
}

// spaceOf returns the space an object is stored in, from the annotation
// the storage sets on every object it writes.
func spaceOf(obj runtime.Object) (string, bool) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	space, ok := accessor.GetAnnotations()[Annotation]
	return space, ok && space != ""
}

// CacheKeyFunc returns the key function of a resource's watch cache: the
// registry's key (<resourcePrefix>/<namespace>/<name>, or
// <resourcePrefix>/<name>) with the object's space inserted, as
// spaceStorage rewrites keys on their way to the datastore.
func CacheKeyFunc(resourcePrefix string, keyFunc func(runtime.Object) (string, error)) func(runtime.Object) (string, error) {
	resourcePrefix = strings.TrimSuffix(resourcePrefix, "/")
	return func(obj runtime.Object) (string, error) {
		key, err := keyFunc(obj)
		if err != nil {
			return "", err
		}
		space, ok := spaceOf(obj)
		if !ok {
			space = Root
		}
		rest, _ := strings.CutPrefix(key, resourcePrefix)
		return resourcePrefix + "/" + space + rest, nil
	}
}

// CacheSource wraps the datastore storage a watch cache lists and watches,
// leaving out the objects of mailbox spaces. A left-out event still moves
// the cache's resource version on, as a bookmark (an empty object from
// newFunc with the event's resource version): a consistent list waits for
// the cache to reach the datastore's revision, and would otherwise wait
// for the datastore's next progress report after every mailbox write.
//
// The source also notes whether it has ever left an object out. Until it
// has, the cache holds every object of the resource, and DecorateCached
// serves lists across all spaces from it: SyncTargets, Locations, Spaces
// and the like are never in a mailbox, and the server's controllers list
// them across all spaces.
func CacheSource(s storage.Interface, newFunc func() runtime.Object) *Source {
	return &Source{Interface: s, newFunc: newFunc}
}

// Source is the storage a watch cache fills from (CacheSource).
type Source struct {
	storage.Interface
	newFunc func() runtime.Object
	// mailboxes: the cache holds the mailbox spaces' objects too.
	mailboxes bool
	// leftOut is set, for good, once an object of a mailbox space has
	// passed: in a list, or in a watch's event.
	leftOut atomic.Bool
	// fields shares the managedFields' field sets of the objects the
	// cache gets.
	fields fieldSets
	// resourcePrefix, when set (ByKey), is the key of the whole resource,
	// whose lists and watches the datastore's client may narrow by key.
	resourcePrefix string
}

// ByKey lets the datastore's client leave the mailboxes' objects out of
// the cache's lists and watches of the whole resource, at resourcePrefix
// (the key the cache lists and watches), by their keys, before anything
// decodes them (WithKeptSpaces). A list or watch of one space (which the
// cache's delegator may pass on) is not narrowed by key: the first segment
// of its keys is a namespace, which may be named like a mailbox. Call it
// before the cache starts.
func (s *Source) ByKey(resourcePrefix string) *Source {
	s.resourcePrefix = strings.TrimSuffix(resourcePrefix, "/")
	return s
}

// narrowed returns ctx for a list or watch of key, with the spaces the
// cache keeps when the datastore's client may choose them by key (ByKey).
func (s *Source) narrowed(ctx context.Context, key string) context.Context {
	if s.mailboxes || s.resourcePrefix == "" || strings.TrimSuffix(key, "/") != s.resourcePrefix {
		return ctx
	}
	return WithKeptSpaces(ctx, s.keeps)
}

// Whole reports whether no object has ever been left out: a cache filled
// from the source up to a revision holds every object the datastore had
// at that revision, when Whole is still true after the cache reached it
// (every object and event passes the source before the cache has it).
func (s *Source) Whole() bool { return !s.leftOut.Load() }

// WithMailboxes makes the cache hold the objects of mailbox spaces too,
// for a resource that has few there: Namespaces, a handful per mailbox,
// which every create in a mailbox reads (namespace lifecycle admission)
// and would otherwise read from the datastore. Call it before the cache
// starts.
func (s *Source) WithMailboxes() *Source {
	s.mailboxes = true
	return s
}

// caches reports whether the cache holds a space's objects.
func (s *Source) caches(space string) bool {
	if s.mailboxes {
		return space != Wildcard
	}
	return cached(space)
}

func (s *Source) inCache(obj runtime.Object) bool {
	space, ok := spaceOf(obj)
	return !ok || s.keeps(space)
}

// GetList lists the datastore for the cache. As with Watch, the datastore's
// client leaves the mailboxes' objects out where it can (ByKey), and what
// still comes from a mailbox is dropped here.
func (s *Source) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(s.narrowed(ctx, key), key, opts, listObj); err != nil {
		return err
	}
	items, err := meta.ExtractList(listObj)
	if err != nil {
		return err
	}
	kept := items[:0:0]
	for _, item := range items {
		if s.inCache(item) {
			s.fields.share(item)
			kept = append(kept, item)
		}
	}
	if len(kept) == len(items) {
		return nil
	}
	return meta.SetList(listObj, kept)
}

// keptSpacesKey is the context key of WithKeptSpaces.
type keptSpacesKey struct{}

// WithKeptSpaces returns a context whose lists and watches of the datastore
// leave out the objects and events of the spaces keep refuses, read from
// each key, before any of them is decoded. Only for a list or watch of a
// whole resource: the space is the first segment of a key after the
// list's or watch's prefix. The datastore clients of server/storage
// honour it (the embedded datastore's in-process client, and those it
// makes for an etcd cluster); a left-out event that ends a batch arrives
// as a progress notification at its revision, which the API server's
// storage turns into a bookmark. Source filters after decoding as well.
func WithKeptSpaces(ctx context.Context, keep func(space string) bool) context.Context {
	return context.WithValue(ctx, keptSpacesKey{}, keep)
}

// keptSpacesAtKey is the context key of WithKeptSpacesAt.
type keptSpacesAtKey struct{}

// WithKeptSpacesAt is WithKeptSpaces for a range read (a list, a watch's
// initial list) whose choice of spaces depends on the revision it reads:
// at is called once per read, with that revision, before any key is kept
// or left out, and says which spaces the read keeps. A read across spaces
// of one definition keeps the spaces whose CRD has the definition as of
// the revision it reads, which the server's cache of CRDs may not have
// caught up with yet. A client that does not honour it honours
// WithKeptSpaces, which should be set beside it.
func WithKeptSpacesAt(ctx context.Context, at func(ctx context.Context, revision int64) (func(space string) bool, error)) context.Context {
	return context.WithValue(ctx, keptSpacesAtKey{}, at)
}

// KeptSpacesAt returns what WithKeptSpacesAt put in ctx, or nil.
func KeptSpacesAt(ctx context.Context) func(ctx context.Context, revision int64) (func(space string) bool, error) {
	at, _ := ctx.Value(keptSpacesAtKey{}).(func(ctx context.Context, revision int64) (func(space string) bool, error))
	return at
}

// WithoutKeptSpaces returns ctx without WithKeptSpaces and
// WithKeptSpacesAt: a read made while serving one that keeps some spaces,
// of other keys.
func WithoutKeptSpaces(ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, keptSpacesKey{}, (func(string) bool)(nil))
	return context.WithValue(ctx, keptSpacesAtKey{}, (func(context.Context, int64) (func(string) bool, error))(nil))
}

// KeptSpaces returns what WithKeptSpaces put in ctx, or nil.
func KeptSpaces(ctx context.Context) func(space string) bool {
	keep, _ := ctx.Value(keptSpacesKey{}).(func(space string) bool)
	return keep
}

// keeps reports whether the cache holds a space's objects, noting it when
// it does not (see Whole).
func (s *Source) keeps(space string) bool {
	if s.caches(space) {
		return true
	}
	s.leftOut.Store(true)
	return false
}

// Watch watches the datastore for the cache. The mailboxes' events are left
// out by the datastore's client where it can (ByKey): a fan-out's copies
// are then never decoded for a cache that would drop them. What still
// arrives from a mailbox is dropped here, as a bookmark.
func (s *Source) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(s.narrowed(ctx, key), key, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		switch e.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			if s.inCache(e.Object) {
				s.fields.share(e.Object)
				return e, true
			}
			return s.bookmark(e.Object)
		default:
			return e, true
		}
	}), nil
}

// bookmark returns a bookmark at obj's resource version, or nothing.
func (s *Source) bookmark(obj runtime.Object) (watch.Event, bool) {
	from, err := meta.Accessor(obj)
	if err != nil {
		return watch.Event{}, false
	}
	mark := s.newFunc()
	to, err := meta.Accessor(mark)
	if err != nil {
		return watch.Event{}, false
	}
	to.SetResourceVersion(from.GetResourceVersion())
	return watch.Event{Type: watch.Bookmark, Object: mark}, true
}

// DecorateCached is Decorate for a resource with a watch cache: cached is
// the cache (a storage.Interface that reads from the cache and writes to
// the datastore, as k8s.io/apiserver's CacheDelegator does) over source,
// CacheSource(raw), and raw the datastore storage, which serves the
// mailbox spaces and watches across all spaces. Lists across all spaces
// come from the cache while it holds every object (Source.Whole), from
// the datastore otherwise.
func DecorateCached(cached, raw storage.Interface, source *Source, resourcePrefix string) storage.Interface {
	return &spaceStorage{Interface: cached, raw: raw, source: source, resourcePrefix: strings.TrimSuffix(resourcePrefix, "/")}
}
