// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/spaces"
)

// SyncTargetLookup finds the mailbox space of a SyncTarget.
type SyncTargetLookup interface {
	// MailboxOf returns the mailbox space of SyncTarget name in an inventory
	// space ("" until assigned), and found=false when there is no such
	// SyncTarget (or it is not known yet).
	MailboxOf(inventorySpace, name string) (mailbox string, found bool)
}

const (
	edgeGroup         = "edge.kubestellar.io"
	syncTargetsPlural = "synctargets"
)

// mailboxVerbs are what a syncer may do to anything in its mailbox: read
// the copies, write their status and annotations, create and delete
// upsynced objects. Not deletecollection (a syncer deletes what it knows),
// and nothing outside the usual resource verbs: "impersonate", for one,
// would let it act as anybody.
var mailboxVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// readVerbs are all a syncer may do to CRDs, even in its mailbox: the
// server binds to a mailbox the CRDs its copies need (spaces.DecorateCRDs),
// and a CRD bound there is shared with the WDS it comes from.
var readVerbs = []string{"get", "list", "watch"}

func isCRD(attrs authorizer.Attributes) bool {
	return attrs.GetAPIGroup() == "apiextensions.k8s.io" && attrs.GetResource() == "customresourcedefinitions"
}

// discoveryURLs are the non-resource paths a syncer may read in its
// inventory space and its mailbox: API discovery and OpenAPI, which clients
// read before they touch resources.
var discoveryURLs = []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/*"}

func isDiscovery(path string) bool {
	for _, p := range discoveryURLs {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(path, prefix) {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// authorizeSyncer decides for the syncer of SyncTarget inv/st. It may:
//   - in the root space: GET its own description (jointoken.SyncerInfoPath)
//     and open its tunnel (jointoken.TunnelPath);
//   - in its inventory space: get, and list and watch by name (the field
//     selector metadata.name, which the request's attributes carry as its
//     name), its SyncTarget, get, update and patch its status, and read
//     discovery: the other edges of the inventory, their names, labels and
//     state, are not the edge's to know;
//   - in its mailbox space: the mailboxVerbs on any resource and
//     subresource but CRDs, which it may only read (the server binds them), and
//     read discovery.
//
// Everything else is denied, the wildcard space included.
func (a Authorizer) authorizeSyncer(ctx context.Context, attrs authorizer.Attributes, inv, st string) (authorizer.Decision, string) {
	space := spaces.SpaceOrRoot(ctx)
	name := attrs.GetUser().GetName()
	if !attrs.IsResourceRequest() {
		if attrs.GetVerb() == "get" && space == spaces.Root && (attrs.GetPath() == jointoken.SyncerInfoPath || attrs.GetPath() == jointoken.TunnelPath) {
			return authorizer.DecisionAllow, ""
		}
		// A tunnel opened as a stream of the syncer's HTTP/2 connection
		// is a POST (tunnel/stream.go).
		if attrs.GetVerb() == "post" && space == spaces.Root && attrs.GetPath() == jointoken.TunnelPath {
			return authorizer.DecisionAllow, ""
		}
		if attrs.GetVerb() == "get" && isDiscovery(attrs.GetPath()) && (space == inv || a.isMailbox(space, inv, st)) {
			return authorizer.DecisionAllow, ""
		}
		return authorizer.DecisionDeny, fmt.Sprintf("user %q may not %s %s in space %q", name, attrs.GetVerb(), attrs.GetPath(), space)
	}
	if space == inv {
		if inventoryAllows(attrs, st) {
			return authorizer.DecisionAllow, ""
		}
		return authorizer.DecisionDeny, fmt.Sprintf("user %q may only read SyncTarget %q and write its status in space %q", name, st, space)
	}
	if a.isMailbox(space, inv, st) {
		if isCRD(attrs) && !slices.Contains(readVerbs, attrs.GetVerb()) {
			return authorizer.DecisionDeny, fmt.Sprintf("user %q may only read CustomResourceDefinitions, which the server binds, in its mailbox space %q", name, space)
		}
		if slices.Contains(mailboxVerbs, attrs.GetVerb()) {
			return authorizer.DecisionAllow, ""
		}
		return authorizer.DecisionDeny, fmt.Sprintf("user %q may not %s in its mailbox space %q", name, attrs.GetVerb(), space)
	}
	return authorizer.DecisionDeny, fmt.Sprintf("user %q has no access to space %q", name, space)
}

func inventoryAllows(attrs authorizer.Attributes, st string) bool {
	if attrs.GetAPIGroup() != edgeGroup || attrs.GetResource() != syncTargetsPlural {
		return false
	}
	verb := attrs.GetVerb()
	switch attrs.GetSubresource() {
	case "":
		return (verb == "get" || verb == "list" || verb == "watch") && attrs.GetName() == st
	case "status":
		return (verb == "get" || verb == "update" || verb == "patch") && attrs.GetName() == st
	}
	return false
}

// isMailbox tells whether space is the mailbox of SyncTarget inv/st.
func (a Authorizer) isMailbox(space, inv, st string) bool {
	if a.SyncTargets == nil || space == spaces.Root || space == spaces.Wildcard {
		return false
	}
	mailbox, found := a.SyncTargets.MailboxOf(inv, st)
	return found && mailbox != "" && mailbox == space
}

// syncerRules lists what authorizeSyncer allows in the space of ctx.
func (a Authorizer) syncerRules(ctx context.Context, inv, st string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo) {
	space := spaces.SpaceOrRoot(ctx)
	var nonResource []authorizer.NonResourceRuleInfo
	if space == spaces.Root {
		public := append(slices.Clone(PublicPaths), jointoken.SyncerInfoPath, jointoken.TunnelPath)
		nonResource = append(nonResource, &authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: public})
	}
	discovery := &authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: discoveryURLs}
	switch {
	case space == inv:
		return []authorizer.ResourceRuleInfo{
			&authorizer.DefaultResourceRuleInfo{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{edgeGroup}, Resources: []string{syncTargetsPlural}, ResourceNames: []string{st}},
			&authorizer.DefaultResourceRuleInfo{Verbs: []string{"get", "update", "patch"}, APIGroups: []string{edgeGroup}, Resources: []string{syncTargetsPlural + "/status"}, ResourceNames: []string{st}},
		}, append(nonResource, discovery)
	case a.isMailbox(space, inv, st):
		// Rules only add up, so "all but writing CRDs" cannot be said; the
		// write rule over-reports CRD writes, which Authorize denies.
		return []authorizer.ResourceRuleInfo{
			&authorizer.DefaultResourceRuleInfo{Verbs: mailboxVerbs, APIGroups: []string{"*"}, Resources: []string{"*", "*/*"}},
		}, append(nonResource, discovery)
	}
	return nil, nonResource
}
