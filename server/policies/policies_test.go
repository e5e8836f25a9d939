// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package policies

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

type types map[string]string

func (t types) SpaceType(name string) (string, bool, error) {
	typ, ok := t[name]
	return typ, ok, nil
}

func binding(space, name string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{spaces.Annotation: space}}}
}

// TestWhichSpacesGetAPlugin: only a space that holds a binding, and whose
// policies act (not a WDS, not a mailbox, not a space unknown), would get a
// plug-in; a space whose last binding goes has none; mailboxes' copies of
// bindings are not counted.
func TestWhichSpacesGetAPlugin(t *testing.T) {
	mailbox := spaces.MailboxName("inv", "0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b6a")
	a := New(types{"team-a": tenancyv1alpha1.SpaceTypeGeneric, "wds1": tenancyv1alpha1.SpaceTypeWDS}, nil, func(user.Info) bool { return false })
	a.count(binding("wds1", "b"), 1)
	a.count(binding(mailbox, "b"), 1)
	a.count(binding("team-a", "b1"), 1)
	a.count(binding("team-a", "b2"), 1)
	require.Equal(t, map[string]int{"team-a": 2, "wds1": 1}, a.bound)

	ctx := context.Background()
	for _, space := range []string{"wds1", mailbox, "team-b", "gone"} {
		p, err := a.pluginFor(ctx, space)
		require.NoError(t, err, space)
		require.Nil(t, p, "no plug-in for %s", space)
	}

	stopped := false
	a.running["team-a"] = &spacePlugin{stop: func() { stopped = true }}
	a.count(binding("team-a", "b1"), -1)
	require.False(t, stopped, "one binding is left")
	a.count(binding("team-a", "b2"), -1)
	require.True(t, stopped, "the last binding gone stops the plug-in")
	require.Empty(t, a.Spaces())
	require.Equal(t, map[string]int{"wds1": 1}, a.bound)
}
