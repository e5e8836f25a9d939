// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestOwnerReferencesNeedDelete: the garbage collector deletes with the
// server's rights, so a user of a space who may patch a ConfigMap but not
// delete it must not get it deleted by pointing its ownerReferences at
// nothing, nor hold up another's deletion with blockOwnerDeletion; a
// user who may delete does both.
func TestOwnerReferencesNeedDelete(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "guarded")
	admin := kube(t, s, "guarded")
	_, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "editor"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "no-delete"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "no-delete"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "editor", Namespace: "default"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	token, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "editor", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	adminCfg := s.RESTConfig(t, "guarded")
	editor, err := kubernetes.NewForConfig(&rest.Config{Host: adminCfg.Host, BearerToken: token.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: adminCfg.CAData}})
	require.NoError(t, err)

	victim, err := admin.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "victim", "kept"), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := editor.CoreV1().ConfigMaps("default").Get(ctx, "victim", metav1.GetOptions{})
		return err == nil, err
	}, "the editor's rights to apply")

	dangling := `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`
	_, err = editor.CoreV1().ConfigMaps("default").Patch(ctx, "victim", types.MergePatchType, []byte(dangling), metav1.PatchOptions{})
	require.True(t, apierrors.IsForbidden(err), "an owner set by one who may not delete: %v", err)
	require.Contains(t, err.Error(), "cannot set an ownerRef on a resource you can't delete")

	blocking := configMap("default", "holder", "x")
	yes := true
	blocking.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: victim.Name, UID: victim.UID, BlockOwnerDeletion: &yes}}
	_, err = editor.CoreV1().ConfigMaps("default").Create(ctx, blocking, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "blockOwnerDeletion by one who may not update the owner's finalizers: %v", err)
	require.Contains(t, err.Error(), "cannot set blockOwnerDeletion")

	// Without blockOwnerDeletion, the editor's own object may name an owner.
	blocking.OwnerReferences[0].BlockOwnerDeletion = nil
	_, err = editor.CoreV1().ConfigMaps("default").Create(ctx, blocking, metav1.CreateOptions{})
	require.NoError(t, err)

	// The space's admin may do both.
	_, err = admin.CoreV1().ConfigMaps("default").Patch(ctx, "victim", types.MergePatchType, []byte(dangling), metav1.PatchOptions{})
	require.NoError(t, err)
	configMapGone(t, admin, "default", "victim")
	configMapGone(t, admin, "default", "holder")
}
