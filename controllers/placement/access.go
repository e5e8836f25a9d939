package placement

import (
	"context"
	"fmt"
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
	wds, placer, group, resource, namespace string
}

type accessAnswer struct {
	allowed bool
	why     string
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

// mayRead implements mailboxReconciler.mayRead. A placement with no
// recorded writer was written before writers were recorded, when only
// admins could write one.
func (a *accessChecker) mayRead(ctx context.Context, wds string, ep *edgev2alpha1.EdgePlacement, gvr schema.GroupVersionResource, namespace string) (bool, string) {
	raw, ok := ep.Annotations[edgev2alpha1.PlacedByAnnotation]
	if !ok {
		return true, ""
	}
	who, err := placer.Decode(raw)
	if err != nil {
		return false, fmt.Sprintf("nothing is placed: %v", err)
	}
	if who.Unrestricted() {
		return true, ""
	}
	key := accessKey{wds: wds, placer: raw, group: gvr.Group, resource: gvr.Resource, namespace: namespace}
	now := a.now()
	a.mu.Lock()
	if got, ok := a.answers[key]; ok && now.Sub(got.at) < accessTTL {
		a.mu.Unlock()
		return got.allowed, got.why
	}
	a.mu.Unlock()

	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range who.Extra {
		extra[k] = v
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: who.User, UID: who.UID, Groups: who.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Group: gvr.Group, Resource: gvr.Resource, Namespace: namespace},
	}}
	where := "cluster-wide"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	what := schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}.String()
	if err := a.ask(ctx, wds, review); err != nil {
		// Not cached: asked again at the next reconcile.
		return false, fmt.Sprintf("%s %s are not placed: cannot ask whether %q may read them: %v", what, where, who.User, err)
	}
	ans := accessAnswer{allowed: review.Status.Allowed, at: now}
	if !ans.allowed {
		ans.why = fmt.Sprintf("%s %s are not placed: %q, who wrote this placement, may not get them in space %q", what, where, who.User, wds)
	}
	a.mu.Lock()
	if len(a.answers) >= maxAccessAnswers {
		a.answers = map[accessKey]accessAnswer{}
	}
	a.answers[key] = ans
	a.mu.Unlock()
	return ans.allowed, ans.why
}
