// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestResourceQuotasInTheirSpace: a ResourceQuota counts what its namespace
// holds in its own space (status.used, deletes included) and refuses a
// create past its hard limit, as in a cluster, for core names and
// count/<resource>.<group> alike; the same quota and namespace in another
// space count that space's objects only; it holds across a restart.
func TestResourceQuotasInTheirSpace(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	letCreateSpaces(t, admin, "alice")
	alice := newTenant(t, srv, "alice")
	a, b := alice.ownSpace(t, "team-a"), alice.ownSpace(t, "team-b")
	for _, k := range []harness.Kubectl{a, b} {
		k.MustRun(t, "create", "namespace", "app")
		k.MustRun(t, "create", "quota", "q", "-n", "app", "--hard=configmaps=3,count/deployments.apps=1,requests.cpu=1")
	}
	// The server's kube-root-ca.crt is one of the namespace's ConfigMaps,
	// as in a cluster; the namespace holds no pods, so no CPU is requested.
	used := func(k harness.Kubectl, want string) {
		t.Helper()
		poll(t, k, equals(want), "the quota's usage", "get", "quota", "q", "-n", "app", "-o", `jsonpath={.status.used}`)
	}
	used(a, `{"configmaps":"1","count/deployments.apps":"0","requests.cpu":"0"}`)
	require.Equal(t, `{"configmaps":"3","count/deployments.apps":"1","requests.cpu":"1"}`,
		a.MustRun(t, "get", "quota", "q", "-n", "app", "-o", `jsonpath={.status.hard}`))

	for i := range 2 {
		a.MustRun(t, "create", "configmap", fmt.Sprintf("c%d", i), "-n", "app")
	}
	errOut := a.MustFail(t, "create", "configmap", "c2", "-n", "app")
	require.Contains(t, errOut, `exceeded quota: q, requested: configmaps=1, used: configmaps=3, limited: configmaps=3`)
	a.MustRun(t, "create", "deployment", "d1", "-n", "app", "--image=nginx")
	errOut = a.MustFail(t, "create", "deployment", "d2", "-n", "app", "--image=nginx")
	require.Contains(t, errOut, `exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1`)
	used(a, `{"configmaps":"3","count/deployments.apps":"1","requests.cpu":"0"}`)

	// The same quota in team-b counts team-b's objects only.
	for i := range 2 {
		b.MustRun(t, "create", "configmap", fmt.Sprintf("c%d", i), "-n", "app")
	}
	used(b, `{"configmaps":"3","count/deployments.apps":"0","requests.cpu":"0"}`)
	b.MustRun(t, "create", "deployment", "d1", "-n", "app", "--image=nginx")

	// Across a restart the quota still refuses; a delete makes room.
	srv.Restart(t)
	pollDenied(t, a, "exceeded quota: q", "the quota to refuse after a restart", "create", "configmap", "c3", "-n", "app")
	a.MustRun(t, "delete", "configmap", "c0", "-n", "app")
	used(a, `{"configmaps":"2","count/deployments.apps":"1","requests.cpu":"0"}`)
	a.MustRun(t, "create", "configmap", "c3", "-n", "app")

	// Without the quota, nothing is bounded.
	a.MustRun(t, "delete", "quota", "q", "-n", "app")
	poll(t, a, func(s string) bool { return s != "" }, "the quota's removal to free the namespace",
		"create", "deployment", "d2", "-n", "app", "--image=nginx", "-o", "name")
}
