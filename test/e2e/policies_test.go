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

// sized is a parameterized ValidatingAdmissionPolicy, with its binding:
// a ConfigMap created in namespace dev may have at most as many keys as
// the ConfigMap dev/limits says under max (which, labelled role, is not
// itself checked); without that ConfigMap, the binding denies.
const sized = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: sized}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - {name: in-dev, expression: "object.metadata.namespace == 'dev'"}
  validations:
  - expression: "object.data.size() <= int(params.data.max)"
    messageExpression: "'at most ' + params.data.max + ' keys'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: sized}
spec:
  policyName: sized
  validationActions: [Deny]
  paramRef: {name: limits, namespace: dev, parameterNotFoundAction: Deny}
  matchResources:
    objectSelector: {matchExpressions: [{key: role, operator: DoesNotExist}]}
`

// limits is the parameter of sized: at most max keys.
func limits(max int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: dev, labels: {role: limits}}
data: {max: "%d"}
`, max)
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
// writes only (and not the server's own), and the root space's policy
// governs no tenant, and a policy's parameters are read in its own space.
// Policies keep acting across a restart, and stop when their binding goes. (In a WDS they are workload for edges:
// server/admission's TestWhatASpaceCannotServe.)
func TestAdmissionPoliciesActInTheirSpace(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	letCreateSpaces(t, admin, "alice", "bob")
	a, b := newTenant(t, srv, "alice").ownSpace(t, "team-a"), newTenant(t, srv, "bob").ownSpace(t, "team-b")
	for _, k := range []harness.Kubectl{a, b} {
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

	// A policy's parameters are its own space's: team-a's policy reads
	// "limits" in team-a, which does not exist yet (and so denies), not
	// team-b's of the same name.
	b.MustRunStdin(t, strings.NewReader(limits(9)), "apply", "-f", "-")
	a.MustRunStdin(t, strings.NewReader(sized), "apply", "-f", "-")
	pollDenied(t, a, "no params found for policy binding with `Deny` parameterNotFoundAction",
		"team-a's parameterized policy to deny without its parameters", "create", "configmap", "s1", "-n", "dev", "--from-literal=a=1", "--from-literal=b=2")
	a.MustRunStdin(t, strings.NewReader(limits(3)), "apply", "-f", "-")
	pollDenied(t, a, "at most 3 keys", "team-a's parameters to act", "create", "configmap", "s2", "-n", "dev",
		"--from-literal=a=1", "--from-literal=b=2", "--from-literal=c=3", "--from-literal=d=4")
	a.MustRun(t, "create", "configmap", "s3", "-n", "dev", "--from-literal=a=1", "--from-literal=b=2")

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
