// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package policies

import (
	"context"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	validatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/validatingadmissionpolicystatus"

	"github.com/kubestellar/kubestellar/server/openapi"
	"github.com/kubestellar/kubestellar/server/perspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// TypeChecks writes the status.typeChecking of the
// ValidatingAdmissionPolicies of every space where policies act, as
// kube-controller-manager's validatingadmissionpolicy-status controller
// does in a cluster: each such space gets its own instance of that
// controller, reading the space's policies and the space's own schemas
// (the built-in kinds' from the server's definitions, its CRDs' from its
// own OpenAPI), for as long as it holds a policy.
type TypeChecks struct {
	clients perspace.Clients
	set     *perspace.Set[struct{}]
	// builtins resolves the schemas of the built-in kinds; built once,
	// on first need, and shared by every space.
	builtins func() *resolver.DefinitionsSchemaResolver
}

// NewTypeChecks returns the controllers' set; Start starts it.
func NewTypeChecks(types perspace.SpaceTypes) *TypeChecks {
	t := &TypeChecks{builtins: sync.OnceValue(func() *resolver.DefinitionsSchemaResolver {
		return resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, clientgoscheme.Scheme, apiextensionsscheme.Scheme)
	})}
	t.set = perspace.New("ValidatingAdmissionPolicies", types, t.newSpaceTypeCheck)
	t.set.Eager = true // a policy's status is written whether or not anyone writes
	return t
}

// Start watches the ValidatingAdmissionPolicies of every space through
// the wildcard space. It returns at once; what it starts stops with ctx.
func (t *TypeChecks) Start(ctx context.Context, clients perspace.Clients) error {
	wildcard, err := clients.Kube(spaces.Wildcard)
	if err != nil {
		return err
	}
	t.clients = clients
	policies := wildcard.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	t.set.Start(ctx, perspace.Triggers(t.set, &admissionregistrationv1.ValidatingAdmissionPolicy{}, policies.List, policies.Watch))
	return nil
}

// Spaces returns the spaces whose controllers run, for tests.
func (t *TypeChecks) Spaces() []string { return t.set.Spaces() }

// newSpaceTypeCheck makes and starts the controller of a space, to run
// until ctx ends.
func (t *TypeChecks) newSpaceTypeCheck(ctx context.Context, space string) (struct{}, error) {
	kube, err := t.clients.Kube(space)
	if err != nil {
		return struct{}{}, err
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	checker := &validatingadmissionpolicy.TypeChecker{
		SchemaResolver: t.builtins().Combine(&resolver.ClientDiscoveryResolver{Discovery: kube.Discovery()}),
		RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
	}
	c, err := validatingadmissionpolicystatus.NewController(factory.Admissionregistration().V1().ValidatingAdmissionPolicies(),
		kube.AdmissionregistrationV1().ValidatingAdmissionPolicies(), checker)
	if err != nil {
		return struct{}{}, err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	go c.Run(ctx, 1)
	klog.FromContext(ctx).V(2).Info("started a space's type checks of ValidatingAdmissionPolicies")
	return struct{}{}, nil
}
