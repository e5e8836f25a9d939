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
	if space, ok := spaceOf(obj); ok && !s.caches(space) {
		s.leftOut.Store(true)
		return false
	}
	return true
}

func (s *Source) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
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

func (s *Source) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
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
