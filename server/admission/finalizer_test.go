// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestSyncTargetBornWithItsFinalizer: a SyncTarget is created holding the
// finalizer that keeps it until its mailbox is gone, whatever finalizers
// it came with, once; nothing else is given it.
func TestSyncTargetBornWithItsFinalizer(t *testing.T) {
	plugin := NewEdge(fakeSpaces{"inv": tenancyv1alpha1.SpaceTypeInventory}, fakeConfigs{}, func(string) bool { return false }, MailboxQuota{}).(admission.MutationInterface)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	synctargets := edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")
	admit := func(gvr schema.GroupVersionResource, kind, sub string, op admission.Operation, finalizers ...string) []string {
		t.Helper()
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(gvr.GroupVersion().String())
		obj.SetKind(kind)
		obj.SetName("edge1")
		obj.SetFinalizers(finalizers)
		var old *unstructured.Unstructured
		if op == admission.Update {
			old = obj.DeepCopy()
		}
		a := admission.NewAttributesRecord(obj, old, gvr.GroupVersion().WithKind(kind), "", "edge1", gvr, sub, op, nil, false, alice)
		require.NoError(t, plugin.Admit(spaces.WithSpace(context.Background(), "inv"), a, nil))
		return obj.GetFinalizers()
	}
	require.Equal(t, []string{edgev2alpha1.MailboxFinalizer}, admit(synctargets, "SyncTarget", "", admission.Create))
	require.Equal(t, []string{"example.com/mine", edgev2alpha1.MailboxFinalizer},
		admit(synctargets, "SyncTarget", "", admission.Create, "example.com/mine"), "a finalizer of the user's is kept")
	require.Equal(t, []string{edgev2alpha1.MailboxFinalizer},
		admit(synctargets, "SyncTarget", "", admission.Create, edgev2alpha1.MailboxFinalizer), "given once")
	// An update may remove it (the mailbox controller does, once the
	// mailbox is gone), and other kinds are not given it.
	require.Empty(t, admit(synctargets, "SyncTarget", "", admission.Update))
	require.Empty(t, admit(synctargets, "SyncTarget", "status", admission.Update))
	require.Empty(t, admit(edgev2alpha1.SchemeGroupVersion.WithResource("locations"), "Location", "", admission.Create))
}
