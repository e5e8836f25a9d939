// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	rbacregistryvalidation "k8s.io/kubernetes/pkg/registry/rbac/validation"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/placer"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/spaces"
)

var (
	rolesResource               = rbacv1.SchemeGroupVersion.WithResource("roles").GroupResource()
	clusterRolesResource        = rbacv1.SchemeGroupVersion.WithResource("clusterroles").GroupResource()
	roleBindingsResource        = rbacv1.SchemeGroupVersion.WithResource("rolebindings").GroupResource()
	clusterRoleBindingsResource = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings").GroupResource()
	spacesResource              = tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces").GroupResource()
	placementsResource          = edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements").GroupResource()
)

// recordPlacer writes who writes an EdgePlacement into
// edgev2alpha1.PlacedByAnnotation, whatever the object says: the
// translator copies only what that identity may read. A write by the
// server itself (finalizers, say) keeps the writer it had.
func recordPlacer(a admission.Attributes) error {
	m, err := meta.Accessor(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("an EdgePlacement without metadata: %v", err))
	}
	annotations := m.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	u := a.GetUserInfo()
	if provenance.IsServer(u) && a.GetOperation() == admission.Update {
		if old, err := meta.Accessor(a.GetOldObject()); err == nil {
			if v, ok := old.GetAnnotations()[edgev2alpha1.PlacedByAnnotation]; ok {
				annotations[edgev2alpha1.PlacedByAnnotation] = v
			} else {
				delete(annotations, edgev2alpha1.PlacedByAnnotation)
			}
			m.SetAnnotations(annotations)
			return nil
		}
	}
	if u == nil {
		return apierrors.NewBadRequest("an EdgePlacement written by nobody")
	}
	v, err := placer.FromUser(u).Encode()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	annotations[edgev2alpha1.PlacedByAnnotation] = v
	m.SetAnnotations(annotations)
	return nil
}

// Admission keeps users within what they were granted:
//   - nobody grants what they lack: a Role or ClusterRole holds only rules
//     its writer has (or the writer may "escalate" it), a binding binds
//     only a role whose rules its writer has (or the writer may "bind"
//     it), each in the space written, as Kubernetes' RBAC storage checks;
//   - the creator of a Space is recorded as its owner (tenancyv1alpha1.SpaceOwnerAnnotation),
//     which only the server's admins may set or change.
//
// CustomResourceDefinitions need no check here: each space binds its own
// (spaces.DecorateCRDs), so a tenant's create, change or delete acts in
// its space only, as RBAC there allows.
//
// The server's admins and the server (system:masters) are not checked;
// nor are syncers, whose writes the edge admission confines.
type Admission struct {
	*admission.Handler
	authz    authorizer.Authorizer
	resolver rbacregistryvalidation.AuthorizationRuleResolver
	isSyncer func(user.Info) bool
	owned    SpacesBound
}

// SpacesBound bounds the spaces a user owns.
type SpacesBound struct {
	// Max is the most a user may own; 0: no bound.
	Max int
	// Flag names the server flag that sets Max, for the error.
	Flag string
	// OwnedBy returns the names of the Spaces whose owner annotation
	// names user.
	OwnedBy func(user string) ([]string, error)
	// recent are the Spaces admitted a moment ago, which OwnedBy's cache
	// may not show yet; counting is one step with adding to it (mu).
	recent *lru.Cache[string, time.Time]
	mu     *sync.Mutex
}

// recentFor is how long an admitted Space is counted for its owner
// before the cache of Spaces has it.
const recentFor = 10 * time.Second

var (
	_ admission.MutationInterface   = &Admission{}
	_ admission.ValidationInterface = &Admission{}
)

// NewAdmission returns the admission for the spaces whose RBAC store
// holds; authz is the server's authorizer, isSyncer tells syncers.
func NewAdmission(store *Store, authz authorizer.Authorizer, isSyncer func(user.Info) bool, owned SpacesBound) *Admission {
	owned.recent, _ = lru.New[string, time.Time](4096)
	owned.mu = &sync.Mutex{}
	return &Admission{
		owned:    owned,
		Handler:  admission.NewHandler(admission.Create, admission.Update, admission.Delete),
		authz:    authz,
		resolver: rbacregistryvalidation.NewDefaultRuleResolver(store, store, store, store),
		isSyncer: isSyncer,
	}
}

func (p *Admission) exempt(u user.Info) bool {
	return u == nil || provenance.IsPrivileged(u) || (p.isSyncer != nil && p.isSyncer(u))
}

// Admit records the creator of a Space in the root space as its owner,
// and the writer of an EdgePlacement's spec on it.
func (p *Admission) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() == placementsResource && a.GetSubresource() == "" &&
		(a.GetOperation() == admission.Create || a.GetOperation() == admission.Update) {
		return recordPlacer(a)
	}
	if a.GetResource().GroupResource() != spacesResource || a.GetSubresource() != "" || a.GetOperation() != admission.Create ||
		spaces.SpaceOrRoot(ctx) != spaces.Root || p.exempt(a.GetUserInfo()) {
		return nil
	}
	m, err := meta.Accessor(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("a Space without metadata: %v", err))
	}
	annotations := m.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[tenancyv1alpha1.SpaceOwnerAnnotation] = a.GetUserInfo().GetName()
	m.SetAnnotations(annotations)
	return nil
}

// Validate implements admission.ValidationInterface.
func (p *Admission) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	u := a.GetUserInfo()
	if a.GetSubresource() != "" || p.exempt(u) {
		return nil
	}
	switch gr := a.GetResource().GroupResource(); gr {
	case spacesResource:
		if a.GetOperation() == admission.Delete {
			return nil
		}
		if err := p.validateInventories(ctx, a); err != nil {
			return err
		}
		if a.GetOperation() == admission.Create {
			return p.validateOwned(u, a.GetName(), a.IsDryRun())
		}
		return p.validateSpace(a)
	case rolesResource, clusterRolesResource:
		if a.GetOperation() == admission.Delete {
			return nil
		}
		return p.validateRole(ctx, a)
	case roleBindingsResource, clusterRoleBindingsResource:
		if a.GetOperation() == admission.Delete {
			return nil
		}
		return p.validateBinding(ctx, a)
	}
	return nil
}

// PlaceVerb on locations.edge.kubestellar.io in an inventory space lets a
// user name that inventory in a WDS's spec.inventorySpaces, and so place
// workloads on its edges and upsync from them.
const PlaceVerb = "bind"

// validateInventories refuses a Space whose spec.inventorySpaces adds an
// inventory space its writer may not place on: a WDS that names an
// inventory sends its workloads to that inventory's edges, with the
// syncers' rights there, and upsyncs from them. The inventory's RBAC
// decides (PlaceVerb on Locations there), as kcp's bind verb on an
// APIExport lets a workspace use another's API.
func (p *Admission) validateInventories(ctx context.Context, a admission.Attributes) error {
	added := inventorySpaces(a.GetObject())
	if a.GetOperation() == admission.Update {
		old := inventorySpaces(a.GetOldObject())
		added = slices.DeleteFunc(added, func(inv string) bool { return slices.Contains(old, inv) })
	}
	u := a.GetUserInfo()
	for _, inv := range added {
		d, _, err := p.authz.Authorize(spaces.WithSpace(ctx, inv), authorizer.AttributesRecord{User: u, Verb: PlaceVerb,
			APIGroup: edgev2alpha1.SchemeGroupVersion.Group, APIVersion: "*", Resource: "locations", ResourceRequest: true})
		if err != nil || d != authorizer.DecisionAllow {
			return apierrors.NewForbidden(spacesResource, a.GetName(), fmt.Errorf(
				"user %q may not place workloads on the edges of inventory space %q: spec.inventorySpaces needs verb %s on locations.edge.kubestellar.io there "+
					"(its owner grants it: kubectl --context %s create clusterrole place-here --verb=%s --resource=locations.edge.kubestellar.io, and a binding)",
				u.GetName(), inv, PlaceVerb, inv, PlaceVerb))
		}
	}
	return nil
}

// inventorySpaces reads spec.inventorySpaces of a Space.
func inventorySpaces(obj runtime.Object) []string {
	if obj == nil {
		return nil
	}
	var content map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		content = u.Object
	} else if c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil {
		content = c
	}
	invs, _, _ := unstructured.NestedStringSlice(content, "spec", "inventorySpaces")
	return invs
}

// validateOwned refuses a Space to a user who owns SpacesBound.Max
// already: those in the cache of Spaces, and those admitted a moment ago
// that the cache does not show yet, so that one create after another
// cannot pass the bound. Creates in flight at once on several servers may
// pass it by as many.
func (p *Admission) validateOwned(u user.Info, name string, dryRun bool) error {
	if p.owned.Max <= 0 || p.owned.OwnedBy == nil || u == nil {
		return nil
	}
	p.owned.mu.Lock()
	defer p.owned.mu.Unlock()
	names, err := p.owned.OwnedBy(u.GetName())
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("counting the spaces of %q: %v", u.GetName(), err))
	}
	n := len(names)
	now := time.Now()
	prefix := u.GetName() + "\x00"
	for _, key := range p.owned.recent.Keys() {
		other, ok := strings.CutPrefix(key, prefix)
		if admitted, _ := p.owned.recent.Peek(key); !ok || now.Sub(admitted) > recentFor {
			continue
		}
		if !slices.Contains(names, other) {
			n++
		}
	}
	if n >= p.owned.Max {
		return apierrors.NewForbidden(spacesResource, "", fmt.Errorf("user %q owns %d spaces, the most a user may (the server's %s %d): delete one, or ask an admin",
			u.GetName(), n, p.owned.Flag, p.owned.Max))
	}
	if !dryRun {
		p.owned.recent.Add(prefix+name, now)
	}
	return nil
}

// validateSpace refuses a change of a Space's owner by anyone but admins.
func (p *Admission) validateSpace(a admission.Attributes) error {
	if a.GetOperation() != admission.Update {
		return nil
	}
	owner := func(obj any) string {
		m, err := meta.Accessor(obj)
		if err != nil {
			return ""
		}
		return m.GetAnnotations()[tenancyv1alpha1.SpaceOwnerAnnotation]
	}
	if owner(a.GetObject()) != owner(a.GetOldObject()) {
		return apierrors.NewForbidden(spacesResource, a.GetName(), fmt.Errorf("only the server's admins change the annotation %s", tenancyv1alpha1.SpaceOwnerAnnotation))
	}
	return nil
}

// validateRole refuses a Role or ClusterRole with rules its writer lacks,
// unless the writer may escalate it.
func (p *Admission) validateRole(ctx context.Context, a admission.Attributes) error {
	var rules []rbacv1.PolicyRule
	switch r := a.GetObject().(type) {
	case *rbacv1.Role:
		rules = r.Rules
	case *rbacv1.ClusterRole:
		if r.AggregationRule != nil && !p.may(ctx, a, "escalate") {
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
				"user %q may not write a ClusterRole with an aggregationRule: it gathers other roles' rules, which needs the escalate verb on clusterroles",
				a.GetUserInfo().GetName()))
		}
		rules = r.Rules
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("unexpected %T for %s", a.GetObject(), a.GetResource().Resource))
	}
	if p.may(ctx, a, "escalate") {
		return nil
	}
	if err := rbacregistryvalidation.ConfirmNoEscalation(p.ruleContext(ctx, a), p.resolver, rules); err != nil {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), err)
	}
	return nil
}

// validateBinding refuses a binding to a role whose rules its writer
// lacks, unless the writer may bind that role.
func (p *Admission) validateBinding(ctx context.Context, a admission.Attributes) error {
	var ref rbacv1.RoleRef
	switch b := a.GetObject().(type) {
	case *rbacv1.RoleBinding:
		ref = b.RoleRef
	case *rbacv1.ClusterRoleBinding:
		ref = b.RoleRef
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("unexpected %T for %s", a.GetObject(), a.GetResource().Resource))
	}
	if p.mayBind(ctx, a, ref) {
		return nil
	}
	rules, err := p.resolver.GetRoleReferenceRules(ctx, ref, a.GetNamespace())
	if err != nil && !apierrors.IsNotFound(err) {
		return apierrors.NewInternalError(err)
	}
	if err := rbacregistryvalidation.ConfirmNoEscalation(p.ruleContext(ctx, a), p.resolver, rules); err != nil {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), err)
	}
	return nil
}

// ruleContext is ctx with the request's user and namespace, which
// ConfirmNoEscalation reads.
func (p *Admission) ruleContext(ctx context.Context, a admission.Attributes) context.Context {
	ctx = genericapirequest.WithUser(ctx, a.GetUserInfo())
	return genericapirequest.WithNamespace(ctx, a.GetNamespace())
}

// may tells whether the writer may do verb to the role written.
func (p *Admission) may(ctx context.Context, a admission.Attributes, verb string) bool {
	return p.allowed(ctx, authorizer.AttributesRecord{User: a.GetUserInfo(), Verb: verb, APIGroup: rbacv1.GroupName, APIVersion: "*",
		Resource: a.GetResource().Resource, Name: a.GetName(), Namespace: a.GetNamespace(), ResourceRequest: true})
}

// mayBind tells whether the writer may bind the role ref names, in the
// binding's namespace ("" for a ClusterRoleBinding).
func (p *Admission) mayBind(ctx context.Context, a admission.Attributes, ref rbacv1.RoleRef) bool {
	resource := "clusterroles"
	if ref.Kind == "Role" {
		resource = "roles"
	}
	return p.allowed(ctx, authorizer.AttributesRecord{User: a.GetUserInfo(), Verb: "bind", APIGroup: ref.APIGroup, APIVersion: "*",
		Resource: resource, Name: ref.Name, Namespace: a.GetNamespace(), ResourceRequest: true})
}

func (p *Admission) allowed(ctx context.Context, attrs authorizer.AttributesRecord) bool {
	decision, _, err := p.authz.Authorize(ctx, attrs)
	return err == nil && decision == authorizer.DecisionAllow
}
