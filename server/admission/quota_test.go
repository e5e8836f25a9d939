// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestMailboxQuota checks the bound on what a syncer creates in its
// mailbox: a full mailbox refuses the syncer's creates, with a message
// naming the limit, and nothing else: not its updates and deletes, not the
// server's copies; a count that fails refuses the create as unavailable.
func TestMailboxQuota(t *testing.T) {
	counts := map[string]int64{}
	var countErr error
	plugin := NewEdge(
		fakeSpaces{mbA: tenancyv1alpha1.SpaceTypeMailbox},
		fakeConfigs{mbA: {Spec: edgev2alpha1.SyncerConfigSpec{Upsync: []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"configmaps"}}}}}},
		func(g string) bool { return g == "" },
		MailboxQuota{Max: 3, Flag: "--mailbox-object-limit", Count: func(_ context.Context, gr schema.GroupResource, space string) (int64, error) {
			return counts[space+"/"+gr.String()], countErr
		}},
	).(admission.ValidationInterface)
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	upsynced := obj("v1", "ConfigMap", "reports", "report", upsyncedLabels, nil, nil)
	validate := func(who user.Info, op admission.Operation, gvr schema.GroupVersionResource, ns string, o, old *unstructured.Unstructured) error {
		var newObj, oldObj runtime.Object
		if o != nil {
			newObj = o
		}
		if old != nil {
			oldObj = old
		}
		a := admission.NewAttributesRecord(newObj, oldObj, schema.GroupVersionKind{}, ns, "report", gvr, "", op, nil, false, who)
		return plugin.Validate(spaces.WithSpace(context.Background(), mbA), a, nil)
	}

	counts[mbA+"/configmaps"] = 2
	require.NoError(t, validate(syncerA, admission.Create, configMaps, "reports", upsynced, nil), "below the limit")

	counts[mbA+"/configmaps"] = 3
	err := validate(syncerA, admission.Create, configMaps, "reports", upsynced, nil)
	require.True(t, apierrors.IsForbidden(err), "a full mailbox: %v", err)
	require.ErrorContains(t, err, `mailbox "inv1-mb-a" already holds 3 configmaps`)
	require.ErrorContains(t, err, "--mailbox-object-limit 3")
	require.NoError(t, validate(syncerA, admission.Create, namespaces, "", obj("v1", "Namespace", "", "report", upsyncedLabels, nil, nil), nil),
		"each resource is counted on its own")
	require.NoError(t, validate(syncerA, admission.Update, configMaps, "reports", with(upsynced, func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "v"} }), upsynced),
		"an update adds nothing")
	require.NoError(t, validate(syncerA, admission.Delete, configMaps, "reports", nil, upsynced), "a delete frees room")
	require.NoError(t, validate(server, admission.Create, configMaps, "default", configMapCopy(), nil), "the server's copies are not bounded")

	counts[mbA+"/configmaps"] = 0
	countErr = errors.New("datastore unreachable")
	err = validate(syncerA, admission.Create, configMaps, "reports", upsynced, nil)
	require.True(t, apierrors.IsServiceUnavailable(err), "a count that fails: %v", err)
}
