// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

var crdResource = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// namespacesResource is cached in every space, mailboxes included
// (spaces.Source.WithMailboxes).
var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// KeyPrefix starts every key the API server stores.
const KeyPrefix = "/registry"

// CodecFunc returns the codec that stores a resource.
type CodecFunc func(schema.GroupResource) (runtime.Codec, error)

// RESTOptionsGetter builds the storage of each resource on the datastore.
// Resource prefixes are /<group>/<resource> ("core" for the core group), so
// a stored key reads /registry/<group>/<resource>/<space>/<namespace>/<name>
// when SpaceScoped, and /registry/<group>/<resource>/<name> otherwise.
type RESTOptionsGetter struct {
	Datastore   *Datastore
	Codec       CodecFunc
	SpaceScoped bool
	// Decorators wrap the storage of some resources, after the space
	// partitioning: lists filtered by caller, objects served from code.
	Decorators map[schema.GroupResource]func(apiserverstorage.Interface) apiserverstorage.Interface
	// WatchCache serves lists and watches of SpaceScoped resources from a
	// watch cache, as kube-apiserver's --watch-cache does (see
	// spaces.CacheSource for what it holds).
	WatchCache bool
	// Observe, when set, wraps the storage of every SpaceScoped resource
	// outside the rest, to learn of the writes committed: the garbage
	// collector's (spaces/garbagecollector). With it the stores add the
	// collector's finalizers (foregroundDeletion, orphan) as a delete's
	// propagation policy asks.
	Observe func(schema.GroupResource, apiserverstorage.Interface) apiserverstorage.Interface
}

// uncached are the resources without a watch cache, as kube-apiserver
// leaves events out of it: written often, listed seldom.
var uncached = map[schema.GroupResource]bool{
	{Resource: "events"}:                         true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

var _ generic.RESTOptionsGetter = RESTOptionsGetter{}

// ResourcePrefix returns the key prefix of a resource.
func ResourcePrefix(gr schema.GroupResource) string {
	group := gr.Group
	if group == "" {
		group = "core"
	}
	return "/" + group + "/" + gr.Resource
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (g RESTOptionsGetter) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	codec, err := g.Codec(gr)
	if err != nil {
		return generic.RESTOptions{}, fmt.Errorf("storage codec for %s: %w", gr, err)
	}
	cfg := storagebackend.NewDefaultConfig(KeyPrefix, codec)
	cfg.Transport = g.Datastore.Transport()
	if g.Datastore.Compacts() {
		cfg.CompactionInterval = 0
	}
	cfg.DBMetricPollInterval = 0
	spaceScoped := g.SpaceScoped
	decorate := g.Decorators[gr]
	observed := spaceScoped && g.Observe != nil
	if observed {
		inner := decorate
		decorate = func(s apiserverstorage.Interface) apiserverstorage.Interface {
			if inner != nil {
				s = inner(s)
			}
			return g.Observe(gr, s)
		}
	}
	return generic.RESTOptions{
		StorageConfig:           cfg.ForResource(gr),
		Decorator:               decorator(g.Datastore.rawStorage, g.Datastore.sourceStorage(), &g.Datastore.caches, &g.Datastore.decodes, gr, spaceScoped, g.WatchCache && spaceScoped && !uncached[gr], decorate),
		EnableGarbageCollection: observed,
		DeleteCollectionWorkers: 4,
		ResourcePrefix:          ResourcePrefix(gr),
		CountMetricPollPeriod:   time.Minute,
	}, nil
}

// decorator builds the storage of a resource on the datastore: for a
// SpaceScoped resource, partitioned by space and, with watchCache, with a
// watch cache keyed by space (spaces.CacheKeyFunc) in front. CRDs are
// stored once for all spaces, each space seeing those bound to it
// (spaces.DecorateCRDs). A cache fills from a storage of its own when
// sourceStorage is set, else from the resource's. The stores' decodes of
// the same bytes are done once (recentDecodes).
func decorator(rawStorage, sourceStorage rawStorageFunc, caches *watchCaches, decodes *recentDecodes, gr schema.GroupResource, spaceScoped, watchCache bool, decorate func(apiserverstorage.Interface) apiserverstorage.Interface) generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs apiserverstorage.AttrFunc, triggers apiserverstorage.IndexerFuncs,
		indexers *cache.Indexers) (apiserverstorage.Interface, factory.DestroyFunc, error) {
		if decodes != nil {
			c := *config
			c.Codec = decodes.codec(c.Codec)
			config = &c
		}
		s, destroy, err := rawStorage(config, newFunc, newListFunc, resourcePrefix)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case watchCache:
			// The cache sees the datastore without the mailboxes (and so
			// the server turns off its periodic check against the whole
			// datastore: see server/config.go).
			fill := s
			if sourceStorage != nil {
				own, destroyOwn, err := sourceStorage(config, newFunc, newListFunc, resourcePrefix)
				if err != nil {
					destroy()
					return nil, nil, err
				}
				fill, destroy = own, chain(destroyOwn, destroy)
			}
			source := spaces.CacheSource(fill, newFunc).ByKey(resourcePrefix)
			if gr == namespacesResource {
				source = source.WithMailboxes()
			}
			cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
				Storage:             source,
				Versioner:           apiserverstorage.APIObjectVersioner{},
				GroupResource:       config.GroupResource,
				EventsHistoryWindow: config.EventsHistoryWindow,
				ResourcePrefix:      resourcePrefix,
				KeyFunc:             spaces.CacheKeyFunc(resourcePrefix, keyFunc),
				NewFunc:             newFunc,
				NewListFunc:         newListFunc,
				GetAttrsFunc:        getAttrs,
				IndexerFuncs:        triggers,
				Indexers:            indexers,
				Codec:               config.Codec,
			})
			if err != nil {
				destroy()
				return nil, nil, fmt.Errorf("watch cache of %s: %w", gr, err)
			}
			delegator := cacherstorage.NewCacheDelegator(cacher, source)
			raw, destroyRaw := s, destroy
			stopCache := sync.OnceFunc(func() {
				delegator.Stop()
				cacher.Stop()
			})
			forget := caches.add(stopCache)
			destroy = sync.OnceFunc(func() {
				forget()
				stopCache()
				destroyRaw()
			})
			s = spaces.DecorateCached(delegator, raw, source, resourcePrefix)
		case spaceScoped:
			s = spaces.Decorate(s, resourcePrefix)
		case gr == crdResource:
			s = spaces.DecorateCRDs(s, spaces.ServerView)
		}
		if decorate != nil {
			s = decorate(s)
		}
		return s, destroy, nil
	}
}

// chain returns a destroy function that calls first, then second.
func chain(first, second factory.DestroyFunc) factory.DestroyFunc {
	return func() {
		first()
		second()
	}
}
