// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// Resources the dashboard watches, across every space.
var (
	SyncTargetsGVR    = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")
	PlacementsGVR     = edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements")
	SlicesGVR         = edgev2alpha1.SchemeGroupVersion.WithResource("singleplacementslices")
	CombinedStatusGVR = edgev2alpha1.SchemeGroupVersion.WithResource("combinedstatuses")
	SyncerConfigsGVR  = edgev2alpha1.SchemeGroupVersion.WithResource("syncerconfigs")
	SpacesGVR         = tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces")
)

// Store keeps, from reflectors over every space, the SyncTargets,
// EdgePlacements, SinglePlacementSlices and Spaces reduced to what the
// views show, and the mailbox copies (of the resources the mailboxes'
// SyncerConfigs name) reduced to what the translator and the syncer say of
// them, and tells watchers when anything they show may have changed. One
// Store serves every session: sessions see a filtered view of it.
type Store struct {
	mu         sync.RWMutex
	edges      map[string]edgeRecord
	placements map[string]Placement
	slices     map[string][]Destination
	spaces     map[string]SpaceRow
	copies     map[storedKey]storedRecord
	copyIndex  copyIndex
	// copyReaders read the copies of the resources SyncerConfigs name
	// (copyreaders.go), once run has begun (runCtx, dyn).
	copyReaders map[schema.GroupResource]*copiesOf
	runCtx      context.Context
	dyn         dynamic.Interface
	// defs, when set, have custom resources' copies read by definition.
	defs   Definitions
	synced bool
	// changed is closed (and replaced) on every change.
	changed chan struct{}
	// silent is the set of edges shown silent at the last tick.
	silent map[string]bool
	// local, when set, lists and watches the copies of the resources it
	// serves in the server's process (see ReadInProcess).
	local LocalReader
}

// LocalReader lists and watches the objects of some resources in a space
// in the server's process, as unstructured objects; false for a resource
// it does not serve.
type LocalReader interface {
	ListerWatcher(gvr schema.GroupVersionResource, space, labelSelector string) (cache.ListerWatcher, bool)
}

// convertingReader is a LocalReader that offers each object, typed, to
// convert before making it unstructured (the server's
// ListerWatcherConverting): the dashboard then reads a copy's metadata
// alone (slimTyped).
type convertingReader interface {
	ListerWatcherConverting(gvr schema.GroupVersionResource, space, labelSelector string,
		convert func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool)) (cache.ListerWatcher, bool)
}

// ReadInProcess makes the store watch copies through r where r serves
// their resource: with every object on every edge the copies are most of
// the server's objects, and their events cost a watch through the API a
// JSON encoding and decoding each. Call it before Start.
func (s *Store) ReadInProcess(r LocalReader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.local = r
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{edges: map[string]edgeRecord{}, placements: map[string]Placement{}, slices: map[string][]Destination{},
		spaces: map[string]SpaceRow{}, copies: map[storedKey]storedRecord{}, copyIndex: copyIndex{}, copyReaders: map[schema.GroupResource]*copiesOf{},
		changed: make(chan struct{}), silent: map[string]bool{}}
}

// Changed returns a channel closed at the next change.
func (s *Store) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Synced tells whether every reflector has listed once.
func (s *Store) Synced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced
}

// Start runs the reflectors with loopback (a privileged client of the root
// space) until ctx ends, and the ticker that notices edges falling silent.
// It does not wait for them to sync.
func (s *Store) Start(ctx context.Context, loopback *rest.Config, tick time.Duration) error {
	dyn, err := dynamic.NewForConfig(spaces.ScopedConfig(loopback))
	if err != nil {
		return err
	}
	// The dashboard starts beside the server's other post-start hooks:
	// wait until kubestellar's CRDs are served rather than have the
	// reflectors fail and log meanwhile.
	go func() {
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			for _, gvr := range []schema.GroupVersionResource{SyncTargetsGVR, PlacementsGVR, SlicesGVR, SpacesGVR, SyncerConfigsGVR} {
				if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
					return false, nil
				}
			}
			return true, nil
		})
		if err == nil {
			s.run(ctx, dyn, tick)
		}
	}()
	return nil
}

// setFunc records an object of a space and tells whether anything shown
// changed; delFunc forgets it.
type (
	setFunc func(space string, u *unstructured.Unstructured) bool
	delFunc func(space string, u *unstructured.Unstructured)
)

// inform runs a reflector of gvr in space (the wildcard space: all) until
// ctx ends, into a store that keeps the dashboard's records alone.
func (s *Store) inform(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, space string,
	set setFunc, del delFunc) *recordStore {
	store := newRecordStore(ctx, s, set, del)
	r := cache.NewReflectorWithOptions(s.listWatch(dyn, gvr, space, ""), &unstructured.Unstructured{}, store,
		cache.ReflectorOptions{Name: "dashboard " + gvr.String()})
	go r.RunWithContext(ctx)
	return store
}

// listWatch lists and watches gvr in space (the wildcard space: all),
// narrowed by selector.
func (s *Store) listWatch(dyn dynamic.Interface, gvr schema.GroupVersionResource, space, selector string) *cache.ListWatch {
	in := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, space) }
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return dyn.Resource(gvr).List(in(ctx), opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return dyn.Resource(gvr).Watch(in(ctx), opts)
		},
	}
}

func (s *Store) run(ctx context.Context, dyn dynamic.Interface, tick time.Duration) {
	// Copies: read as SyncerConfigs name their resources (setSyncerConfig).
	s.mu.Lock()
	s.runCtx, s.dyn = ctx, dyn
	s.rereadAll()
	s.mu.Unlock()
	stores := []*recordStore{
		s.inform(ctx, dyn, SyncTargetsGVR, spaces.Wildcard, s.setEdge, s.deleteEdge),
		s.inform(ctx, dyn, PlacementsGVR, spaces.Wildcard, s.setPlacement, s.deletePlacement),
		s.inform(ctx, dyn, SlicesGVR, spaces.Wildcard, s.setSlice, s.deleteSlice),
		s.inform(ctx, dyn, SpacesGVR, spaces.Root, s.setSpace, s.deleteSpace),
		s.inform(ctx, dyn, SyncerConfigsGVR, spaces.Wildcard, s.setSyncerConfig, s.deleteSyncerConfig),
	}
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), func() bool {
			for _, c := range stores {
				if !c.HasSynced() {
					return false
				}
			}
			return true
		}) {
			return
		}
		s.mu.Lock()
		s.synced = true
		s.notifyLocked()
		s.mu.Unlock()
		klog.FromContext(ctx).V(2).Info("dashboard caches synced")
	}()
	go s.tickSilence(ctx, tick)
}

// apply reduces a reflector's object and records it, or forgets it when it
// was deleted.
func (s *Store) apply(ctx context.Context, o any, deleted bool, set setFunc, del delFunc) {
	if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	space := annotation(u, spaces.Annotation)
	if space == "" {
		space = spaces.Root
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted {
		del(space, u)
	} else if !set(space, u) {
		return
	}
	s.notifyLocked()
	klog.FromContext(ctx).V(5).Info("dashboard object changed", "space", space, "kind", u.GetKind(), "name", u.GetName(), "deleted", deleted)
}

func convert[T any](u *unstructured.Unstructured) (*T, bool) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, false
	}
	return &out, true
}

func (s *Store) setEdge(space string, u *unstructured.Unstructured) bool {
	if st, ok := convert[edgev2alpha1.SyncTarget](u); ok {
		s.edges[key(space, st.Name)] = edgeOf(space, st)
	}
	return true
}
func (s *Store) deleteEdge(space string, u *unstructured.Unstructured) {
	delete(s.edges, key(space, u.GetName()))
}

func (s *Store) setPlacement(space string, u *unstructured.Unstructured) bool {
	if p, ok := convert[edgev2alpha1.EdgePlacement](u); ok {
		s.placements[key(space, p.Name)] = placementOf(space, p)
	}
	return true
}
func (s *Store) deletePlacement(space string, u *unstructured.Unstructured) {
	delete(s.placements, key(space, u.GetName()))
}

func (s *Store) setSlice(space string, u *unstructured.Unstructured) bool {
	sps, ok := convert[edgev2alpha1.SinglePlacementSlice](u)
	if !ok {
		return false
	}
	dests := make([]Destination, 0, len(sps.Destinations))
	for _, d := range sps.Destinations {
		dests = append(dests, Destination{Space: d.Space, SyncTarget: d.SyncTargetName, Location: d.LocationName, mailbox: mailboxOf(d)})
	}
	s.slices[key(space, sps.Name)] = dests
	return true
}
func (s *Store) deleteSlice(space string, u *unstructured.Unstructured) {
	delete(s.slices, key(space, u.GetName()))
}

func (s *Store) setSpace(_ string, u *unstructured.Unstructured) bool {
	if sp, ok := convert[tenancyv1alpha1.Space](u); ok {
		s.spaces[sp.Name] = spaceOf(sp)
	}
	return true
}
func (s *Store) deleteSpace(_ string, u *unstructured.Unstructured) { delete(s.spaces, u.GetName()) }

// setSyncerConfig has the copies of each resource a mailbox's
// SyncerConfig names read, and those of the resources it no longer names
// not. Nothing shown changes with it.
func (s *Store) setSyncerConfig(mailbox string, u *unstructured.Unstructured) bool {
	cfg, ok := convert[edgev2alpha1.SyncerConfig](u)
	if !ok || s.runCtx == nil {
		return false
	}
	named := map[schema.GroupResource]bool{}
	for _, r := range cfg.Spec.Resources {
		gvr, ok := copyResource(r)
		if !ok || named[gvr.GroupResource()] {
			continue
		}
		named[gvr.GroupResource()] = true
		s.readCopies(gvr, mailbox)
	}
	for gr := range s.copyReaders {
		if !named[gr] {
			s.unreadCopies(gr, mailbox)
		}
	}
	return false
}

// deleteSyncerConfig stops reading the copies of its mailbox.
func (s *Store) deleteSyncerConfig(mailbox string, _ *unstructured.Unstructured) {
	for gr := range s.copyReaders {
		s.unreadCopies(gr, mailbox)
	}
}

// setCopy records a copy; only what the views show counts as a change (the
// syncer writes the edge's status into copies often).
func (s *Store) setCopy(k copyKey, r copyRecord) bool {
	sk := k.stored()
	if stored, had := s.copies[sk]; had {
		old := stored.record()
		if old.equal(r) {
			return false
		}
		s.copyIndex.add(k, old, -1)
	}
	s.copies[sk] = r.stored()
	s.copyIndex.add(k, r, 1)
	return true
}

// deleteCopy forgets a copy, telling whether there was one.
func (s *Store) deleteCopy(k copyKey) bool {
	sk := k.stored()
	old, had := s.copies[sk]
	if had {
		s.copyIndex.add(k, old.record(), -1)
		delete(s.copies, sk)
	}
	return had
}

// copyAt returns a copy's record.
func (s *Store) copyAt(k copyKey) (copyRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.copies[k.stored()]
	if !ok {
		return copyRecord{}, false
	}
	return r.record(), true
}

// tickSilence notices edges that fall silent (or speak again) with no
// object changing, so that the views show it within the heartbeat timeout
// and a tick.
func (s *Store) tickSilence(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.checkSilence(now)
			s.mu.Lock()
			s.rereadPending()
			s.mu.Unlock()
		}
	}
}

func (s *Store) checkSilence(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	silent := map[string]bool{}
	for k, e := range s.edges {
		if e.at(now).State == StateSilent {
			silent[k] = true
		}
	}
	if len(silent) == len(s.silent) {
		same := true
		for k := range silent {
			if !s.silent[k] {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	s.silent = silent
	s.notifyLocked()
}

// snapshot is a consistent copy of what a view reads, already narrowed to
// what visible allows.
type snapshot struct {
	edges      []edgeRecord
	edgeIndex  map[string]edgeRecord
	placements []Placement
	slices     map[string][]Destination
	// copies are the tallies of the visible placements' copies.
	copies copyIndex
	spaces []SpaceRow
}

// Visible tells whether the viewer may list resource in space.
type Visible func(space string, gvr schema.GroupVersionResource) bool

func (s *Store) snapshot(visible Visible) snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out snapshot
	out.edgeIndex = make(map[string]edgeRecord, len(s.edges))
	edgeCount, placementCount := map[string]int{}, map[string]int{}
	for k, e := range s.edges {
		if visible(e.Space, SyncTargetsGVR) {
			out.edges = append(out.edges, e)
			out.edgeIndex[k] = e
			edgeCount[e.Space]++
		}
	}
	out.slices = map[string][]Destination{}
	out.copies = copyIndex{}
	for k, p := range s.placements {
		if visible(p.Space, PlacementsGVR) {
			out.placements = append(out.placements, p)
			out.slices[k] = s.slices[k]
			if byMailbox := s.copyIndex[k]; byMailbox != nil {
				clone := make(map[string]*copyTally, len(byMailbox))
				for mb, t := range byMailbox {
					clone[mb] = &copyTally{present: t.present, failed: maps.Clone(t.failed)}
				}
				out.copies[k] = clone
			}
			placementCount[p.Space]++
		}
	}
	seeAll := visible(spaces.Root, SpacesGVR)
	for _, sp := range s.spaces {
		if seeAll || edgeCount[sp.Name] > 0 || placementCount[sp.Name] > 0 || visible(sp.Name, SpacesGVR) {
			sp.SyncTargets, sp.Placements = edgeCount[sp.Name], placementCount[sp.Name]
			out.spaces = append(out.spaces, sp)
		}
	}
	return out
}
