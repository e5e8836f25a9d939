// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/test/harness"
)

// tenant is a user with a token of their own and a kubeconfig per space,
// made the way the README says: `token create --user`, then `kubeconfig
// --space ... --token-file`.
type tenant struct {
	name  string
	dir   string
	token string
	srv   *harness.Process
}

func newTenant(t *testing.T, srv *harness.Process, name string, groups ...string) *tenant {
	t.Helper()
	args := []string{"token", "create", "--user", name}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	tok := strings.TrimSpace(srv.CLIStdout(t, args...))
	require.NotContains(t, tok, "\n", "token create --user prints the token alone on stdout")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(tok+"\n"), 0o600))
	return &tenant{name: name, dir: dir, token: tok, srv: srv}
}

// in returns kubectl for the tenant in one space.
func (u *tenant) in(t *testing.T, space string) harness.Kubectl {
	t.Helper()
	path := filepath.Join(u.dir, space+".kubeconfig")
	if _, err := os.Stat(path); err != nil {
		cfg := u.srv.CLIStdout(t, "kubeconfig", "--space", space, "--token-file", filepath.Join(u.dir, "token"))
		require.Contains(t, cfg, u.token, "the tenant's kubeconfig carries the tenant's token")
		require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	}
	return harness.Kubectl{Kubeconfig: path}
}

// cli runs the kubestellar binary as the tenant, against space root.
func (u *tenant) cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := u.in(t, "root")
	cmd := exec.Command(u.srv.Bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+root.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// letCreateSpaces lets users create spaces: a ClusterRole and its binding
// in the root space, made by admin.
func letCreateSpaces(t *testing.T, admin harness.Kubectl, users ...string) {
	t.Helper()
	admin.MustRun(t, "--context", "root", "create", "clusterrole", "space-creator", "--verb=create,get,list,watch", "--resource=spaces.tenancy.kubestellar.io")
	args := []string{"--context", "root", "create", "clusterrolebinding", "tenants-create-spaces", "--clusterrole=space-creator"}
	for _, u := range users {
		args = append(args, "--user="+u)
	}
	admin.MustRun(t, args...)
}

// ownSpace has the tenant create a generic space with the CLI, waits
// until the tenant is its admin, and returns kubectl in it.
func (u *tenant) ownSpace(t *testing.T, space string) harness.Kubectl {
	t.Helper()
	out, err := u.cli(t, "space", "create", space)
	require.NoError(t, err, out)
	k := u.in(t, space)
	poll(t, k, isYes, u.name+" to be the admin of "+space, "auth", "can-i", "*", "*")
	return k
}

// TestTenantsAndRBAC: users with tokens of their own do in each space what
// that space's RBAC grants them, and nothing else; nobody grants what they
// lack; the creator of a space is its admin.
func TestTenantsAndRBAC(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	srv.CLI(t, "space", "create", "team-a")
	srv.CLI(t, "space", "create", "team-b")
	alice := newTenant(t, srv, "alice", "team-a")
	bob := newTenant(t, srv, "bob")
	require.Contains(t, srv.CLI(t, "token", "list"), "alice")

	// Before any binding: no access to the space at all, not even
	// discovery (which kubectl reports as "Forbidden: unknown"; the raw
	// answer says why).
	require.Contains(t, alice.in(t, "team-a").MustFail(t, "get", "configmaps"), "Forbidden")
	// (kubectl get --raw takes a path from the server's root.)
	rawConfigMaps := func(space string) []string {
		return []string{"get", "--raw", "/spaces/" + space + "/api/v1/namespaces/default/configmaps"}
	}
	out := alice.in(t, "team-a").MustFail(t, rawConfigMaps("team-a")...)
	require.Contains(t, out, `user "alice" has no access to space "team-a"`)

	// Every space has the default ClusterRoles, aggregated there.
	roles := admin.MustRun(t, "--context", "team-a", "get", "clusterroles", "-o", "name")
	for _, r := range []string{"cluster-admin", "admin", "edit", "view", "kubestellar:workload-author"} {
		require.Contains(t, roles, "clusterrole.rbac.authorization.k8s.io/"+r+"\n")
	}
	admin.MustRunStdin(t, strings.NewReader(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gadget-viewer, labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}}
rules: [{apiGroups: [example.com], resources: [gadgets], verbs: [get]}]
`), "--context", "team-a", "apply", "-f", "-")
	poll(t, admin, func(s string) bool { return strings.Contains(s, "gadgets") }, "view in team-a to aggregate team-a's role",
		"--context", "team-a", "get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}")
	require.NotContains(t, admin.MustRun(t, "--context", "team-b", "get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}"), "gadgets")
	require.Contains(t, admin.MustRun(t, "--context", "team-a", "get", "clusterrolebindings", "-o", "name"), "clusterrolebinding.rbac.authorization.k8s.io/cluster-admin\n")

	// An admin of team-a lets the group team-a edit namespace default.
	admin.MustRun(t, "--context", "team-a", "create", "rolebinding", "team-a-edit", "--clusterrole=edit", "--group=team-a", "-n", "default")
	a := alice.in(t, "team-a")
	poll(t, a, isYes, "alice to be let into team-a", "auth", "can-i", "create", "deployments", "-n", "default")
	a.MustRun(t, "create", "configmap", "settings", "-n", "default", "--from-literal=mode=fast")
	require.Equal(t, "fast", a.MustRun(t, "get", "configmap", "settings", "-n", "default", "-o", "jsonpath={.data.mode}"))
	require.Equal(t, `no - no RBAC rule of space "team-a" allows it`, strings.TrimSpace(canI(t, a, "create", "roles", "-n", "default")),
		"edit does not manage RBAC")
	require.True(t, strings.HasPrefix(canI(t, a, "get", "secrets", "-n", "kube-system"), "no"))
	require.Contains(t, a.MustFail(t, "get", "secrets", "-n", "kube-system"), `secrets is forbidden: User "alice" cannot list resource "secrets"`)
	list := a.MustRun(t, "auth", "can-i", "--list", "-n", "default")
	require.Contains(t, list, "configmaps", "can-i --list shows what edit grants")
	require.NotContains(t, list, "rolebindings.rbac.authorization.k8s.io", "can-i --list shows only what alice has")

	// The binding of team-a says nothing in team-b, and bob is no member.
	require.Contains(t, alice.in(t, "team-b").MustFail(t, rawConfigMaps("team-b")...), `user "alice" has no access to space "team-b"`)
	require.Contains(t, bob.in(t, "team-a").MustFail(t, rawConfigMaps("team-a")...), `user "bob" has no access to space "team-a"`)
	// Neither the wildcard space nor the root's token store.
	require.Contains(t, alice.in(t, "root").MustFail(t, "get", "--raw", "/spaces/*/api/v1/configmaps"), "may not use the wildcard space")
	require.Contains(t, alice.in(t, "root").MustFail(t, "get", "secrets", "-n", "kube-system"), "forbidden")

	// Nobody grants what they lack: with admin in namespace default, alice
	// may bind admin there, not cluster-admin, and no ClusterRoleBinding.
	admin.MustRun(t, "--context", "team-a", "create", "rolebinding", "alice-admin", "--clusterrole=admin", "--user=alice", "-n", "default")
	poll(t, a, isYes, "alice to be admin of namespace default", "auth", "can-i", "create", "rolebindings", "-n", "default")
	a.MustRun(t, "create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob", "-n", "default")
	require.Contains(t, a.MustFail(t, "create", "rolebinding", "bob-root", "--clusterrole=cluster-admin", "--user=bob", "-n", "default"),
		"attempting to grant RBAC permissions not currently held")
	require.Contains(t, a.MustFail(t, "create", "clusterrolebinding", "alice-root", "--clusterrole=cluster-admin", "--user=alice"), "forbidden")
	require.Contains(t, a.MustFail(t, "create", "role", "everything", "--verb=*", "--resource=*", "-n", "default"),
		"attempting to grant RBAC permissions not currently held")
	b := bob.in(t, "team-a")
	poll(t, b, isYes, "bob, bound by alice, to be let in", "auth", "can-i", "delete", "configmaps", "-n", "default")
	// Everyone lists the spaces they may use, and no other.
	out, err := bob.cli(t, "space", "list")
	require.NoError(t, err, out)
	require.Contains(t, out, "team-a")
	require.NotContains(t, out, "team-b")
	r := bob.in(t, "root")
	require.Equal(t, "team-a", r.MustRun(t, "get", "spaces", "-o", "jsonpath={.items[*].metadata.name}"))
	require.Equal(t, "team-a", r.MustRun(t, "get", "space", "team-a", "-o", "jsonpath={.metadata.name}"))
	require.Contains(t, r.MustFail(t, "get", "space", "team-b"), "forbidden")

	// The creator of a space is its admin: root-space RBAC lets alice
	// create spaces.
	admin.MustRun(t, "--context", "root", "create", "clusterrole", "space-creator", "--verb=create,get,list,watch", "--resource=spaces.tenancy.kubestellar.io")
	admin.MustRun(t, "--context", "root", "create", "clusterrolebinding", "alice-creates-spaces", "--clusterrole=space-creator", "--user=alice")
	out, err = alice.cli(t, "space", "create", "scratch")
	require.NoError(t, err, out)
	s := alice.in(t, "scratch")
	poll(t, s, isYes, "alice to be the admin of her space", "auth", "can-i", "*", "*")
	s.MustRun(t, "create", "namespace", "experiments")
	require.Contains(t, bob.in(t, "scratch").MustFail(t, rawConfigMaps("scratch")...), `user "bob" has no access to space "scratch"`)
	out, err = bob.cli(t, "space", "create", "bobs")
	require.Error(t, err, "bob may not create spaces: %s", out)
	require.Contains(t, out, "forbidden")
	// A space's CRDs are its own. edit in a namespace makes none; alice,
	// admin of her space, does, and it is served there only. The admin's
	// identical one in team-b shares it; alice's delete unbinds it from
	// her space and takes her objects, not team-b's.
	crd := filepath.Join(harness.RepoRoot(), "test", "manifests", "crds", "backups.yaml")
	require.Contains(t, a.MustFail(t, "apply", "-f", crd), "forbidden")
	s.MustRun(t, "apply", "-f", crd)
	backup := "apiVersion: ops.example.com/v1\nkind: Backup\nmetadata: {name: nightly, namespace: default}\nspec: {target: offsite, window: {start: 1, end: 5}}\n"
	pollStdin(t, s, backup, "alice's Backup to be created", "create", "-f", "-")
	require.NotContains(t, admin.MustRun(t, "--context", "team-b", "api-resources"), "backups", "team-b is served alice's CRD")
	require.Contains(t, admin.MustFail(t, "--context", "team-b", "get", "crd", "backups.ops.example.com"), "NotFound")
	admin.MustRun(t, "--context", "team-b", "apply", "-f", crd)
	pollStdin(t, admin, backup, "team-b's Backup to be created", "--context", "team-b", "create", "-f", "-")
	s.MustRun(t, "delete", "crd", "backups.ops.example.com")
	require.Equal(t, "offsite", admin.MustRun(t, "--context", "team-b", "get", "backup", "nightly", "-n", "default", "-o", "jsonpath={.spec.target}"),
		"alice's delete took team-b's Backup")
	require.NotContains(t, s.MustRun(t, "api-resources"), "backups")
	// Nor may alice make herself the owner of someone else's space.
	require.Contains(t, alice.in(t, "root").MustFail(t, "annotate", "space", "team-b", "tenancy.kubestellar.io/owner=alice", "--overwrite"), "forbidden")

	// ServiceAccounts: an identity of a space, with bound, expiring
	// tokens from the TokenRequest API, that works in that space only.
	a.MustRun(t, "create", "serviceaccount", "deployer", "-n", "default")
	admin.MustRun(t, "--context", "team-a", "create", "rolebinding", "deployer-view", "--clusterrole=view", "--serviceaccount=default:deployer", "-n", "default")
	saToken := strings.TrimSpace(a.MustRun(t, "create", "token", "deployer", "-n", "default", "--duration", "20m"))
	sa := &tenant{name: "deployer", dir: t.TempDir(), token: saToken, srv: srv}
	require.NoError(t, os.WriteFile(filepath.Join(sa.dir, "token"), []byte(saToken), 0o600))
	d := sa.in(t, "team-a")
	poll(t, d, isYes, "the ServiceAccount to read its space", "auth", "can-i", "list", "configmaps", "-n", "default")
	require.Equal(t, "fast", d.MustRun(t, "get", "configmap", "settings", "-n", "default", "-o", "jsonpath={.data.mode}"))
	require.Contains(t, d.MustRun(t, "auth", "whoami"), "system:serviceaccount:default:deployer")
	require.Contains(t, d.MustFail(t, "delete", "configmap", "settings", "-n", "default"), "forbidden")
	// The same name in another space is another account: the token is refused there.
	admin.MustRun(t, "--context", "team-b", "create", "serviceaccount", "deployer", "-n", "default")
	admin.MustRun(t, "--context", "team-b", "create", "rolebinding", "deployer-view", "--clusterrole=view", "--serviceaccount=default:deployer", "-n", "default")
	require.True(t, unauthorized(sa.in(t, "team-b").MustFail(t, "get", "configmaps", "-n", "default")), "the token of team-a's deployer in team-b")
	require.Contains(t, a.MustFail(t, "create", "token", "deployer", "-n", "default", "--duration", "720h"), "expirationSeconds")
	// Deleting the ServiceAccount ends its tokens.
	a.MustRun(t, "delete", "serviceaccount", "deployer", "-n", "default")
	require.True(t, unauthorized(d.MustFail(t, "get", "configmaps", "-n", "default")), "the token of a deleted ServiceAccount")

	// A revoked token stops at once.
	id := strings.SplitN(bob.token, ".", 2)[0]
	srv.CLI(t, "token", "revoke", id)
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, errOut, err := b.Run(ctx, "get", "configmaps", "-n", "default")
		last = errOut
		return err != nil && unauthorized(errOut), nil
	})
	require.NoError(t, err, "bob's revoked token still works: %s", last)
}

// canI runs kubectl auth can-i, which fails when the answer is no, and
// returns its answer.
func canI(t *testing.T, k harness.Kubectl, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := k.Run(ctx, append([]string{"auth", "can-i"}, args...)...)
	if err != nil && strings.TrimSpace(out) == "" {
		t.Fatalf("kubectl auth can-i %s: %v: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func isYes(s string) bool { return strings.TrimSpace(s) == "yes" }

// unauthorized tells whether kubectl's stderr says 401.
func unauthorized(stderr string) bool {
	return strings.Contains(stderr, "Unauthorized") || strings.Contains(stderr, "the server has asked for the client to provide credentials")
}

// TestPlacementsMoveOnlyWhatTheirWriterMayRead: the translator runs with
// the server's powers, but a placement copies only what the user who wrote
// it may read in the WDS: a user who may write EdgePlacements and read
// ConfigMaps, not Secrets, cannot send the WDS's Secrets to an edge.
func TestPlacementsMoveOnlyWhatTheirWriterMayRead(t *testing.T) {
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	admin.MustRun(t, "--context", "inv1", "apply", "-f", filepath.Join(harness.RepoRoot(), "docs", "examples", "placement", "inventory.yaml"))
	admin.MustRun(t, "--context", "wds1", "create", "namespace", "app")
	admin.MustRun(t, "--context", "wds1", "create", "configmap", "settings", "-n", "app", "--from-literal=mode=fast")
	admin.MustRun(t, "--context", "wds1", "create", "secret", "generic", "db-password", "-n", "app", "--from-literal=password=hunter2")
	admin.MustRun(t, "--context", "wds1", "create", "clusterrole", "placer", "--verb=get,list,watch,create,update,patch,delete",
		"--resource=edgeplacements.edge.kubestellar.io,configmaps,namespaces")
	admin.MustRun(t, "--context", "wds1", "create", "clusterrolebinding", "carol-places", "--clusterrole=placer", "--user=carol")
	carol := newTenant(t, srv, "carol").in(t, "wds1")
	require.True(t, strings.HasPrefix(canI(t, carol, "get", "secrets", "-n", "app"), "no"))

	ep := `apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: everything-in-app}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync:
  - {apiGroup: "", resources: [configmaps, secrets], namespaces: [app]}
  upsync:
  - {apiGroup: "", resources: [configmaps], namespaces: [reports]}
  - {apiGroup: "", resources: [secrets], namespaces: [reports]}
`
	carol.MustRunStdin(t, strings.NewReader(ep), "apply", "-f", "-")
	placedBy := admin.MustRun(t, "--context", "wds1", "get", "edgeplacement", "everything-in-app", "-o",
		`jsonpath={.metadata.annotations.edge\.kubestellar\.io/placed-by}`)
	require.Contains(t, placedBy, `"user":"carol"`, "the server records who wrote the placement")

	mailbox := poll(t, admin, func(s string) bool { return s != "" }, "edge1's mailbox",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	mb := []string{"--server", serverURL(t, srv) + "/spaces/" + mailbox}
	poll(t, admin, equals("fast"), "the ConfigMap, which carol may read, in the mailbox",
		append(mb, "get", "configmap", "settings", "-n", "app", "-o", "jsonpath={.data.mode}")...)
	out := poll(t, admin, func(s string) bool { return strings.HasPrefix(s, "True NotPermitted") },
		"the placement to say what it did not place",
		"--context", "wds1", "get", "edgeplacement", "everything-in-app", "-o",
		`jsonpath={.status.conditions[?(@.type=="Misconfigured")].status} {.status.conditions[?(@.type=="Misconfigured")].reason} {.status.conditions[?(@.type=="Misconfigured")].message}`)
	require.Contains(t, out, `secrets in namespace app are not placed: "carol", who wrote this placement, may not get them in space "wds1"`)
	// Upsync writes into the WDS: a clause for what carol may not write there is left out.
	require.Contains(t, out, `spec.upsync[1] is not applied: "carol", who wrote this placement, may not create secrets in namespace reports in space "wds1"`)
	require.Equal(t, "configmaps", admin.MustRun(t, append(mb, "get", "syncerconfig", "the-one", "-o", "jsonpath={.spec.upsync[*].resources[*]}")...),
		"only the upsync clause carol may write reaches the edge")
	require.Empty(t, strings.TrimSpace(admin.MustRun(t, append(mb, "get", "secrets", "-n", "app", "--ignore-not-found", "-o", "name")...)),
		"no Secret reached the mailbox")

	// The same placement written by an admin places the Secret too.
	admin.MustRunStdin(t, strings.NewReader(strings.Replace(ep, "everything-in-app", "by-admin", 1)), "--context", "wds1", "apply", "-f", "-")
	poll(t, admin, func(s string) bool { return strings.TrimSpace(s) == "secret/db-password" }, "the admin's placement to place the Secret",
		append(mb, "get", "secrets", "-n", "app", "--ignore-not-found", "-o", "name")...)
}

// serverURL is the server's base URL from its admin kubeconfig.
func serverURL(t *testing.T, srv *harness.Process) string {
	t.Helper()
	return srv.BaseURL()
}
