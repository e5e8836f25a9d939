// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package perspace keeps a thing per space (Kubernetes admission plug-ins
// fed by that space alone: its admission policies, its ResourceQuotas) for
// only those spaces that need one.
//
// A space needs one while it holds at least one object of the kinds that
// call for it, its triggers (policy bindings, ResourceQuotas). One slim
// cache of the triggers of every space, read through the wildcard space,
// counts them; a space's thing is made on the first request that asks for
// it and stopped when the space's last trigger goes, so that the thousands
// of spaces with none cost nothing. Triggers act in the root space,
// generic spaces and inventory spaces: in a workload description space
// they are workload for edges, and mailboxes hold copies.
package perspace

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// SpaceTypes tells a space's type.
type SpaceTypes interface {
	SpaceType(name string) (string, bool, error)
}

// Set is the things of the spaces that need one.
type Set[T any] struct {
	// triggers names the triggers in messages ("admission policy
	// bindings").
	triggers string
	types    SpaceTypes
	make     func(ctx context.Context, space string) (T, error)

	// Eager, set before Start, makes a space's thing as soon as the space
	// holds a trigger, not on the first request that asks: for things that
	// work on their own (a quota's status).
	Eager bool

	hasSynced atomic.Pointer[func() bool]
	synced    atomic.Bool

	mu sync.Mutex
	// ctx is the server's, set by Start: each thing's is a child.
	ctx     context.Context
	bound   map[string]int
	running map[string]*entry[T]
	// expected are the spaces where a trigger was just admitted (Expect),
	// and when, until the triggers' watch brings it; read are those where
	// Read found triggers the watch has not brought yet.
	expected map[string]time.Time
	read     map[string]bool

	// Read, set before Start, reads from storage whether a space holds
	// triggers; Expect needs it.
	Read func(ctx context.Context, space string) (bool, error)
}

type entry[T any] struct {
	value T
	stop  context.CancelFunc
}

// New returns a set. make makes a space's thing, to run until its context
// ends; triggers names the kinds that call for it, for messages.
func New[T any](triggers string, types SpaceTypes, make func(ctx context.Context, space string) (T, error)) *Set[T] {
	return &Set[T]{triggers: triggers, types: types, make: make, bound: map[string]int{}, running: map[string]*entry[T]{},
		expected: map[string]time.Time{}, read: map[string]bool{}}
}

// Clients gives clients of one space (or of the wildcard space).
type Clients interface {
	Kube(space string) (kubernetes.Interface, error)
	Dynamic(space string) (dynamic.Interface, error)
	Metadata(space string) (metadata.Interface, error)
}

// Triggers makes the cache of one kind of trigger across every space, of
// type objType, listed and watched by list and watch (a client of the
// wildcard space's); Start runs it.
func Triggers[T any, L runtime.Object](s *Set[T], objType runtime.Object,
	list func(context.Context, metav1.ListOptions) (L, error), watch func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.Controller {
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) },
		WatchFuncWithContext: watch,
	}
	_, c := spaces.NewInformerWithOptions(lw, objType, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.count(obj, 1) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			s.count(obj, -1)
		},
	}, spaces.InformerOptions{Transform: keepSpace})
	return c
}

// Start runs the caches of triggers until ctx ends; For waits for them.
func (s *Set[T]) Start(ctx context.Context, caches ...cache.Controller) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	for _, c := range caches {
		go c.RunWithContext(ctx)
	}
	hasSynced := func() bool {
		for _, c := range caches {
			if !c.HasSynced() {
				return false
			}
		}
		return true
	}
	s.hasSynced.Store(&hasSynced)
}

// keepSpace keeps of a trigger what count reads: its space.
func keepSpace(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion(),
		Annotations: map[string]string{spaces.Annotation: m.GetAnnotations()[spaces.Annotation]},
	}}, nil
}

// count adds delta to the triggers of obj's space; a space left with none
// has its thing stopped.
func (s *Set[T]) count(obj any, delta int) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	space := m.GetAnnotations()[spaces.Annotation]
	if space == "" || spaces.IsMailboxName(space) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bound[space] += delta
	if delta > 0 {
		delete(s.expected, space)
		delete(s.read, space)
	}
	if s.holds(space) {
		if s.Eager && s.running[space] == nil {
			if err := s.start(space); err != nil {
				klog.FromContext(s.ctx).Error(err, "starting what a space's triggers call for", "space", space, "triggers", s.triggers)
			}
		}
		return
	}
	delete(s.bound, space)
	if e := s.running[space]; e != nil {
		e.stop()
		delete(s.running, space)
	}
}

// holds says whether a space holds triggers, as far as the watch or a
// read tells. Called with s.mu held.
func (s *Set[T]) holds(space string) bool { return s.bound[space] > 0 || s.read[space] }

// expectWithin is how long after a trigger is admitted in a space (Expect)
// its requests read the space's triggers, unless the triggers' watch brings
// it first: it bounds the reads of a space whose trigger's write failed.
const expectWithin = time.Minute

// Expect says that a trigger of space is being admitted. Until the
// triggers' watch brings it (or expectWithin passes), each request of the
// space reads the space's triggers from storage (Read), so that a write
// made after the trigger's, through this server, is under it however late
// the watch: what decides is the datastore, not a time. On another server
// of the datastore the trigger acts once its watch brings it, as
// Kubernetes' plug-ins' informers do.
func (s *Set[T]) Expect(space string) {
	if space == "" || spaces.IsMailboxName(space) || s.Read == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holds(space) {
		s.expected[space] = time.Now()
		klog.FromContext(s.ctx).V(2).Info("expecting a trigger", "space", space, "triggers", s.triggers)
	}
}

// boundOrExpected says whether a space holds triggers, reading them when
// one is expected there, and returns its running thing, if any.
func (s *Set[T]) boundOrExpected(ctx context.Context, space string) (bool, *entry[T], error) {
	s.mu.Lock()
	holds, e := s.holds(space), s.running[space]
	since, expecting := s.expected[space]
	if !holds && expecting && time.Since(since) > expectWithin {
		delete(s.expected, space) // it did not come: not written
		expecting = false
		klog.FromContext(ctx).V(2).Info("an expected trigger did not come", "space", space, "triggers", s.triggers, "within", expectWithin)
	}
	s.mu.Unlock()
	if holds || !expecting {
		return holds, e, nil
	}
	found, err := s.Read(ctx, space)
	if err != nil {
		// Not knowing whether a policy binds the request is no reason to
		// let it through unchecked.
		return false, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("reading the %s of space %q: %v", s.triggers, space, err))
	}
	if !found {
		return false, nil, nil // not yet written: a request before it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound[space] == 0 {
		s.read[space] = true
	}
	delete(s.expected, space)
	klog.FromContext(ctx).V(2).Info("read an expected trigger before its watch brought it", "space", space, "triggers", s.triggers, "after", time.Since(since))
	return true, s.running[space], nil
}

// readyWithin is how long a request waits for the caches of triggers, as
// long as k8s.io/apiserver's admission plug-ins wait to be ready.
const readyWithin = 10 * time.Second

// ForRequest returns the thing of the space of an admission request (in
// ctx), as For does, except for the server's own writes (fromServer) and
// for mailboxes, which hold copies: false for those.
func (s *Set[T]) ForRequest(ctx context.Context, fromServer bool) (value T, ok bool, err error) {
	space := spaces.SpaceOrRoot(ctx)
	if fromServer || spaces.IsMailboxName(space) {
		return value, false, nil
	}
	return s.For(ctx, space)
}

// For returns the thing of a space, making it on first use; ok is false
// for a space that holds no trigger, or whose triggers do not act. Until
// the caches of triggers have synced it waits, and then fails with
// ServiceUnavailable.
func (s *Set[T]) For(ctx context.Context, space string) (value T, ok bool, err error) {
	if !s.waitForSync(ctx) {
		return value, false, apierrors.NewServiceUnavailable(fmt.Sprintf("the server has not yet read every space's %s", s.triggers))
	}
	bound, e, err := s.boundOrExpected(ctx, space)
	if err != nil || !bound {
		return value, false, err
	}
	if e != nil {
		return e.value, true, nil
	}
	acts, err := s.acts(space)
	if err != nil || !acts {
		return value, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holds(space) {
		return value, false, nil
	}
	if s.running[space] == nil {
		if err := s.start(space); err != nil {
			klog.FromContext(ctx).Error(err, "starting what a space's triggers call for", "space", space, "triggers", s.triggers)
			return value, false, apierrors.NewInternalError(fmt.Errorf("starting what the %s of space %q call for: %w", s.triggers, space, err))
		}
	}
	if e := s.running[space]; e != nil {
		return e.value, true, nil
	}
	return value, false, nil
}

// acts reports whether the triggers of a space act there: not in a
// workload description space, a mailbox, or a space unknown.
func (s *Set[T]) acts(space string) (bool, error) {
	if space == spaces.Root {
		return true, nil
	}
	typ, found, err := s.types.SpaceType(space)
	if err != nil {
		return false, apierrors.NewServiceUnavailable(fmt.Sprintf("space %q: %v", space, err))
	}
	return found && typ != tenancyv1alpha1.SpaceTypeWDS && typ != tenancyv1alpha1.SpaceTypeMailbox, nil
}

// start makes the thing of a space whose triggers act. Called with s.mu
// held.
func (s *Set[T]) start(space string) error {
	if s.Eager {
		// From count: For has not looked at the space's type.
		if acts, err := s.acts(space); err != nil || !acts {
			return err
		}
	}
	ctx, cancel := context.WithCancel(klog.NewContext(s.ctx, klog.FromContext(s.ctx).WithValues("space", space)))
	v, err := s.make(ctx, space)
	if err != nil {
		cancel()
		return err
	}
	s.running[space] = &entry[T]{value: v, stop: cancel}
	return nil
}

// waitForSync waits, for at most readyWithin, until the caches of triggers
// have synced.
func (s *Set[T]) waitForSync(ctx context.Context) bool {
	if s.synced.Load() {
		return true
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, readyWithin, true, func(context.Context) (bool, error) {
		f := s.hasSynced.Load()
		return f != nil && (*f)(), nil
	})
	if err != nil {
		return false
	}
	s.synced.Store(true)
	return true
}

// Spaces returns the spaces whose things run.
func (s *Set[T]) Spaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.running))
	for space := range s.running {
		out = append(out, space)
	}
	return out
}
