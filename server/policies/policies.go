// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package policies makes the admission policies of a space
// (ValidatingAdmissionPolicies and MutatingAdmissionPolicies, with their
// bindings) act on the writes in that space, and on nothing else.
//
// Each space whose policies act gets its own instances of Kubernetes'
// policy plug-ins (k8s.io/apiserver's validating and mutating admission
// policy), fed by informers that list and watch through a client of that
// space alone: its policies, its bindings, its namespaces (for
// namespaceSelector) and its parameter objects. A policy of one space
// cannot see, match, change or deny a write in another, because its
// plug-in never hears of one. The plug-ins are made for a space when a
// write arrives there while the space holds a binding (the server keeps
// one cache of every space's bindings, to know which do), and stopped when
// its last binding goes, so that the thousands of spaces with no policy
// cost nothing.
//
// Policies act in the root space, generic spaces and inventory spaces. In
// a workload description space they are workload, kept to be placed on
// edges (server/admission says so when they are created); mailboxes hold
// the copies. The server's own writes (its controllers' bookkeeping in
// every space) are not subject to a tenant's policies, so that no tenant
// can set the server's controllers retrying forever.
package policies

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// Clients gives clients of one space (or of the wildcard space).
type Clients interface {
	Kube(space string) (kubernetes.Interface, error)
	Dynamic(space string) (dynamic.Interface, error)
}

// SpaceTypes tells a space's type.
type SpaceTypes interface {
	SpaceType(name string) (string, bool, error)
}

// excluded are the kinds no policy sees: reviews, which ask and store
// nothing (as in Kubernetes).
var excluded = []schema.GroupResource{
	{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
}

// Admission is the admission plug-in. Start it before the server serves
// tenants' requests; until its cache of bindings has synced, requests
// wait (and are refused after readyWithin, as Kubernetes' own plug-in's
// are).
type Admission struct {
	*admission.Handler
	types    SpaceTypes
	authz    authorizer.Authorizer
	isServer func(user.Info) bool

	mu sync.Mutex
	// ctx is the server's, set by Start; clients make the plug-ins'.
	ctx     context.Context
	clients Clients
	// hasSynced is the bindings cache's, once started; synced is set once
	// it said so.
	hasSynced atomic.Pointer[func() bool]
	synced    atomic.Bool
	// bound counts each space's bindings.
	bound   map[string]int
	running map[string]*spacePlugin
}

var (
	_ admission.MutationInterface   = &Admission{}
	_ admission.ValidationInterface = &Admission{}
)

// New returns the plug-in. authz is the server's authorizer (a policy's
// CEL asks it about the request's user, in the request's space); isServer
// tells the server's own requests.
func New(types SpaceTypes, authz authorizer.Authorizer, isServer func(user.Info) bool) *Admission {
	a := &Admission{
		Handler:  admission.NewHandler(admission.Create, admission.Update, admission.Delete, admission.Connect),
		types:    types,
		authz:    authz,
		isServer: isServer,
		bound:    map[string]int{},
		running:  map[string]*spacePlugin{},
	}
	return a
}

// Start watches the bindings of every space through the wildcard space,
// and makes the plug-in ready once it has seen them all. It returns at
// once; what it starts stops with ctx.
func (a *Admission) Start(ctx context.Context, clients Clients) error {
	wildcard, err := clients.Kube(spaces.Wildcard)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.ctx, a.clients = ctx, clients
	a.mu.Unlock()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { a.count(obj, 1) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			a.count(obj, -1)
		},
	}
	opts := spaces.InformerOptions{Transform: keepSpace}
	validatingBindings := wildcard.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	_, validating := spaces.NewInformerWithOptions(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return validatingBindings.List(ctx, o)
		},
		WatchFuncWithContext: validatingBindings.Watch,
	}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, handler, opts)
	mutatingBindings := wildcard.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	_, mutating := spaces.NewInformerWithOptions(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return mutatingBindings.List(ctx, o)
		},
		WatchFuncWithContext: mutatingBindings.Watch,
	}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}, handler, opts)
	go validating.RunWithContext(ctx)
	go mutating.RunWithContext(ctx)
	hasSynced := func() bool { return validating.HasSynced() && mutating.HasSynced() }
	a.hasSynced.Store(&hasSynced)
	return nil
}

// keepSpace keeps of a binding what count reads: its space.
func keepSpace(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), ResourceVersion: m.GetResourceVersion(),
		Annotations: map[string]string{spaces.Annotation: m.GetAnnotations()[spaces.Annotation]},
	}}, nil
}

// count adds delta to the bindings of obj's space; a space left with none
// has its plug-in stopped.
func (a *Admission) count(obj any, delta int) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	space := m.GetAnnotations()[spaces.Annotation]
	if space == "" || spaces.IsMailboxName(space) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bound[space] += delta
	if a.bound[space] > 0 {
		return
	}
	delete(a.bound, space)
	if p := a.running[space]; p != nil {
		p.stop()
		delete(a.running, space)
	}
}

// Admit runs the MutatingAdmissionPolicies of the request's space.
func (a *Admission) Admit(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	if attrs.GetOperation() == admission.Delete {
		return nil // nothing to mutate
	}
	p, err := a.plugins(ctx, attrs)
	if err != nil || p == nil {
		return err
	}
	return p.mutating.Admit(ctx, attrs, o)
}

// Validate runs the ValidatingAdmissionPolicies of the request's space.
func (a *Admission) Validate(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	p, err := a.plugins(ctx, attrs)
	if err != nil || p == nil {
		return err
	}
	return p.validating.Validate(ctx, attrs, o)
}

// plugins returns the plug-ins of the request's space, or nil when no
// policy of that space could act on it.
func (a *Admission) plugins(ctx context.Context, attrs admission.Attributes) (*spacePlugin, error) {
	if a.isServer(attrs.GetUserInfo()) {
		return nil, nil
	}
	space := spaces.SpaceOrRoot(ctx)
	if spaces.IsMailboxName(space) {
		return nil, nil
	}
	if !a.waitForSync(ctx) {
		return nil, admission.NewForbidden(attrs, fmt.Errorf("not yet ready to handle request: the server has not yet read every space's admission policy bindings"))
	}
	return a.pluginFor(ctx, space)
}

// waitForSync waits, for as long as admission plug-ins wait to be ready,
// until the cache of bindings has synced.
func (a *Admission) waitForSync(ctx context.Context) bool {
	if a.synced.Load() {
		return true
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, readyWithin, true, func(context.Context) (bool, error) {
		f := a.hasSynced.Load()
		return f != nil && (*f)(), nil
	})
	if err != nil {
		return false
	}
	a.synced.Store(true)
	return true
}

// readyWithin is how long a request waits for the cache of bindings, as
// long as k8s.io/apiserver's admission plug-ins wait to be ready.
const readyWithin = 10 * time.Second

// pluginFor returns the plug-ins of a space whose policies act and that
// holds a binding (nil for any other), making them on first use.
func (a *Admission) pluginFor(ctx context.Context, space string) (*spacePlugin, error) {
	a.mu.Lock()
	bound := a.bound[space] > 0
	p := a.running[space]
	a.mu.Unlock()
	if !bound {
		return nil, nil
	}
	if p != nil {
		return p, nil
	}
	if space != spaces.Root {
		typ, found, err := a.types.SpaceType(space)
		if err != nil {
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("space %q: %v", space, err))
		}
		if !found || typ == tenancyv1alpha1.SpaceTypeWDS || typ == tenancyv1alpha1.SpaceTypeMailbox {
			return nil, nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.running[space]; p != nil {
		return p, nil
	}
	if a.bound[space] == 0 {
		return nil, nil
	}
	p, err := a.newSpacePlugin(space)
	if err != nil {
		klog.FromContext(ctx).Error(err, "starting a space's admission policies", "space", space)
		return nil, apierrors.NewInternalError(fmt.Errorf("starting the admission policies of space %q: %w", space, err))
	}
	a.running[space] = p
	return p, nil
}

// spacePlugin is Kubernetes' plug-ins for one space, and how to stop them.
type spacePlugin struct {
	validating *validating.Plugin
	mutating   *mutating.Plugin
	stop       context.CancelFunc
}

// newSpacePlugin makes and starts the plug-ins of a space. Called with
// a.mu held.
func (a *Admission) newSpacePlugin(space string) (*spacePlugin, error) {
	kube, err := a.clients.Kube(space)
	if err != nil {
		return nil, err
	}
	dyn, err := a.clients.Dynamic(space)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(a.ctx)
	validatingPlugin, err := validating.NewPlugin(nil)
	if err != nil {
		cancel()
		return nil, err
	}
	mutatingPlugin, err := mutating.NewPlugin(nil)
	if err != nil {
		cancel()
		return nil, err
	}
	mutatingPlugin.SetEnabled(true)
	// One factory: the two share their informers of namespaces and
	// parameters.
	factory := informers.NewSharedInformerFactory(kube, 0)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	for _, plugin := range []interface {
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetExternalKubeClientSet(kubernetes.Interface)
		SetDynamicClient(dynamic.Interface)
		SetRESTMapper(meta.RESTMapper)
		SetDrainedNotification(<-chan struct{})
		SetUnconditionalAuthorizer(authorizer.UnconditionalAuthorizer)
		SetExcludedAdmissionResources([]schema.GroupResource)
		ValidateInitialization() error
	}{validatingPlugin, mutatingPlugin} {
		plugin.SetExternalKubeInformerFactory(factory)
		plugin.SetExternalKubeClientSet(kube)
		plugin.SetDynamicClient(dyn)
		plugin.SetRESTMapper(mapper)
		plugin.SetDrainedNotification(ctx.Done())
		plugin.SetUnconditionalAuthorizer(a.authz)
		plugin.SetExcludedAdmissionResources(excluded)
		if err := plugin.ValidateInitialization(); err != nil {
			cancel()
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	klog.FromContext(ctx).V(2).Info("started a space's admission policies", "space", space)
	return &spacePlugin{validating: validatingPlugin, mutating: mutatingPlugin, stop: cancel}, nil
}

// Spaces returns the spaces whose plug-ins run, for tests and metrics.
func (a *Admission) Spaces() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.running))
	for space := range a.running {
		out = append(out, space)
	}
	return out
}
