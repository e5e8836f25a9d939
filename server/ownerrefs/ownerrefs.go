// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ownerrefs guards ownerReferences in every space with
// Kubernetes' OwnerReferencesPermissionEnforcement admission plug-in
// (k8s.io/kubernetes/plugin/pkg/admission/gc): changing an object's
// ownerReferences takes the right to delete it, and setting
// blockOwnerDeletion takes the right to update the owner's finalizers.
//
// The garbage collector (spaces/garbagecollector) deletes, with the
// server's rights, an object whose owners are gone. Without this check a
// user of a space who may patch an object but not delete it could have
// it deleted by pointing its ownerReferences at nothing, and one who may
// create an object could hold up another's deletion in the foreground.
// A cluster offers the plug-in as an option; a space, whose users a
// tenant admits, has it always.
//
// Each space gets its own instance (a space's owners may be of its own
// CRDs, which only its discovery maps), made when a request first changes
// ownerReferences there and kept for the most recently used spaces.
package ownerrefs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/kubernetes/plugin/pkg/admission/gc"
	"k8s.io/utils/lru"

	"github.com/kubestellar/kubestellar/server/perspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// cachedSpaces is how many spaces' plug-ins are kept.
const cachedSpaces = 256

// Admission is the admission plug-in.
type Admission struct {
	*admission.Handler
	authz    authorizer.Authorizer
	isServer func(user.Info) bool

	mu      sync.Mutex
	clients perspace.Clients
	plugins *lru.Cache
}

var _ admission.ValidationInterface = &Admission{}

// New returns the plug-in; authz is the server's authorizer (it answers
// in the request's space); isServer tells the server's own requests,
// which it does not check.
func New(authz authorizer.Authorizer, isServer func(user.Info) bool) *Admission {
	return &Admission{Handler: admission.NewHandler(admission.Create, admission.Update), authz: authz, isServer: isServer,
		plugins: lru.New(cachedSpaces)}
}

// Start gives the plug-in its clients; until then a write that changes
// ownerReferences is refused as ServiceUnavailable (the server is starting).
func (a *Admission) Start(clients perspace.Clients) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clients = clients
}

// Validate checks a write that changes ownerReferences against the
// user's rights in the request's space.
func (a *Admission) Validate(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	if a.isServer(attrs.GetUserInfo()) || !changesOwners(attrs) {
		return nil
	}
	p, err := a.forSpace(spaces.SpaceOrRoot(ctx))
	if err != nil {
		return err
	}
	return p.Validate(ctx, attrs, o)
}

// changesOwners reports whether a write sets or changes ownerReferences:
// the plug-in's own first test, made here so that the writes that do not
// make no space's plug-in.
func changesOwners(attrs admission.Attributes) bool {
	obj, err := meta.Accessor(attrs.GetObject())
	if err != nil {
		return false
	}
	if attrs.GetOperation() == admission.Create || attrs.GetOldObject() == nil {
		return len(obj.GetOwnerReferences()) > 0
	}
	old, err := meta.Accessor(attrs.GetOldObject())
	if err != nil {
		return true
	}
	return !equality.Semantic.DeepEqual(obj.GetOwnerReferences(), old.GetOwnerReferences())
}

// forSpace returns the plug-in of a space, made on first use.
func (a *Admission) forSpace(space string) (admission.ValidationInterface, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.clients == nil {
		return nil, apierrors.NewServiceUnavailable("the server is starting: ownerReferences cannot be checked yet")
	}
	if p, ok := a.plugins.Get(space); ok {
		return p.(admission.ValidationInterface), nil
	}
	kube, err := a.clients.Kube(space)
	if err != nil {
		return nil, err
	}
	plugins := admission.NewPlugins()
	gc.Register(plugins)
	mapper := &resetting{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}
	p, err := plugins.InitPlugin(gc.PluginName, nil, initializer.New(nil, nil, nil, a.authz, nil, nil, nil, mapper))
	if err != nil {
		return nil, err
	}
	v, ok := p.(admission.ValidationInterface)
	if !ok {
		return nil, fmt.Errorf("admission plug-in %s validates nothing", gc.PluginName)
	}
	a.plugins.Add(space, v)
	return v, nil
}

// resetting reads the space's discovery again when asked for a kind it
// does not know (a CRD made since), at most every rediscoverEvery.
type resetting struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu        sync.Mutex
	lastReset time.Time
}

// rediscoverEvery bounds how often a space's discovery is read again.
const rediscoverEvery = 5 * time.Second

var _ meta.RESTMapper = &resetting{}

func (r *resetting) retry(err error) bool {
	if !meta.IsNoMatchError(err) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastReset) < rediscoverEvery {
		return false
	}
	r.lastReset = time.Now()
	r.mapper.Reset()
	return true
}

func (r *resetting) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	gvk, err := r.mapper.KindFor(resource)
	if r.retry(err) {
		return r.mapper.KindFor(resource)
	}
	return gvk, err
}

func (r *resetting) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	gvks, err := r.mapper.KindsFor(resource)
	if r.retry(err) {
		return r.mapper.KindsFor(resource)
	}
	return gvks, err
}

func (r *resetting) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	gvr, err := r.mapper.ResourceFor(input)
	if r.retry(err) {
		return r.mapper.ResourceFor(input)
	}
	return gvr, err
}

func (r *resetting) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	gvrs, err := r.mapper.ResourcesFor(input)
	if r.retry(err) {
		return r.mapper.ResourcesFor(input)
	}
	return gvrs, err
}

func (r *resetting) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := r.mapper.RESTMapping(gk, versions...)
	if r.retry(err) {
		return r.mapper.RESTMapping(gk, versions...)
	}
	return m, err
}

func (r *resetting) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	ms, err := r.mapper.RESTMappings(gk, versions...)
	if r.retry(err) {
		return r.mapper.RESTMappings(gk, versions...)
	}
	return ms, err
}

func (r *resetting) ResourceSingularizer(resource string) (string, error) {
	return r.mapper.ResourceSingularizer(resource)
}
