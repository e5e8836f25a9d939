// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
)

// Decorate wraps the storage of one resource so that it is partitioned by
// space. resourcePrefix is the prefix every key of the resource starts with
// (for example "/core/configmaps"); keys are rewritten from
// <resourcePrefix>/<rest> to <resourcePrefix>/<space>/<rest>, with the space
// taken from the request context, and every object written is annotated with
// its space so that wildcard lists and watches can tell where items belong.
func Decorate(s storage.Interface, resourcePrefix string) storage.Interface {
	return &spaceStorage{Interface: s, resourcePrefix: strings.TrimSuffix(resourcePrefix, "/")}
}

type spaceStorage struct {
	// Interface serves the spaces, from the watch cache when raw is set.
	storage.Interface
	// raw, when set, is the datastore storage under the cache: it serves
	// what the cache leaves out, the mailbox spaces and the wildcard.
	raw storage.Interface
	// source, set with raw, is what the cache fills from: while it is
	// Whole, the cache serves lists across all spaces too.
	source         *Source
	resourcePrefix string
}

// in returns the storage that serves a space.
func (s *spaceStorage) in(space string) storage.Interface {
	if s.raw != nil && !s.source.caches(space) {
		return s.raw
	}
	return s.Interface
}

// listedIn returns the storage that serves a space's lists and watches. A
// mailbox's are the datastore's even for a resource whose cache holds the
// mailboxes' objects (Namespaces, for admission's reads: WithMailboxes):
// its syncer lists and watches them, and a fan-out to a thousand mailboxes
// puts that cache minutes behind the datastore, so that a syncer's list
// at resource version "0" missed the namespace its copies were in, and
// its watch waited behind the cache for it, while its other resources,
// read from the datastore, had long arrived.
func (s *spaceStorage) listedIn(space string) storage.Interface {
	if s.raw != nil && !cached(space) {
		return s.raw
	}
	return s.in(space)
}

var _ storage.Interface = &spaceStorage{}

// spaceKey maps a key of the undecorated layout into the space of ctx.
// Only whole-resource list and watch may use the wildcard space.
func (s *spaceStorage) spaceKey(ctx context.Context, key string, wildcardOK bool) (string, string, error) {
	rest, ok := strings.CutPrefix(key, s.resourcePrefix)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return "", "", apierrors.NewInternalError(fmt.Errorf("storage key %q is outside resource prefix %q", key, s.resourcePrefix))
	}
	space := SpaceOrRoot(ctx)
	if space == Wildcard {
		if !wildcardOK || strings.Trim(rest, "/") != "" {
			return "", "", apierrors.NewBadRequest("the wildcard space allows only list and watch across all namespaces")
		}
		return key, space, nil
	}
	return s.resourcePrefix + "/" + space + rest, space, nil
}

func setSpace(obj runtime.Object, space string) error {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	annotations := accessor.GetAnnotations()
	if annotations[Annotation] == space {
		return nil
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[Annotation] = space
	accessor.SetAnnotations(annotations)
	return nil
}

func (s *spaceStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	key, space, err := s.spaceKey(ctx, key, false)
	if err != nil {
		return err
	}
	if err := setSpace(obj, space); err != nil {
		return err
	}
	return s.in(space).Create(ctx, key, obj, out, ttl)
}

func (s *spaceStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	key, space, err := s.spaceKey(ctx, key, false)
	if err != nil {
		return err
	}
	return s.in(space).Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
}

func (s *spaceStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	key, space, err := s.spaceKey(ctx, key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	w, err := s.listedIn(space).Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return expiring(ctx, w), nil
}

func (s *spaceStorage) Get(ctx context.Context, key string, opts storage.GetOptions, objPtr runtime.Object) error {
	key, space, err := s.spaceKey(ctx, key, false)
	if err != nil {
		return err
	}
	return s.in(space).Get(ctx, key, opts, objPtr)
}

func (s *spaceStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	key, space, err := s.spaceKey(ctx, key, opts.Recursive)
	if err != nil {
		return err
	}
	if space == Wildcard && s.raw != nil {
		if served, err := s.wildcardFromCache(ctx, key, opts, listObj); served || err != nil {
			return err
		}
	}
	if s.raw != nil && serverItself(ctx) && s.Interface.ReadinessCheck() != nil {
		// A list the server makes itself, on the storage rather than
		// through the API (the CRD finalizer's list of a deleted CRD's
		// instances, the first read of a cache made for that list), is
		// read from the datastore while the cache fills. The cache
		// refuses unpaginated lists then ("storage is (re)initializing");
		// an API client retries after the second it is told to wait, but
		// the CRD finalizer records a failed deletion, and its retry can
		// lose a race with its own informer and leave the CRD Terminating
		// until that informer's resync, minutes later.
		return s.raw.GetList(ctx, key, opts, listObj)
	}
	return s.listedIn(space).GetList(ctx, key, opts, listObj)
}

// serverItself tells whether a call on the storage comes from the server's
// own code rather than through the API, where every request has a user.
func serverItself(ctx context.Context) bool {
	_, ok := genericapirequest.UserFrom(ctx)
	return !ok
}

// CorrectEmptyLists wraps a storage that reads the datastore so that an
// empty list reports a revision read before it. kine answers an empty list
// with the revision of a second query, made after the list: an object
// committed in between is then neither in the list nor after the revision
// a watch starts from, and a list-then-watch client never sees it (at a
// fresh start, an informer of CRDs missed the first CRD, and the server
// never became ready). A watch from the revision read before replays
// anything created since. Consistent lists and lists at resource version
// "0" (any: informers', and a watch cache's own) are corrected; a list at
// a given resource version needs no correction.
func CorrectEmptyLists(s storage.Interface) storage.Interface { return emptyListCorrecting{s} }

type emptyListCorrecting struct{ storage.Interface }

func (s emptyListCorrecting) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		return s.Interface.GetList(ctx, key, opts, listObj)
	}
	before, revErr := s.GetCurrentResourceVersion(ctx)
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	if revErr != nil || meta.LenList(listObj) > 0 {
		return nil
	}
	list, err := meta.ListAccessor(listObj)
	if err != nil {
		return nil
	}
	if rv, err := strconv.ParseUint(list.GetResourceVersion(), 10, 64); err == nil && rv > before {
		list.SetResourceVersion(strconv.FormatUint(before, 10))
	}
	return nil
}

// wildcardFromCache serves a list across all spaces from the watch cache
// while it holds every object of the resource, checked again once the list
// is made: the cache was then at the list's revision, and a mailbox object
// there would have been left out on its way in, before. A cache still
// filling (the server starting) is waited for a moment: its first list is
// one read of the datastore, where every controller's informer would
// otherwise make its own. When the cache cannot serve, it reports the list
// not served, and the datastore serves it.
func (s *spaceStorage) wildcardFromCache(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) (bool, error) {
	if s.source == nil || !s.source.Whole() || !s.cacheReady(ctx) {
		return false, nil
	}
	err := s.Interface.GetList(ctx, key, opts, listObj)
	if err == nil && s.source.Whole() {
		return true, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	// The datastore's list appends to the items.
	return false, meta.SetList(listObj, nil)
}

// cacheWait bounds how long a list across all spaces waits for the cache
// to fill.
const cacheWait = 5 * time.Second

// cacheReady reports whether the cache is ready, waiting for it at most
// cacheWait.
func (s *spaceStorage) cacheReady(ctx context.Context) bool {
	if s.Interface.ReadinessCheck() == nil {
		return true
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, cacheWait, false, func(context.Context) (bool, error) {
		return s.Interface.ReadinessCheck() == nil, nil
	})
	return err == nil
}

func (s *spaceStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	key, space, err := s.spaceKey(ctx, key, false)
	if err != nil {
		return err
	}
	stamped := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		obj, ttl, err := tryUpdate(input, res)
		if err != nil {
			return obj, ttl, err
		}
		return obj, ttl, setSpace(obj, space)
	}
	return s.in(space).GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, stamped, cachedExistingObject)
}
