// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// policy is a ValidatingAdmissionPolicy named guard, with its binding,
// that refuses ConfigMaps whose data key mode holds forbidden, in the
// namespaces labelled env=prod, with actions (Deny, Warn).
func policy(forbidden, actions string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: guard}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  validations:
  - expression: "object.data.?mode.orValue('') != '` + forbidden + `'"
    messageExpression: "'mode ` + forbidden + ` is not allowed in ' + namespaceObject.metadata.name"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: guard}
spec:
  policyName: guard
  validationActions: [` + actions + `]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
`
}

// stamp is a MutatingAdmissionPolicy, with its binding, that labels every
// ConfigMap created stamped=value.
func stamp(value string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: stamp}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"stamped": "` + value + `"}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: stamp}
spec:
  policyName: stamp
`
}

// TestAdmissionPoliciesActInTheirSpace: a tenant's ValidatingAdmissionPolicy
// acts on the writes of its space, as in a cluster (deny with its message,
// warn, its namespaceSelector read from the space's own namespaces), and
// on nothing in any other space: two spaces hold policies of the same name
// with different rules, a MutatingAdmissionPolicy changes its own space's
// writes only (and not the server's own), the root space's policy governs no tenant, and a
// WDS's policy is workload for edges. Policies keep acting across a
// restart, and stop when their binding goes.
func TestAdmissionPoliciesActInTheirSpace(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	admin.MustRun(t, "--context", "root", "create", "clusterrole", "space-creator", "--verb=create,get,list,watch", "--resource=spaces.tenancy.kubestellar.io")
	admin.MustRun(t, "--context", "root", "create", "clusterrolebinding", "tenants-create-spaces", "--clusterrole=space-creator", "--user=alice", "--user=bob")
	alice, bob := newTenant(t, srv, "alice"), newTenant(t, srv, "bob")
	for _, s := range []struct {
		who   *tenant
		space string
	}{{alice, "team-a"}, {bob, "team-b"}} {
		out, err := s.who.cli(t, "space", "create", s.space)
		require.NoError(t, err, out)
	}
	a, b := alice.in(t, "team-a"), bob.in(t, "team-b")
	for _, k := range []harness.Kubectl{a, b} {
		poll(t, k, isYes, "the owner to be the admin of their space", "auth", "can-i", "*", "*")
		// The same namespaces in both; prod is labelled in team-a only.
		k.MustRun(t, "create", "namespace", "prod")
		k.MustRun(t, "create", "namespace", "dev")
	}
	a.MustRun(t, "label", "namespace", "prod", "env=prod")

	a.MustRunStdin(t, strings.NewReader(policy("unsafe", "Deny")), "apply", "-f", "-")
	b.MustRunStdin(t, strings.NewReader(policy("risky", "Deny")), "apply", "-f", "-")
	b.MustRun(t, "label", "namespace", "prod", "env=prod")

	// team-a's policy denies, with its message, in team-a's labelled
	// namespace; a policy reaches the server's caches in a moment, so poll.
	pollDenied(t, a, `ValidatingAdmissionPolicy 'guard' with binding 'guard' denied request: mode unsafe is not allowed in prod`,
		"team-a's policy to deny", "create", "configmap", "c1", "-n", "prod", "--from-literal=mode=unsafe")
	a.MustRun(t, "create", "configmap", "c2", "-n", "dev", "--from-literal=mode=unsafe") // not selected
	a.MustRun(t, "create", "configmap", "c3", "-n", "prod", "--from-literal=mode=risky") // team-b's rule, not team-a's

	// team-b's policy of the same name has its own rule.
	pollDenied(t, b, "mode risky is not allowed in prod", "team-b's policy to deny", "create", "configmap", "c1", "-n", "prod", "--from-literal=mode=risky")
	b.MustRun(t, "create", "configmap", "c2", "-n", "prod", "--from-literal=mode=unsafe")

	// A MutatingAdmissionPolicy labels what is created in its space only,
	// and not what the server makes there.
	a.MustRunStdin(t, strings.NewReader(stamp("team-a")), "apply", "-f", "-")
	poll(t, a, equals("team-a"), "team-a's MutatingAdmissionPolicy to act",
		"create", "configmap", "m1", "-n", "dev", "--dry-run=server", "-o", "jsonpath={.metadata.labels.stamped}")
	require.Equal(t, "team-a", a.MustRun(t, "create", "configmap", "m1", "-n", "dev", "-o", "jsonpath={.metadata.labels.stamped}"))
	require.Empty(t, b.MustRun(t, "create", "configmap", "m1", "-n", "dev", "-o", "jsonpath={.metadata.labels.stamped}"), "team-a's policy changed team-b's write")
	a.MustRun(t, "create", "namespace", "later")
	poll(t, a, equals(""), "the server's own ConfigMap in a new namespace, unstamped",
		"get", "configmap", "kube-root-ca.crt", "-n", "later", "-o", "jsonpath={.metadata.labels.stamped}")

	// The root space's policy governs the root space, not tenants'.
	admin.MustRun(t, "--context", "root", "label", "namespace", "default", "env=prod")
	admin.MustRunStdin(t, strings.NewReader(policy("rootless", "Deny")), "--context", "root", "apply", "-f", "-")
	pollDenied(t, admin, "mode rootless is not allowed in default", "the root space's policy to deny",
		"--context", "root", "create", "configmap", "r1", "-n", "default", "--from-literal=mode=rootless")
	a.MustRun(t, "create", "configmap", "c4", "-n", "prod", "--from-literal=mode=rootless")

	// Across a restart, they still act.
	srv.Restart(t)
	pollDenied(t, a, "mode unsafe is not allowed in prod", "team-a's policy to deny after a restart", "create", "configmap", "c5", "-n", "prod", "--from-literal=mode=unsafe")

	// Warn instead of deny: the write passes, and kubectl shows why.
	a.MustRunStdin(t, strings.NewReader(policy("unsafe", "Warn")), "apply", "-f", "-")
	out := poll(t, a, func(s string) bool { return strings.Contains(s, "created") }, "the write to pass with a warning",
		"create", "configmap", "c6", "-n", "prod", "--from-literal=mode=unsafe")
	require.NotContains(t, out, "denied")
	_, stderr, err := a.Run(t.Context(), "create", "configmap", "c7", "-n", "prod", "--from-literal=mode=unsafe")
	require.NoError(t, err)
	require.Contains(t, stderr, "Warning: Validation failed for ValidatingAdmissionPolicy 'guard' with binding 'guard': mode unsafe is not allowed in prod")

	// Without its binding, a policy does nothing.
	a.MustRunStdin(t, strings.NewReader(policy("unsafe", "Deny")), "apply", "-f", "-")
	pollDenied(t, a, "mode unsafe is not allowed in prod", "team-a's policy to deny again", "create", "configmap", "c8", "-n", "prod", "--from-literal=mode=unsafe")
	a.MustRun(t, "delete", "validatingadmissionpolicybinding", "guard")
	poll(t, a, func(s string) bool { return strings.Contains(s, "created") }, "the write to pass once the binding is gone",
		"create", "configmap", "c9", "-n", "prod", "--from-literal=mode=unsafe")
}
