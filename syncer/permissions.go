// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"fmt"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// accessCheck asks the edge whether the syncer may do something there.
type accessCheck func(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error)

// selfAccessCheck asks with a SelfSubjectAccessReview, which every
// authenticated user may make.
func selfAccessCheck(cfg *rest.Config, client *http.Client) (accessCheck, error) {
	c, err := authorizationv1client.NewForConfigAndClient(cfg, client)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
		r, err := c.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	}, nil
}

// forbidden reports an edge request for key that the edge refused with
// 403. The edge's authorizer and its admission both answer 403, so the
// syncer asks which: a permission its credentials lack is
// MissingPermission, naming it and how to grant it (an in-cluster syncer
// with least-privilege RBAC and a kind placed after its manifest was
// made); anything else is the object's Rejected. Either way the object is
// retried with backoff, so that granting the permission is all it takes.
func (s *Syncer) forbidden(ctx context.Context, key objKey, verb string, err error) error {
	gr := schema.GroupResource{Group: key.GVR.Group, Resource: key.GVR.Resource}
	allowed := true
	if s.mayI != nil {
		var checkErr error
		allowed, checkErr = s.mayI(ctx, authorizationv1.ResourceAttributes{
			Namespace: key.Namespace, Verb: verb, Group: key.GVR.Group, Resource: key.GVR.Resource, Name: key.Name,
		})
		if checkErr != nil {
			// Cannot tell: say what the edge said.
			klog.FromContext(ctx).V(2).Info("cannot ask the edge what the syncer may do", "err", checkErr)
			allowed = true
		}
	}
	if allowed {
		s.setProblem(key, problem{Reason: edgev2alpha1.SyncReasonRejected, Message: "the edge cluster refused it: " + err.Error()})
		return fmt.Errorf("%s %s at the edge: %w", verb, key, err)
	}
	s.mu.Lock()
	inv := s.id.InventorySpace
	s.mu.Unlock()
	where := "cluster-wide"
	if key.Namespace != "" {
		where = "in namespace " + key.Namespace
	}
	s.setProblem(key, problem{Reason: edgev2alpha1.SyncReasonMissingPermission, Message: fmt.Sprintf(
		"the syncer may not %s %s %s at the edge: grant it there, e.g. kubestellar syncer rbac --sync-target %s/%s | kubectl apply -f - (the syncer retries on its own)",
		verb, gr, where, inv, s.opts.SyncTarget)})
	return fmt.Errorf("%s %s at the edge: %w", verb, key, errMissingPermission)
}
