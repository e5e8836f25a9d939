// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/server/customresources"
	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
)

// boundDefinitions resolves custom resource requests as CRDs are stored
// today: one definition per name, which every space bound to it serves
// (spaces.WithCRDBindings, before, refuses the others).
type boundDefinitions struct {
	lister apiextensionslisters.CustomResourceDefinitionLister
}

var _ customresources.Definitions = boundDefinitions{}

func (b boundDefinitions) For(_, group, resource string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if builtin.IsBuiltInGroup(group) {
		// The built-in kinds' own, whatever a CRD stored before admission
		// refused their groups says.
		return nil, nil
	}
	crd, err := b.lister.Get(resource + "." + group)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return crd, err
}

func (b boundDefinitions) InUse(f func(*apiextensionsv1.CustomResourceDefinition)) error {
	crds, err := b.lister.List(labels.Everything())
	for _, crd := range crds {
		f(crd)
	}
	return err
}

// spaceDefinitions resolves custom resource requests with CRDs stored per
// space (--crds-per-space): a space's own CRD of the name, unless the root
// space serves one everywhere, whose name is the server's.
type spaceDefinitions struct {
	// crds are every space's CRDs, keyed by spaces.KeyFunc, indexed by
	// name (crdsByName).
	crds cache.Indexer
	// served says what each serves by.
	served *spaceCRDCache
	// revisions, when set, returns the revision of the last change of
	// each space's CRD of a name as of a revision, from the datastore.
	revisions func(ctx context.Context, name string, revision int64) (map[string]int64, error)
}

var (
	_ customresources.Definitions = spaceDefinitions{}
	_ customresources.Readers     = spaceDefinitions{}
)

// crdsByName indexes the CRDs of every space by name.
const crdsByName = "kubestellar.io/crd-name"

func crdName(obj any) ([]string, error) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		return []string{crd.Name}, nil
	}
	return nil, nil
}

func (d spaceDefinitions) get(space, name string) *apiextensionsv1.CustomResourceDefinition {
	obj, ok, err := d.crds.GetByKey(spaces.Key(space, "", name))
	if err != nil || !ok {
		return nil
	}
	crd, _ := obj.(*apiextensionsv1.CustomResourceDefinition)
	return crd
}

func (d spaceDefinitions) For(space, group, resource string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if builtin.IsBuiltInGroup(group) {
		return nil, nil
	}
	name := resource + "." + group
	if crd := d.get(spaces.Root, name); crd != nil && spaces.ServedEverywhere(crd.Annotations) {
		return crd, nil
	}
	if space == spaces.Wildcard {
		return d.acrossSpaces(name)
	}
	if id, ok := spaces.DefinitionOfWildcard(space); ok {
		return d.ofDefinition(name, id)
	}
	if crd := d.get(space, name); crd != nil {
		return crd, nil
	}
	return nil, customresources.ErrNotServed
}

// ofDefinition resolves a read across every space of the definition id of
// name: a CRD of a space that serves it, a not found when none does (the
// name's definition in the root space served everywhere is read through
// the wildcard alone, and has no identity of a space's).
func (d spaceDefinitions) ofDefinition(name, id string) (*apiextensionsv1.CustomResourceDefinition, error) {
	key, ok := d.served.servingOne(id)
	if !ok {
		return nil, customresources.ErrNotServed
	}
	obj, ok, err := d.crds.GetByKey(key)
	if err != nil || !ok {
		return nil, customresources.ErrNotServed
	}
	crd, _ := obj.(*apiextensionsv1.CustomResourceDefinition)
	if crd == nil || crd.Name != name || spaces.ServedEverywhere(crd.Annotations) {
		return nil, customresources.ErrNotServed
	}
	return crd, nil
}

// Spaces says which spaces a read of the definition id of name keeps:
// those whose CRD of the name serves by it, as the cache has them when
// each object is read. A space whose CRD moves to or from the definition
// ends the reads of it (spaceCRDCache.moved): they list again.
func (d spaceDefinitions) Spaces(name, id string) func(space string) bool {
	return func(space string) bool { return d.served.servedIn(space, name) == id }
}

// SpacesAt is Spaces for a range read at a revision: once the cache of
// CRDs holds every space's CRD of the name as it is at that revision (it
// usually does; it may lag the datastore by the time an event takes), so
// that a list never misses, or takes in, the objects of a space whose CRD
// moved to or from the definition before the list's revision but after
// the cache last heard. A move after the list's revision ends the watch
// that follows it (Handler.Moved).
func (d spaceDefinitions) SpacesAt(name, id string) func(ctx context.Context, revision int64) (func(space string) bool, error) {
	if d.revisions == nil {
		return nil
	}
	return func(ctx context.Context, revision int64) (func(space string) bool, error) {
		changed, err := d.revisions(ctx, name, revision)
		if err != nil {
			return nil, fmt.Errorf("reading the CRDs of %s at revision %d: %w", name, revision, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, caughtUpWithin, true, func(context.Context) (bool, error) {
			return d.served.caughtUp(name, changed, revision), nil
		})
		if err != nil {
			return nil, fmt.Errorf("the server's cache of CRDs has not caught up with revision %d of %s: %w", revision, name, err)
		}
		return d.Spaces(name, id), nil
	}
}

// caughtUpWithin bounds the wait of SpacesAt for the cache of CRDs.
const caughtUpWithin = 10 * time.Second

// acrossSpaces resolves a list or watch across every space, which the
// server's own controllers make: served when every space that defines the
// name defines it the same, for one definition decodes every object then.
func (d spaceDefinitions) acrossSpaces(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	objs, err := d.crds.ByIndex(crdsByName, name)
	if err != nil {
		return nil, err
	}
	var first *apiextensionsv1.CustomResourceDefinition
	var id string
	for _, obj := range objs {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		if first == nil {
			first, id = crd, customresources.Identity(crd)
			continue
		}
		if customresources.Identity(crd) != id {
			return nil, fmt.Errorf("spaces define %s differently: list and watch it in each space", name)
		}
	}
	if first == nil {
		return nil, customresources.ErrNotServed
	}
	return first, nil
}

func (d spaceDefinitions) InUse(f func(*apiextensionsv1.CustomResourceDefinition)) error {
	for _, obj := range d.crds.List() {
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			f(crd)
		}
	}
	return nil
}

// startingDefinitions resolves custom resource requests until the cache of
// every space's CRDs has synced, from the apiextensions server's cache of
// the root space's CRDs: the root space's own, and in every space those
// it serves everywhere (the server's own CRDs, which its start waits for).
type startingDefinitions struct {
	root apiextensionslisters.CustomResourceDefinitionLister
}

func (d startingDefinitions) For(space, group, resource string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if builtin.IsBuiltInGroup(group) {
		return nil, nil
	}
	crd, err := d.root.Get(resource + "." + group)
	if err == nil && (space == spaces.Root || spaces.ServedEverywhere(crd.Annotations)) {
		return crd, nil
	}
	return nil, errors.New("the server is starting: custom resources are served once its cache of CRDs has synced")
}

func (d startingDefinitions) InUse(f func(*apiextensionsv1.CustomResourceDefinition)) error {
	crds, err := d.root.List(labels.Everything())
	for _, crd := range crds {
		f(crd)
	}
	return err
}

// sweepEvery is how often, at most, the definitions no longer in use are
// let go after a CRD changed; they are looked for every sweepAnyway too.
const (
	sweepEvery  = time.Second
	sweepAnyway = 5 * time.Minute
)

// serveCustomResources has the custom resources served by definition. With
// CRDs stored once, they are resolved from the apiextensions server's own
// cache of CRDs at once; with CRDs per space, from the cache of every
// space's CRDs, once startSpaces has it synced (spaceCRDsSynced).
func (s *Server) serveCustomResources(crds apiextensionsinformers.CustomResourceDefinitionInformer) error {
	h := s.cfg.customResources
	if h == nil {
		return nil // not made: the upstream handler serves them
	}
	s.core.RegisterDestroyFunc(h.Destroy)
	if s.cfg.Options.CRDsPerSpace {
		h.SetDefinitions(startingDefinitions{root: crds.Lister()})
		return nil
	}
	// From the first request: until the cache has synced, it knows no
	// CRD, nor does the upstream handler, which shares it.
	h.SetDefinitions(boundDefinitions{lister: crds.Lister()})
	return s.core.AddPostStartHook("kubestellar-custom-resources", func(hookCtx genericapiserver.PostStartHookContext) error {
		ctx := klog.NewContext(hookCtx, klog.FromContext(hookCtx).WithName("custom-resources"))
		return s.sweepUnused(ctx, crds.Informer())
	})
}

// spaceCRDsSynced runs the cache of every space's CRDs and, once it has
// synced, serves custom resources by each space's definitions.
func (s *Server) spaceCRDsSynced(ctx context.Context, crds *spaceCRDCache) error {
	if h := s.cfg.customResources; h != nil {
		if err := s.sweepUnused(klog.NewContext(ctx, klog.FromContext(ctx).WithName("custom-resources")), crds); err != nil {
			return err
		}
		changed := func(obj any, crd *apiextensionsv1.CustomResourceDefinition) {
			if key, err := spaces.KeyFunc(obj); err == nil {
				h.Changed(key, crd)
			}
		}
		if _, err := crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) {
				crd, _ := obj.(*apiextensionsv1.CustomResourceDefinition)
				changed(obj, crd)
			},
			DeleteFunc: func(obj any) { changed(obj, nil) },
		}); err != nil {
			return err
		}
	}
	if h := s.cfg.customResources; h != nil {
		crds.moved = h.Moved
	}
	if err := crds.run(ctx); err != nil {
		return err
	}
	if h := s.cfg.customResources; h != nil {
		revisions, err := s.crdRevisions(ctx)
		if err != nil {
			return err
		}
		h.SetDefinitions(spaceDefinitions{crds: crds.indexer, served: crds, revisions: revisions})
	}
	return nil
}

// crdRevisions returns what reads, from the datastore, the revision of the
// last change of each space's CRD of a name as of a revision (by space):
// keys alone, with the in-process client that leaves nothing out, or a
// client of the server's own to an etcd cluster.
func (s *Server) crdRevisions(ctx context.Context) (func(ctx context.Context, name string, revision int64) (map[string]int64, error), error) {
	var kv clientv3.KV
	if c := s.cfg.Datastore.UsageClient(); c != nil {
		kv = c
	} else {
		c, err := s.cfg.Datastore.Client(ctx, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("a client of the datastore for the CRDs' revisions: %w", err)
		}
		go func() {
			<-ctx.Done()
			_ = c.Close()
		}()
		kv = c
	}
	prefix := storage.CRDPrefix() + "/"
	return func(ctx context.Context, name string, revision int64) (map[string]int64, error) {
		resp, err := kv.Get(spaces.WithoutKeptSpaces(ctx), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(revision))
		if err != nil {
			return nil, err
		}
		out := map[string]int64{}
		for _, kv := range resp.Kvs {
			space, n, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
			if ok && n == name {
				out[space] = kv.ModRevision
			}
		}
		return out, nil
	}, nil
}

// withDefinitionReads refuses a read by definition (/spaces/*~ID/...) of
// anything but a custom resource served per space: built-in resources,
// discovery and the like are read across spaces through the wildcard.
// It runs after authorization, so that only those who may read across
// spaces learn of it.
func withDefinitionReads(h http.Handler, perSpace bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		if spaces.DefinitionFrom(ctx) == "" {
			h.ServeHTTP(w, req)
			return
		}
		info, ok := request.RequestInfoFrom(ctx)
		switch {
		case !perSpace:
			spaces.WriteStatus(w, apierrors.NewBadRequest(
				"reads by definition (/spaces/*~ID/...) are served with CRDs per space (--crds-per-space) alone: read across spaces through /spaces/*/"))
		case !ok || !info.IsResourceRequest || builtin.IsBuiltInGroup(info.APIGroup):
			spaces.WriteStatus(w, apierrors.NewBadRequest(
				"a read by definition (/spaces/*~ID/...) is a list or watch of a custom resource: read the rest across spaces through /spaces/*/"))
		default:
			h.ServeHTTP(w, req)
		}
	})
}

// sweepUnused lets go of the definitions a change of CRDs left unused.
func (s *Server) sweepUnused(ctx context.Context, crds interface {
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}) error {
	h := s.cfg.customResources
	changed := make(chan struct{}, 1)
	note := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { note(obj) },
		DeleteFunc: note,
	}); err != nil {
		return err
	}
	go func() {
		tick, anyway := time.NewTicker(sweepEvery), time.NewTicker(sweepAnyway)
		defer tick.Stop()
		defer anyway.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-anyway.C:
			}
			if err := h.Sweep(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "letting go of unused custom resource definitions")
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return nil
}
