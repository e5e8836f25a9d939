// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
)

// Authorizer decides by the RBAC of the space of each request, for users
// that are neither privileged nor syncers (the caller decides for those).
//
// In the root space it is a cluster's RBAC: the defaults apply to every
// authenticated user (discovery, asking what one may do). In any other
// space, a user that no binding stored in the space names (by user name,
// group or ServiceAccount) is not a member and is refused everything, so
// that nobody learns what a space holds, not even its API groups, without
// being let in. The wildcard space and mailbox spaces are refused to all.
type Authorizer struct {
	store *Store
	rbac  *rbacauthorizer.RBACAuthorizer
	// spaceType tells the type of a space ("" for none).
	spaceType func(space string) string
}

var (
	_ authorizer.Authorizer   = &Authorizer{}
	_ authorizer.RuleResolver = &Authorizer{}
)

// NewAuthorizer returns the authorizer of the spaces whose RBAC store
// holds, and whose types spaceType tells.
func NewAuthorizer(store *Store, spaceType func(space string) string) *Authorizer {
	return &Authorizer{store: store, rbac: rbacauthorizer.New(store, store, store, store), spaceType: spaceType}
}

// Store returns the store the authorizer reads.
func (a *Authorizer) Store() *Store { return a.store }

// admitted returns why u may not use space at all, or "".
func (a *Authorizer) admitted(space string, u user.Info) string {
	name := "<anonymous>"
	if u != nil {
		name = u.GetName()
	}
	switch {
	case u != nil && ServiceAccountElsewhere(u, space):
		return fmt.Sprintf("user %q is a ServiceAccount of space %q and acts in that space only, not in %q", name, strings.Join(u.GetExtra()[principal.ExtraSpace], ","), space)
	case space == spaces.Root:
		return ""
	case space == spaces.Wildcard:
		return fmt.Sprintf("user %q may not use the wildcard space %q: it shows every space's objects and is for the server and its admins", name, space)
	case a.spaceType != nil && a.spaceType(space) == tenancyv1alpha1.SpaceTypeMailbox:
		return fmt.Sprintf("user %q may not use mailbox space %q: mailboxes are for the server and their syncer", name, space)
	case u == nil || !a.member(space, u):
		return fmt.Sprintf("user %q has no access to space %q: no RoleBinding or ClusterRoleBinding there names the user or one of its groups", name, space)
	}
	return ""
}

// ServiceAccountElsewhere tells whether u is a ServiceAccount of another
// space than space. A ServiceAccount is (space, namespace, name): its token
// authenticates with its space in principal.ExtraSpace. One named without it
// (impersonated, as RBAC of the space allows) is one of the space where
// impersonation was allowed: the request's.
func ServiceAccountElsewhere(u user.Info, space string) bool {
	if _, _, err := serviceaccount.SplitUsername(u.GetName()); err != nil {
		return false
	}
	own, ok := u.GetExtra()[principal.ExtraSpace]
	return ok && (len(own) != 1 || own[0] != space)
}

// member tells whether a binding stored in space names u.
func (a *Authorizer) member(space string, u user.Info) bool {
	if ServiceAccountElsewhere(u, space) {
		return false
	}
	found := false
	a.store.ownBindingsSubjects(space, func(namespace string, subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if appliesTo(u, s, namespace) {
				found = true
				return true
			}
		}
		return false
	})
	return found
}

// appliesTo tells whether subject names u, as Kubernetes' RBAC matches
// subjects (a ServiceAccount subject without a namespace is of the
// binding's).
func appliesTo(u user.Info, subject rbacv1.Subject, namespace string) bool {
	switch subject.Kind {
	case rbacv1.UserKind:
		return u.GetName() == subject.Name
	case rbacv1.GroupKind:
		return slices.Contains(u.GetGroups(), subject.Name)
	case rbacv1.ServiceAccountKind:
		ns := subject.Namespace
		if ns == "" {
			ns = namespace
		}
		return ns != "" && serviceaccount.MatchesUsername(ns, subject.Name, u.GetName())
	}
	return false
}

// Authorize implements authorizer.Authorizer. It allows or denies, never
// has no opinion.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	space := spaces.SpaceOrRoot(ctx)
	if reason := a.admitted(space, attrs.GetUser()); reason != "" {
		return authorizer.DecisionDeny, reason, nil
	}
	decision, reason, err := a.rbac.Authorize(ctx, attrs)
	if decision == authorizer.DecisionAllow {
		return decision, reason, err
	}
	if why, ok := a.allowSpaceRead(ctx, attrs); ok {
		return authorizer.DecisionAllow, why, nil
	}
	if reason == "" {
		reason = fmt.Sprintf("no RBAC rule of space %q allows it", space)
	}
	return authorizer.DecisionDeny, reason, err
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: its decisions
// carry no conditions, so it answers as Authorize does (a wrapper must not
// let the wrapped authorizer's answer through unchanged).
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: no decision of its
// has conditions to evaluate.
func (*Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor implements authorizer.RuleResolver (kubectl auth can-i --list).
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	if reason := a.admitted(spaces.SpaceOrRoot(ctx), u); reason != "" {
		return nil, nil, false, nil
	}
	return a.rbac.RulesFor(ctx, u, namespace)
}
