// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestFairShares: API Priority and Fairness is configured the Kubernetes
// way, with FlowSchemas and PriorityLevelConfigurations in the root space;
// tenants' flows are told apart by space; bad configuration is refused
// with the reason. (How fair it is under load is a figure of make bench,
// not a timed assertion here.)
func TestFairShares(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	srv.CLI(t, "space", "create", "team-a")
	srv.CLI(t, "space", "create", "team-b")
	alice := newTenant(t, srv, "alice")
	bob := newTenant(t, srv, "bob")
	for _, space := range []string{"team-a", "team-b"} {
		for _, u := range []string{"alice", "bob"} {
			admin.MustRun(t, "--context", space, "create", "rolebinding", u+"-view", "--clusterrole=view", "--user="+u, "-n", "default")
		}
	}

	// The defaults, as kubectl shows them.
	schemas := admin.MustRun(t, "get", "flowschemas")
	for _, want := range []string{"exempt", "probes", "kubestellar-syncers", "kubestellar-tenants", "global-default", "catch-all"} {
		require.Regexp(t, "(?m)^"+want+" ", schemas)
	}
	require.Regexp(t, `(?m)^kubestellar-tenants\s+kubestellar-tenants\s+8000\s+ByUser`, schemas)
	require.Regexp(t, `(?m)^kubestellar-tenants\s+Limited\s+30\s+128`, admin.MustRun(t, "get", "prioritylevelconfigurations"))
	require.Contains(t, admin.MustRun(t, "get", "flowschema", "kubestellar-tenants", "-o", "jsonpath={.status.conditions[?(@.type=='Dangling')].status}"), "False")

	uid := func(kind, name string) string {
		return strings.TrimSpace(admin.MustRun(t, "get", kind, name, "-o", "jsonpath={.metadata.uid}"))
	}
	tenants, exempt := uid("flowschema", "kubestellar-tenants"), uid("flowschema", "exempt")

	// Which FlowSchema a request matched: its UID, in the response
	// headers that kubectl -v=8 prints.
	matched := regexp.MustCompile(`X-Kubernetes-Pf-Flowschema-Uid: (\S+)`)
	schemaOf := func(k harness.Kubectl) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, stderr, err := k.Run(ctx, "get", "configmaps", "-n", "default", "-v=8")
		require.NoError(t, err, stderr)
		m := matched.FindAllStringSubmatch(stderr, -1)
		require.NotEmpty(t, m, "no APF headers in kubectl's log:\n%s", stderr)
		return m[len(m)-1][1]
	}
	waitSchema := func(k harness.Kubectl, want, what string) {
		t.Helper()
		var got string
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			got = schemaOf(k)
			return got == want, nil
		})
		require.NoError(t, err, "%s: last matched FlowSchema UID %s, want %s", what, got, want)
	}
	waitSchema(alice.in(t, "team-a"), tenants, "a tenant is in kubestellar-tenants")
	require.Equal(t, exempt, schemaOf(admin), "the admin (system:masters) is exempt")

	// A flow schema naming SPACE/NAME matches that user in that space
	// only; one naming the user alone matches them everywhere.
	admin.MustRunStdin(t, strings.NewReader(`apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: slow-lane}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 5
    limitResponse: {type: Queue, queuing: {queues: 4, handSize: 2, queueLengthLimit: 10}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: alice-in-team-b}
spec:
  priorityLevelConfiguration: {name: slow-lane}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: User, user: {name: team-b/alice}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: bob-everywhere}
spec:
  priorityLevelConfiguration: {name: slow-lane}
  matchingPrecedence: 600
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: User, user: {name: bob}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
`), "apply", "-f", "-")
	waitSchema(alice.in(t, "team-b"), uid("flowschema", "alice-in-team-b"), "alice in team-b")
	require.Equal(t, tenants, schemaOf(alice.in(t, "team-a")), "alice in team-a is not alice in team-b")
	bobs := uid("flowschema", "bob-everywhere")
	waitSchema(bob.in(t, "team-a"), bobs, "bob in team-a")
	require.Equal(t, bobs, schemaOf(bob.in(t, "team-b")), "a schema naming bob matches bob in every space")

	// APF configures the whole server: not from inside a space.
	out := admin.MustFailStdin(t, strings.NewReader(`apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: mine}
spec: {type: Limited, limited: {nominalConcurrencyShares: 1000, limitResponse: {type: Reject}}}
`), "--context", "team-a", "apply", "-f", "-")
	require.Contains(t, out, "they are made in the root space, not in space team-a")

	// Bad configuration gets Kubernetes' validation, and the server goes on.
	out = admin.MustFailStdin(t, strings.NewReader(`apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: broken}
spec:
  priorityLevelConfiguration: {name: slow-lane}
  matchingPrecedence: 20000
  distinguisherMethod: {type: ByColor}
  rules: [{subjects: [{kind: Group}], resourceRules: [{verbs: [], apiGroups: ["*"], resources: ["*"]}]}]
`), "apply", "-f", "-")
	for _, want := range []string{"spec.matchingPrecedence", "spec.distinguisherMethod.type", "spec.rules[0].subjects[0].group", "spec.rules[0].resourceRules[0].verbs"} {
		require.Contains(t, out, want)
	}
	out = admin.MustFailStdin(t, strings.NewReader(`apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: too-many-hands}
spec:
  type: Limited
  limited: {limitResponse: {type: Queue, queuing: {queues: 4, handSize: 8, queueLengthLimit: 10}}}
`), "apply", "-f", "-")
	require.Contains(t, out, "spec.limited.limitResponse.queuing.handSize")
	// Defaults as in Kubernetes: a Limited level without shares gets 30.
	admin.MustRunStdin(t, strings.NewReader(`apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: defaulted}
spec: {type: Limited, limited: {limitResponse: {type: Reject}}}
`), "apply", "-f", "-")
	require.Equal(t, "30", admin.MustRun(t, "get", "prioritylevelconfiguration", "defaulted", "-o", "jsonpath={.spec.limited.nominalConcurrencyShares}"))

	// The mandatory objects cannot be changed for long, as in Kubernetes:
	// the server puts them back.
	admin.MustRun(t, "delete", "flowschema", "catch-all")
	poll(t, admin, func(s string) bool { return strings.Contains(s, "catch-all") }, "catch-all to come back",
		"get", "flowschemas", "-o", "name")
	waitSchema(alice.in(t, "team-a"), tenants, "a tenant is still in kubestellar-tenants")
}
