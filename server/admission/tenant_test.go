// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestWhatASpaceCannotServe: what the server would do for a tenant outside
// the tenant's space (call a URL the tenant names) or would store to do
// nothing is refused, saying why; in a WDS admission configuration is
// workload for edges and stays.
func TestWhatASpaceCannotServe(t *testing.T) {
	plugin := NewEdge(fakeSpaces{"team-a": "", wds: tenancyv1alpha1.SpaceTypeWDS}, fakeConfigs{}, func(string) bool { return false }, MailboxQuota{}).(admission.ValidationInterface)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	validate := func(space string, who user.Info, gvr schema.GroupVersionResource, kind string, obj runtime.Object) error {
		a := admission.NewAttributesRecord(obj, nil, schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: kind}, "", "x", gvr, "", admission.Create, nil, false, who)
		return plugin.Validate(spaces.WithSpace(context.Background(), space), a, nil)
	}
	crds := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	crd := func(strategy apiextensionsv1.ConversionStrategyType) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: strategy}}}
		if strategy == apiextensionsv1.WebhookConverter {
			url := "https://127.0.0.1:2379/convert"
			c.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url}}
		}
		return c
	}
	err := validate("team-a", alice, crds, "CustomResourceDefinition", crd(apiextensionsv1.WebhookConverter))
	require.True(t, apierrors.IsForbidden(err), "a conversion webhook in a tenant's space: %v", err)
	require.ErrorContains(t, err, `spec.conversion.strategy Webhook is refused in space "team-a"`)
	require.True(t, apierrors.IsForbidden(validate(wds, alice, crds, "CustomResourceDefinition", crd(apiextensionsv1.WebhookConverter))), "nor in a WDS")
	require.NoError(t, validate("team-a", alice, crds, "CustomResourceDefinition", crd(apiextensionsv1.NoneConverter)))
	require.NoError(t, validate(spaces.Root, admin, crds, "CustomResourceDefinition", crd(apiextensionsv1.WebhookConverter)), "the root space's CRDs are the admin's")

	for _, resource := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource}
		for _, space := range []string{"team-a", spaces.Root} {
			err := validate(space, admin, gvr, "Config", &metav1.PartialObjectMetadata{})
			require.True(t, apierrors.IsForbidden(err), "%s in %s: %v", resource, space, err)
			require.ErrorContains(t, err, "would be stored and never act")
		}
		require.NoError(t, validate(wds, alice, gvr, "Config", &metav1.PartialObjectMetadata{}), "%s in a WDS is workload for edges", resource)
	}
	for _, resource := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource}
		for _, space := range []string{"team-a", spaces.Root, wds} {
			require.NoError(t, validate(space, alice, gvr, "Config", &metav1.PartialObjectMetadata{}), "%s in %s: they act in their space (or are workload, in a WDS)", resource, space)
		}
	}
}

// TestSpaceNamedLikeAMailbox: a user's space may not take the name of a
// SyncTarget's mailbox.
func TestSpaceNamedLikeAMailbox(t *testing.T) {
	plugin := NewEdge(fakeSpaces{}, fakeConfigs{}, func(string) bool { return false }, MailboxQuota{}).(admission.ValidationInterface)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	create := func(name string) error {
		space := &tenancyv1alpha1.Space{TypeMeta: metav1.TypeMeta{APIVersion: tenancyv1alpha1.SchemeGroupVersion.String(), Kind: "Space"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
		a := admission.NewAttributesRecord(space, nil, tenancyv1alpha1.SchemeGroupVersion.WithKind("Space"), "", name, tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces"), "", admission.Create, nil, false, alice)
		return plugin.Validate(spaces.WithSpace(context.Background(), spaces.Root), a, nil)
	}
	for _, name := range []string{spaces.MailboxName("inv-b", "0b6e6ac2-52b5-4b44-9a55-37b2e40a9c11"), "mb-0b6e6ac2-52b5-4b44-9a55-37b2e40a9c11"} {
		err := create(name)
		require.True(t, apierrors.IsForbidden(err), "%s: %v", name, err)
		require.ErrorContains(t, err, "are the server's, for the mailboxes of SyncTargets")
	}
	require.NoError(t, create("team-mb-notes"))
}

// TestNoSpaceNamedRoot: a Space named root would be taken for the root
// space (its owner bound to cluster-admin there); one named the
// wildcard, or no valid space name, is refused as well.
func TestNoSpaceNamedRoot(t *testing.T) {
	plugin := NewEdge(fakeSpaces{}, fakeConfigs{}, func(string) bool { return false }, MailboxQuota{}).(admission.ValidationInterface)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	for name, want := range map[string]string{spaces.Root: `"root" is the root space`, spaces.Wildcard: "reserved for the wildcard space"} {
		space := &tenancyv1alpha1.Space{TypeMeta: metav1.TypeMeta{APIVersion: tenancyv1alpha1.SchemeGroupVersion.String(), Kind: "Space"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
		a := admission.NewAttributesRecord(space, nil, tenancyv1alpha1.SchemeGroupVersion.WithKind("Space"), "", name, tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces"), "", admission.Create, nil, false, alice)
		err := plugin.Validate(spaces.WithSpace(context.Background(), spaces.Root), a, nil)
		require.True(t, apierrors.IsForbidden(err), "%s: %v", name, err)
		require.ErrorContains(t, err, want)
	}
}
