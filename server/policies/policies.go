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
// write arrives there while the space holds a binding, and stopped when
// its last binding goes (server/perspace), so that the thousands of spaces
// with no policy cost nothing.
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
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
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
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/server/perspace"
	"github.com/kubestellar/kubestellar/spaces"
)

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

// bindings are the kinds whose objects make a space's plug-ins.
var bindings = sets.New(
	admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings").GroupResource(),
	admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings").GroupResource())

// Admission is the admission plug-in. Start it before the server serves
// tenants' requests; until its cache of bindings has synced, requests
// wait (and are refused after a while, as Kubernetes' own plug-in's are).
type Admission struct {
	*admission.Handler
	authz    authorizer.Authorizer
	isServer func(user.Info) bool
	// clients make the plug-ins'; set by Start.
	clients perspace.Clients
	set     *perspace.Set[*spacePlugin]
}

var (
	_ admission.MutationInterface   = &Admission{}
	_ admission.ValidationInterface = &Admission{}
)

// New returns the plug-in. authz is the server's authorizer (a policy's
// CEL asks it about the request's user, in the request's space); isServer
// tells the server's own requests.
func New(types perspace.SpaceTypes, authz authorizer.Authorizer, isServer func(user.Info) bool) *Admission {
	a := &Admission{
		Handler:  admission.NewHandler(admission.Create, admission.Update, admission.Delete, admission.Connect),
		authz:    authz,
		isServer: isServer,
	}
	a.set = perspace.New("admission policy bindings", types, a.newSpacePlugin)
	return a
}

// Start watches the bindings of every space through the wildcard space.
// It returns at once; what it starts stops with ctx.
func (a *Admission) Start(ctx context.Context, clients perspace.Clients) error {
	wildcard, err := clients.Kube(spaces.Wildcard)
	if err != nil {
		return err
	}
	a.clients = clients
	a.set.Read = a.readBindings
	validatingBindings := wildcard.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	mutatingBindings := wildcard.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	a.set.Start(ctx,
		perspace.Triggers(a.set, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, validatingBindings.List, validatingBindings.Watch),
		perspace.Triggers(a.set, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}, mutatingBindings.List, mutatingBindings.Watch))
	return nil
}

// readBindings reads from storage whether a space holds a policy binding.
func (a *Admission) readBindings(ctx context.Context, space string) (bool, error) {
	kube, err := a.clients.Kube(space)
	if err != nil {
		return false, err
	}
	one := metav1.ListOptions{Limit: 1}
	v, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, one)
	if err != nil || len(v.Items) > 0 {
		return err == nil, err
	}
	m, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().List(ctx, one)
	if err != nil {
		return false, err
	}
	return len(m.Items) > 0, nil
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
	return p.admit(ctx, attrs, o)
}

// Validate runs the ValidatingAdmissionPolicies of the request's space.
// A binding's create, once valid, is expected (perspace.Set.Expect).
func (a *Admission) Validate(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	if attrs.GetOperation() == admission.Create && !attrs.IsDryRun() && bindings.Has(attrs.GetResource().GroupResource()) {
		a.set.Expect(spaces.SpaceOrRoot(ctx))
	}
	p, err := a.plugins(ctx, attrs)
	if err != nil || p == nil {
		return err
	}
	return p.validating.Validate(ctx, attrs, o)
}

// plugins returns the plug-ins of the request's space, or nil when no
// policy of that space could act on it.
func (a *Admission) plugins(ctx context.Context, attrs admission.Attributes) (*spacePlugin, error) {
	p, ok, err := a.set.ForRequest(ctx, a.isServer(attrs.GetUserInfo()))
	if err != nil || !ok {
		return nil, err
	}
	return p, nil
}

// spacePlugin is Kubernetes' plug-ins for one space.
type spacePlugin struct {
	validating *validating.Plugin
	mutating   *mutating.Plugin
	// started is when the plug-ins were made.
	started time.Time
}

// schemasWithin is how long after a space's plug-ins are made the mutating
// one may not yet have read the space's OpenAPI (it reads it at once, in
// the background, and then every 5 s).
const schemasWithin = 10 * time.Second

// admit runs the mutating policies. In a cluster the plug-in has read the
// schemas long before the first request; here it is made by the first
// request of a space with a binding, and a request that finds no schema
// for its kind while the plug-in is that new waits for the first read
// rather than failing with ServiceUnavailable.
func (p *spacePlugin) admit(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	err := p.mutating.Admit(ctx, attrs, o)
	for noSchemaYet(err) && time.Since(p.started) < schemasWithin {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
		err = p.mutating.Admit(ctx, attrs, o)
	}
	return err
}

// noSchemaYet tells the mutating plug-in's refusal of a kind whose schema
// it has not read.
func noSchemaYet(err error) bool {
	return apierrors.IsServiceUnavailable(err) && strings.Contains(err.Error(), "There can be a delay between when CustomResourceDefinitions are created")
}

// newSpacePlugin makes and starts the plug-ins of a space, to run until
// ctx ends.
func (a *Admission) newSpacePlugin(ctx context.Context, space string) (*spacePlugin, error) {
	kube, err := a.clients.Kube(space)
	if err != nil {
		return nil, err
	}
	dyn, err := a.clients.Dynamic(space)
	if err != nil {
		return nil, err
	}
	validatingPlugin, err := validating.NewPlugin(nil)
	if err != nil {
		return nil, err
	}
	mutatingPlugin, err := mutating.NewPlugin(nil)
	if err != nil {
		return nil, err
	}
	mutatingPlugin.SetEnabled(true)
	// One factory: the two share their informers of namespaces and
	// parameters. Their first lists are consistent: the plug-ins are made
	// by the first request after a binding, which the cache a list at
	// resource version 0 reads may not hold yet.
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(consistentLists))
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
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	klog.FromContext(ctx).V(2).Info("started a space's admission policies")
	return &spacePlugin{validating: validatingPlugin, mutating: mutatingPlugin, started: time.Now()}, nil
}

// consistentLists makes an informer's lists read the latest state, not
// the cache's (resource version 0, the reflector's first list); its
// watches go on from where their list was.
func consistentLists(o *metav1.ListOptions) {
	if !o.Watch && o.ResourceVersion == "0" {
		o.ResourceVersion = ""
	}
}

// Spaces returns the spaces whose plug-ins run, for tests.
func (a *Admission) Spaces() []string { return a.set.Spaces() }
