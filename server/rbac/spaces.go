// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"slices"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/spaces"
)

// Spaces are listed as projects are in OpenShift: everyone may list and
// watch Spaces in the root space, and sees those they may use (a binding
// there names them) or that root-space RBAC lets them get; a member may
// get the Space of a space it is in. Root-space RBAC that grants list
// shows them all, as before.

// spaceRead tells whether attrs read Spaces in the root space, and with
// which verb.
func spaceRead(ctx context.Context, attrs authorizer.Attributes) (string, bool) {
	if spaces.SpaceOrRoot(ctx) != spaces.Root || !attrs.IsResourceRequest() || attrs.GetAPIGroup() != spacesResource.Group ||
		attrs.GetResource() != spacesResource.Resource || attrs.GetSubresource() != "" {
		return "", false
	}
	switch v := attrs.GetVerb(); v {
	case "get", "list", "watch":
		return v, true
	}
	return "", false
}

// authenticated tells whether u is someone, not anonymous.
func authenticated(u user.Info) bool {
	return u != nil && u.GetName() != user.Anonymous && slices.Contains(u.GetGroups(), user.AllAuthenticated)
}

// allowSpaceRead allows what RBAC alone does not: listing the Spaces one
// may see (VisibleSpaces filters them) and getting those one is in.
func (a *Authorizer) allowSpaceRead(ctx context.Context, attrs authorizer.Attributes) (string, bool) {
	verb, ok := spaceRead(ctx, attrs)
	if !ok || !authenticated(attrs.GetUser()) {
		return "", false
	}
	switch {
	case verb != "get":
		return "the list shows only the spaces the user may see", true
	case attrs.GetName() != "" && a.member(attrs.GetName(), attrs.GetUser()):
		return "the user is a member of the space", true
	}
	return "", false
}

// VisibleSpaces returns nil when the caller of ctx may list every Space
// (the server, its admins, root-space RBAC that grants list), and
// otherwise tells which Spaces the caller sees: those it is a member of
// and those root-space RBAC lets it get.
func (a *Authorizer) VisibleSpaces(ctx context.Context) func(name string) bool {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok || provenance.IsPrivileged(u) {
		return nil
	}
	rootCtx := spaces.WithSpace(ctx, spaces.Root)
	may := func(verb, name string) bool {
		d, _, _ := a.rbac.Authorize(rootCtx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: spacesResource.Group,
			Resource: spacesResource.Resource, Name: name, ResourceRequest: true})
		return d == authorizer.DecisionAllow
	}
	if may("list", "") {
		return nil
	}
	return func(name string) bool { return a.member(name, u) || may("get", name) }
}
