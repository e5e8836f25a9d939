// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/placer"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/spaces"
)

func attrs(obj, old runtime.Object, gvr schema.GroupVersionResource, ns, name string, op admission.Operation, u user.Info) admission.Attributes {
	return admission.NewAttributesRecord(obj, old, gvr.GroupVersion().WithKind("X"), ns, name, gvr, "", op, nil, false, u)
}

// TestAdmission: the creator of a Space is its owner, which only admins
// change; CRDs are the admins'; nobody grants what they lack.
func TestAdmission(t *testing.T) {
	store := storeWith(t,
		in("team-a", roleBinding("default", "alice-admin", "admin", rbacv1.UserKind, "alice")),
	)
	az := NewAuthorizer(store, nil)
	p := NewAdmission(store, az, func(u user.Info) bool { return u.GetName() == "syncer" }, SpacesBound{})
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	root := provenance.Vouch(&user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	spacesGVR := tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces")
	ctxIn := func(space string, u user.Info) context.Context {
		return genericapirequest.WithUser(spaces.WithSpace(context.Background(), space), u)
	}

	// Admit: the owner annotation is the creator, whatever was asked.
	space := &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: "scratch",
		Annotations: map[string]string{tenancyv1alpha1.SpaceOwnerAnnotation: "someone-else"}}}
	require.NoError(t, p.Admit(ctxIn(spaces.Root, alice), attrs(space, nil, spacesGVR, "", "scratch", admission.Create, alice), nil))
	require.Equal(t, "alice", space.Annotations[tenancyv1alpha1.SpaceOwnerAnnotation])
	byAdmin := &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}
	require.NoError(t, p.Admit(ctxIn(spaces.Root, root), attrs(byAdmin, nil, spacesGVR, "", "ops", admission.Create, root), nil))
	require.Empty(t, byAdmin.Annotations, "an admin's space has no owner but the admins")

	changed := space.DeepCopy()
	changed.Annotations[tenancyv1alpha1.SpaceOwnerAnnotation] = "mallory"
	err := p.Validate(ctxIn(spaces.Root, alice), attrs(changed, space, spacesGVR, "", "scratch", admission.Update, alice), nil)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.NoError(t, p.Validate(ctxIn(spaces.Root, root), attrs(changed, space, spacesGVR, "", "scratch", admission.Update, root), nil))

	// CRDs are each space's own (spaces.DecorateCRDs): RBAC decides, not this.
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}}
	crdGVR := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	for _, op := range []admission.Operation{admission.Create, admission.Update, admission.Delete} {
		require.NoError(t, p.Validate(ctxIn("team-a", alice), attrs(crd, crd, crdGVR, "", crd.Name, op, alice), nil), "%s", op)
	}

	// Escalation: admin in namespace default lets alice bind admin there,
	// not cluster-admin; a Role with what she has, not "*".
	rbGVR := rbacv1.SchemeGroupVersion.WithResource("rolebindings")
	roleGVR := rbacv1.SchemeGroupVersion.WithResource("roles")
	nsCtx := genericapirequest.WithNamespace(ctxIn("team-a", alice), "default")
	ok := roleBinding("default", "bob-admin", "admin", rbacv1.UserKind, "bob")
	require.NoError(t, p.Validate(nsCtx, attrs(ok, nil, rbGVR, "default", ok.Name, admission.Create, alice), nil))
	tooMuch := roleBinding("default", "bob-root", "cluster-admin", rbacv1.UserKind, "bob")
	err = p.Validate(nsCtx, attrs(tooMuch, nil, rbGVR, "default", tooMuch.Name, admission.Create, alice), nil)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.Contains(t, err.Error(), "attempting to grant RBAC permissions not currently held")
	role := func(verbs, resources []string) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "r"},
			Rules: []rbacv1.PolicyRule{{Verbs: verbs, APIGroups: []string{""}, Resources: resources}}}
	}
	require.NoError(t, p.Validate(nsCtx, attrs(role([]string{"get"}, []string{"configmaps"}), nil, roleGVR, "default", "r", admission.Create, alice), nil))
	err = p.Validate(nsCtx, attrs(role([]string{"*"}, []string{"*"}), nil, roleGVR, "default", "r", admission.Create, alice), nil)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	// The same in another space, where alice has nothing.
	other := genericapirequest.WithNamespace(ctxIn("team-b", alice), "default")
	err = p.Validate(other, attrs(ok, nil, rbGVR, "default", ok.Name, admission.Create, alice), nil)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	// Syncers are the edge admission's business.
	syncer := &user.DefaultInfo{Name: "syncer"}
	require.NoError(t, p.Validate(ctxIn("mb-1", syncer), attrs(tooMuch, nil, rbGVR, "default", tooMuch.Name, admission.Create, syncer), nil))
}

// TestPlacerRecorded: every write of an EdgePlacement records its writer,
// whatever the object says; the server's own writes keep the writer.
func TestPlacerRecorded(t *testing.T) {
	p := NewAdmission(storeWith(t), NewAuthorizer(storeWith(t), nil), nil, SpacesBound{})
	gvr := edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements")
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"team-a", user.AllAuthenticated}}
	server := provenance.Vouch(&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}})
	ctx := spaces.WithSpace(context.Background(), "wds1")
	forged := `{"user":"kubestellar-admin","groups":["system:masters"]}`
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{edgev2alpha1.PlacedByAnnotation: forged}}}
	require.NoError(t, p.Admit(ctx, attrs(ep, nil, gvr, "", "p", admission.Create, alice), nil))
	who, err := placer.Decode(ep.Annotations[edgev2alpha1.PlacedByAnnotation])
	require.NoError(t, err)
	require.Equal(t, "alice", who.User)
	require.Equal(t, []string{"team-a", user.AllAuthenticated}, who.Groups)
	require.False(t, who.Unrestricted())

	byServer := ep.DeepCopy()
	byServer.Annotations[edgev2alpha1.PlacedByAnnotation] = forged
	require.NoError(t, p.Admit(ctx, attrs(byServer, ep, gvr, "", "p", admission.Update, server), nil))
	require.Equal(t, ep.Annotations[edgev2alpha1.PlacedByAnnotation], byServer.Annotations[edgev2alpha1.PlacedByAnnotation])

	status := ep.DeepCopy()
	status.Annotations[edgev2alpha1.PlacedByAnnotation] = forged
	a := admission.NewAttributesRecord(status, ep, gvr.GroupVersion().WithKind("EdgePlacement"), "", "p", gvr, "status", admission.Update, nil, false, alice)
	require.NoError(t, p.Admit(ctx, a, nil))
	require.Equal(t, forged, status.Annotations[edgev2alpha1.PlacedByAnnotation], "status writes are not spec writes (and keep metadata anyway)")
}

// TestSpacesPerUser: a user owns at most SpacesBound.Max spaces; the
// admins are not bounded; a count that cannot be had refuses rather
// than lets through.
func TestSpacesPerUser(t *testing.T) {
	owned := map[string][]string{"alice": {"a1", "a2"}, "bob": {"b1"}}
	var countErr error
	p := NewAdmission(storeWith(t), NewAuthorizer(storeWith(t), nil), nil, SpacesBound{Max: 2, Flag: "--spaces-per-user",
		OwnedBy: func(u string) ([]string, error) { return owned[u], countErr }})
	spacesGVR := tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces")
	create := func(u user.Info) error {
		ctx := genericapirequest.WithUser(spaces.WithSpace(context.Background(), spaces.Root), u)
		space := &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: "another"}}
		return p.Validate(ctx, attrs(space, nil, spacesGVR, "", "another", admission.Create, u), nil)
	}
	err := create(&user.DefaultInfo{Name: "alice"})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.ErrorContains(t, err, `user "alice" owns 2 spaces, the most a user may (the server's --spaces-per-user 2)`)
	require.NoError(t, create(&user.DefaultInfo{Name: "bob"}))
	// Before the cache of Spaces shows bob's new one, it counts.
	err = create(&user.DefaultInfo{Name: "bob"})
	require.ErrorContains(t, err, `user "bob" owns 2 spaces`, "the space admitted a moment ago counts")
	owned["bob"] = append(owned["bob"], "another")
	require.ErrorContains(t, create(&user.DefaultInfo{Name: "bob"}), `user "bob" owns 2 spaces`, "once cached, counted once")
	require.NoError(t, create(provenance.Vouch(&user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})), "admins are not bounded")
	// Claiming the admins' group is not being one.
	require.Error(t, create(&user.DefaultInfo{Name: "alice", Groups: []string{user.SystemPrivilegedGroup}}))
	countErr = errors.New("the server is starting")
	require.True(t, apierrors.IsServiceUnavailable(create(&user.DefaultInfo{Name: "carol"})))
}

// TestInventorySpacesNeedTheInventorysConsent: a WDS that names an
// inventory space sends workloads to its edges: its writer needs the
// place verb on Locations there, for each inventory it adds.
func TestInventorySpacesNeedTheInventorysConsent(t *testing.T) {
	store := storeWith(t,
		in("inv-a", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-owns"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}),
	)
	p := NewAdmission(store, NewAuthorizer(store, nil), nil, SpacesBound{})
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	spacesGVR := tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces")
	wds := func(invs ...string) *tenancyv1alpha1.Space {
		return &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: "wds-a"},
			Spec: tenancyv1alpha1.SpaceSpec{Type: tenancyv1alpha1.SpaceTypeWDS, InventorySpaces: invs}}
	}
	validate := func(obj, old *tenancyv1alpha1.Space, op admission.Operation) error {
		ctx := genericapirequest.WithUser(spaces.WithSpace(context.Background(), spaces.Root), alice)
		var oldObj runtime.Object
		if old != nil {
			oldObj = old
		}
		return p.Validate(ctx, attrs(obj, oldObj, spacesGVR, "", "wds-a", op, alice), nil)
	}
	require.NoError(t, validate(wds("inv-a"), nil, admission.Create), "her own inventory")
	err := validate(wds("inv-a", "inv-b"), nil, admission.Create)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.ErrorContains(t, err, `user "alice" may not place workloads on the edges of inventory space "inv-b"`)
	err = validate(wds("inv-a", "inv-b"), wds("inv-a"), admission.Update)
	require.True(t, apierrors.IsForbidden(err), "added by an update: %v", err)
	require.NoError(t, validate(wds("inv-b"), wds("inv-b"), admission.Update), "kept, not added: an admin named it")
}
