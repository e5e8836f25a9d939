// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// TestForbidden: a 403 the syncer's own permissions explain is
// MissingPermission, naming the permission and the command that grants
// it; a 403 from admission (the syncer may, the edge still refuses) is
// the object's Rejected; both retry quietly or not as before.
func TestForbidden(t *testing.T) {
	key := objKey{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: "web", Name: "front"}
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "front", errors.New(`User "system:serviceaccount:kubestellar-syncer:kubestellar-syncer" cannot patch resource`))
	for _, tc := range []struct {
		name     string
		allowed  bool
		checkErr error
		reason   string
		message  string
		quiet    bool
	}{
		{name: "RBAC", allowed: false, reason: edgev2alpha1.SyncReasonMissingPermission,
			message: "the syncer may not patch deployments.apps in namespace web at the edge: grant it there, e.g. kubestellar syncer rbac --sync-target inv1/edge1 | kubectl apply -f -", quiet: true},
		{name: "admission", allowed: true, reason: edgev2alpha1.SyncReasonRejected, message: "the edge cluster refused it: "},
		{name: "cannot ask", checkErr: errors.New("boom"), reason: edgev2alpha1.SyncReasonRejected, message: "the edge cluster refused it: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked authorizationv1.ResourceAttributes
			s := &Syncer{
				opts: &Options{SyncTarget: "edge1"}, id: Identity{InventorySpace: "inv1", SyncTarget: "edge1"},
				problems: map[objKey]problem{}, inStep: map[objKey]bool{key: true},
				reportQ: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objKey]()),
				mayI: func(_ context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
					asked = attrs
					return tc.allowed, tc.checkErr
				},
			}
			defer s.reportQ.ShutDown()
			err := s.forbidden(context.Background(), key, "patch", denied)
			require.Error(t, err)
			require.Equal(t, authorizationv1.ResourceAttributes{Namespace: "web", Verb: "patch", Group: "apps", Resource: "deployments", Name: "front"}, asked)
			p := s.problems[key]
			require.Equal(t, tc.reason, p.Reason)
			require.Contains(t, p.Message, tc.message)
			require.False(t, s.inStep[key])
			require.Equal(t, tc.quiet, isExpected(err), "a missing permission is on the object; the log does not repeat it at every retry")
			require.Equal(t, 1, s.reportQ.Len(), "the problem is reported")
		})
	}
}
