// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestellar/kubestellar/internal/storagetest"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestSyncTargetsNameTheirMailboxes: a SyncTarget is stored naming the
// mailbox its space and UID give, whatever status the request carried.
func TestSyncTargetsNameTheirMailboxes(t *testing.T) {
	long := strings.Repeat("inventory", 7)
	syncTarget := func(uid string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget"}}
		u.SetName("edge1")
		u.SetUID(types.UID(uid))
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	for _, tc := range []struct {
		name        string
		space       string
		obj         *unstructured.Unstructured
		wantMailbox string
		wantStatus  map[string]any
	}{
		{name: "named from its space and UID", space: "inv1", obj: syncTarget("uid-1", nil),
			wantMailbox: "inv1-mb-uid-1"},
		{name: "a name the request carried is not kept", space: "inv1", obj: syncTarget("uid-1", map[string]any{"mailboxSpace": "wds1", "syncedObjects": int64(3)}),
			wantMailbox: "inv1-mb-uid-1", wantStatus: map[string]any{"syncedObjects": int64(3)}},
		{name: "a long inventory's name is shortened as the mailbox controller's", space: long, obj: syncTarget("uid-2", nil),
			wantMailbox: spaces.MailboxName(long, "uid-2")},
		{name: "no UID: named by the mailbox controller", space: "inv1", obj: syncTarget("", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &storagetest.CreateRecorder{}
			s := syncTargetsNameTheirMailboxes(rec)
			require.NoError(t, s.Create(spaces.WithSpace(context.Background(), tc.space), "/key", tc.obj, nil, 0))
			got, _, err := unstructured.NestedString(rec.Created.Object, "status", "mailboxSpace")
			require.NoError(t, err)
			require.Equal(t, tc.wantMailbox, got)
			for k, v := range tc.wantStatus {
				require.Equal(t, v, rec.Created.Object["status"].(map[string]any)[k], k)
			}
		})
	}
}
