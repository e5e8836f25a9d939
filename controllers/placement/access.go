// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/placer"
	"github.com/kubestellar/kubestellar/spaces"
)

// Placements move only what their writer may read: the translator runs
// with the server's powers, and must not lend them to a user who may
// write an EdgePlacement but not read, say, the WDS's Secrets.
const (
	// accessTTL is how long an answer is used: a grant or a revocation in
	// the WDS's RBAC shows in the mailboxes within it (at the next
	// reconcile of each mailbox).
	accessTTL = 30 * time.Second
	// maxAccessAnswers bounds the cache; beyond it, it starts over.
	maxAccessAnswers = 10000
)

// accessChecker asks the server's authorizer, with SubjectAccessReviews,
// whether a placement's writer may get a resource in a namespace of a
// WDS, and keeps the answers a while.
type accessChecker struct {
	ask func(ctx context.Context, wds string, review *authorizationv1.SubjectAccessReview) error
	now func() time.Time

	mu      sync.Mutex
	answers map[accessKey]accessAnswer
}

type accessKey struct {
	wds, placer, verb, group, resource, namespace string
}

type accessAnswer struct {
	allowed bool
	at      time.Time
}

func newAccessChecker(c client.Client) *accessChecker {
	return &accessChecker{
		ask: func(ctx context.Context, wds string, review *authorizationv1.SubjectAccessReview) error {
			return c.Create(spaces.WithSpace(ctx, wds), review)
		},
		now:     time.Now,
		answers: map[accessKey]accessAnswer{},
	}
}

// mayRead implements mailboxReconciler.mayRead. A question the authorizer
// could not answer is an error, not a refusal: what is placed already
// stays until it can.
func (a *accessChecker) mayRead(ctx context.Context, wds string, ep *edgev2alpha1.EdgePlacement, gvr schema.GroupVersionResource, namespace string) (bool, string, error) {
	where := "cluster-wide"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	what := schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}.String()
	ok, who, err := a.may(ctx, wds, ep, "get", gvr.Group, gvr.Resource, namespace)
	var unanswered *askError
	switch {
	case errors.As(err, &unanswered):
		return false, "", fmt.Errorf("%s %s are not placed for now: %w", what, where, err)
	case err != nil:
		return false, fmt.Sprintf("%s %s are not placed: %v", what, where, err), nil
	case !ok:
		return false, fmt.Sprintf("%s %s are not placed: %q, who wrote this placement, may not get them in space %q", what, where, who, wds), nil
	}
	return true, "", nil
}

// askError is a question the authorizer did not answer (the server
// could not be asked): unlike a refusal, it may be answered later.
type askError struct{ err error }

func (e *askError) Error() string { return e.err.Error() }
func (e *askError) Unwrap() error { return e.err }

// upsyncVerbs are what the upsync controller does, with the server's
// powers, to the objects an upsync clause brings into a WDS.
var upsyncVerbs = []string{"create", "update", "delete"}

// mayUpsync implements mailboxReconciler.mayUpsync: an upsync clause
// writes into the WDS, so its placement's writer must be allowed to
// create, update and delete what it selects there, in each namespace it
// names (everywhere, when it names none or "*"). As with mayRead, a
// question not answered is an error.
func (a *accessChecker) mayUpsync(ctx context.Context, wds string, ep *edgev2alpha1.EdgePlacement, i int, c edgev2alpha1.UpsyncClause) (bool, string, error) {
	namespaces := c.Namespaces
	if len(namespaces) == 0 || slices.Contains(namespaces, "*") {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		for _, resource := range c.Resources {
			for _, verb := range upsyncVerbs {
				ok, who, err := a.may(ctx, wds, ep, verb, c.APIGroup, resource, ns)
				var unanswered *askError
				if errors.As(err, &unanswered) {
					return false, "", fmt.Errorf("spec.upsync[%d] is not applied for now: %w", i, err)
				}
				where := "in every namespace"
				if ns != "" {
					where = "in namespace " + ns
				}
				what := schema.GroupResource{Group: c.APIGroup, Resource: resource}.String()
				switch {
				case err != nil:
					return false, fmt.Sprintf("spec.upsync[%d] is not applied: %v", i, err), nil
				case !ok:
					return false, fmt.Sprintf("spec.upsync[%d] is not applied: %q, who wrote this placement, may not %s %s %s in space %q, where upsynced objects are written",
						i, who, verb, what, where, wds), nil
				}
			}
		}
	}
	return true, "", nil
}

// may tells whether the writer of a placement may do verb on a resource in
// a namespace of a WDS, and names the writer. A placement with no recorded
// writer was written before writers were recorded, when only admins could
// write one.
func (a *accessChecker) may(ctx context.Context, wds string, ep *edgev2alpha1.EdgePlacement, verb, group, resource, namespace string) (bool, string, error) {
	raw, ok := ep.Annotations[edgev2alpha1.PlacedByAnnotation]
	if !ok {
		return true, "", nil
	}
	who, err := placer.Decode(raw)
	if err != nil {
		return false, "", fmt.Errorf("its writer is not known: %w", err)
	}
	if who.Unrestricted() {
		return true, who.User, nil
	}
	key := accessKey{wds: wds, placer: raw, verb: verb, group: group, resource: resource, namespace: namespace}
	now := a.now()
	a.mu.Lock()
	if got, ok := a.answers[key]; ok && now.Sub(got.at) < accessTTL {
		a.mu.Unlock()
		return got.allowed, who.User, nil
	}
	a.mu.Unlock()

	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range who.Extra {
		extra[k] = v
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: who.User, UID: who.UID, Groups: who.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace},
	}}
	if err := a.ask(ctx, wds, review); err != nil {
		// Not cached: asked again at the next reconcile.
		return false, who.User, &askError{fmt.Errorf("cannot ask whether %q may %s them: %w", who.User, verb, err)}
	}
	a.mu.Lock()
	if len(a.answers) >= maxAccessAnswers {
		a.answers = map[accessKey]accessAnswer{}
	}
	a.answers[key] = accessAnswer{allowed: review.Status.Allowed, at: now}
	a.mu.Unlock()
	return review.Status.Allowed, who.User, nil
}
