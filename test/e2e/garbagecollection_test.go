// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.gc.example.com}
spec:
  group: gc.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// ownedBy is a manifest of an object owned by another, by UID.
func ownedBy(apiVersion, kind, name, ownerAPIVersion, ownerKind, owner, uid string, extra string) string {
	return fmt.Sprintf(`apiVersion: %s
kind: %s
metadata:
  name: %s
  namespace: default
  ownerReferences:
  - {apiVersion: %s, kind: %s, name: %s, uid: %s, blockOwnerDeletion: true}
%s`, apiVersion, kind, name, ownerAPIVersion, ownerKind, owner, uid, extra)
}

func uidOf(t *testing.T, k harness.Kubectl, args ...string) string {
	t.Helper()
	uid := strings.TrimSpace(k.MustRun(t, append(args, "-o", "jsonpath={.metadata.uid}")...))
	require.NotEmpty(t, uid)
	return uid
}

// TestGarbageCollectionWithKubectl deletes owners with kubectl's three
// cascades in a tenant's space, custom resources among them, while another
// tenant's space holds objects of the same names, and across a restart.
func TestGarbageCollectionWithKubectl(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	letCreateSpaces(t, admin, "alice", "bob")
	a := newTenant(t, srv, "alice").ownSpace(t, "team-a")
	b := newTenant(t, srv, "bob").ownSpace(t, "team-b")
	gone := func(k harness.Kubectl, what string, args ...string) {
		t.Helper()
		poll(t, k, equals(""), what+" to be deleted", append(append([]string{"get"}, args...), "-n", "default", "--ignore-not-found", "-o", "name")...)
	}

	for _, k := range []harness.Kubectl{a, b} {
		k.MustRunStdin(t, strings.NewReader(gadgetCRD), "apply", "-f", "-")
		pollStdin(t, k, "apiVersion: gc.example.com/v1\nkind: Gadget\nmetadata: {name: parent, namespace: default}\n", "the Gadget CRD to serve", "apply", "-f", "-")
		uid := uidOf(t, k, "get", "gadget", "parent", "-n", "default")
		k.MustRunStdin(t, strings.NewReader(ownedBy("gc.example.com/v1", "Gadget", "child", "gc.example.com/v1", "Gadget", "parent", uid, "")+
			"---\n"+ownedBy("v1", "ConfigMap", "of-parent", "gc.example.com/v1", "Gadget", "parent", uid, "data: {k: v}\n")), "apply", "-f", "-")
	}

	t.Run("foreground, custom resources", func(t *testing.T) {
		// kubectl waits for the owner to be gone, which it is only once
		// its dependents are.
		a.MustRun(t, "delete", "gadget", "parent", "-n", "default", "--cascade=foreground", "--timeout=60s")
		require.Empty(t, strings.TrimSpace(a.MustRun(t, "get", "gadget,configmap", "-n", "default", "--ignore-not-found", "-o", "name",
			"--field-selector", "metadata.name!=kube-root-ca.crt")), "the dependents went before their owner")
		require.Equal(t, "gadget.gc.example.com/child gadget.gc.example.com/parent",
			strings.Join(strings.Fields(b.MustRun(t, "get", "gadgets", "-n", "default", "-o", "name")), " "), "the other tenant's space keeps its own")
		b.MustRun(t, "get", "configmap", "of-parent", "-n", "default")
	})

	t.Run("background", func(t *testing.T) {
		b.MustRun(t, "delete", "gadget", "parent", "-n", "default")
		gone(b, "the Gadget's dependent Gadget", "gadget", "child")
		gone(b, "the Gadget's dependent ConfigMap", "configmap", "of-parent")
	})

	t.Run("orphan", func(t *testing.T) {
		a.MustRun(t, "create", "configmap", "keeper", "-n", "default")
		uid := uidOf(t, a, "get", "configmap", "keeper", "-n", "default")
		a.MustRunStdin(t, strings.NewReader(ownedBy("v1", "ConfigMap", "kept", "v1", "ConfigMap", "keeper", uid, "")), "apply", "-f", "-")
		a.MustRun(t, "delete", "configmap", "keeper", "-n", "default", "--cascade=orphan", "--timeout=60s")
		require.Equal(t, "", strings.TrimSpace(a.MustRun(t, "get", "configmap", "kept", "-n", "default", "-o", "jsonpath={.metadata.ownerReferences}")),
			"the orphan stays, with no reference to its deleted owner")
	})

	t.Run("foreground across a restart", func(t *testing.T) {
		a.MustRun(t, "create", "configmap", "waiting", "-n", "default")
		uid := uidOf(t, a, "get", "configmap", "waiting", "-n", "default")
		a.MustRunStdin(t, strings.NewReader(ownedBy("v1", "ConfigMap", "holding", "v1", "ConfigMap", "waiting", uid, "  finalizers: [example.com/hold]\n")), "apply", "-f", "-")
		a.MustRun(t, "delete", "configmap", "waiting", "-n", "default", "--cascade=foreground", "--wait=false")
		poll(t, a, func(s string) bool { return s != "" }, "the blocking dependent to be deleting",
			"get", "configmap", "holding", "-n", "default", "-o", "jsonpath={.metadata.deletionTimestamp}")
		require.Contains(t, a.MustRun(t, "get", "configmap", "waiting", "-n", "default", "-o", "jsonpath={.metadata.finalizers}"), "foregroundDeletion",
			"the owner waits for its blocking dependent")
		srv.Restart(t)
		require.Contains(t, a.MustRun(t, "get", "configmap", "waiting", "-n", "default", "-o", "jsonpath={.metadata.finalizers}"), "foregroundDeletion",
			"the owner still waits after the restart")
		a.MustRun(t, "patch", "configmap", "holding", "-n", "default", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		gone(a, "the blocking dependent", "configmap", "holding")
		gone(a, "the owner, its dependents gone", "configmap", "waiting")
	})
}
