// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestTenantLimits replays, with the built binary, kubectl and curl, the
// flood an audit made in one space it owned: ConfigMaps of 2.9 MB, one
// after another, all accepted until the server had grown by gigabytes.
// Now a tenant space's bytes, objects and watches are bounded: past a
// limit, a create is refused with 403 (a watch with 429) naming the limit
// and where it was set; deleting makes room; another tenant, and the
// admin, are not touched; the admin raises the limits of one space with a
// SpaceQuota in the root space, which the tenant cannot write; the Space's
// status shows usage and limits.
func TestTenantLimits(t *testing.T) {
	srv := harness.StartBinary(t, "", "--space-byte-limit", "12Mi", "--space-object-limit", "60", "--space-watch-limit", "3")
	admin := srv.Kubectl()
	admin.MustRun(t, "--context", "root", "create", "clusterrole", "space-creator", "--verb=create,get,list,watch", "--resource=spaces.tenancy.kubestellar.io")
	admin.MustRun(t, "--context", "root", "create", "clusterrolebinding", "tenants-create-spaces", "--clusterrole=space-creator", "--user=alice", "--user=bob")
	alice, bob := newTenant(t, srv, "alice"), newTenant(t, srv, "bob")
	for _, owner := range []struct {
		who   *tenant
		space string
	}{{alice, "team-a"}, {bob, "team-b"}} {
		out, err := owner.who.cli(t, "space", "create", owner.space)
		require.NoError(t, err, out)
		poll(t, owner.who.in(t, owner.space), isYes, owner.who.name+" to be the admin of "+owner.space, "auth", "can-i", "*", "*")
	}
	a, b := alice.in(t, "team-a"), bob.in(t, "team-b")
	adminA := filepath.Join(t.TempDir(), "team-a.kubeconfig")
	require.NoError(t, os.WriteFile(adminA, []byte(srv.CLIStdout(t, "kubeconfig", "--space", "team-a")), 0o600))
	adminInA := harness.Kubectl{Kubeconfig: adminA}

	// 2.9 MB of data, as in the audit.
	big := filepath.Join(t.TempDir(), "blob")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("x", 2900*1000)), 0o600))

	var refusal string
	t.Run("a space's bytes are bounded", func(t *testing.T) {
		made := 0
		for i := range 10 {
			_, stderr, err := a.Run(t.Context(), "create", "configmap", fmt.Sprintf("blob-%d", i), "-n", "default", "--from-file", big)
			if err != nil {
				refusal = stderr
				break
			}
			made++
		}
		require.NotEmpty(t, refusal, "ten ConfigMaps of 2.9 MB, 29 MB, in a space bounded to 12Mi")
		require.Equal(t, 4, made, "12Mi holds four ConfigMaps of 2.9 MB: the fifth is refused")
		require.Contains(t, refusal, "is forbidden")
		require.Contains(t, refusal, `space "team-a" stores`)
		require.Contains(t, refusal, "past its limit (12582912, set by the server's --space-byte-limit)")
		// Updates that grow are bounded too; one that shrinks passes.
		grow := filepath.Join(t.TempDir(), "grow.json")
		require.NoError(t, os.WriteFile(grow, []byte(`{"data":{"more":"`+strings.Repeat("y", 1500*1000)+`"}}`), 0o600))
		stderr := a.MustFail(t, "patch", "configmap", "blob-0", "-n", "default", "--type=merge", "--patch-file", grow)
		require.Contains(t, stderr, "past its limit", "1.5 MB more in a space 1 MB short of its limit")
		a.MustRun(t, "patch", "configmap", "blob-3", "-n", "default", "--type=json", "-p", `[{"op":"remove","path":"/data/blob"}]`)
	})

	t.Run("another tenant and the admin are not touched", func(t *testing.T) {
		b.MustRun(t, "create", "configmap", "blob", "-n", "default", "--from-file", big)
		adminInA.MustRun(t, "create", "configmap", "admins-blob", "-n", "default", "--from-file", big)
		adminInA.MustRun(t, "delete", "configmap", "admins-blob", "-n", "default")
	})

	t.Run("deleting makes room", func(t *testing.T) {
		a.MustRun(t, "delete", "configmap", "blob-0", "blob-1", "-n", "default")
		// The count follows the datastore's watch: poll, not once.
		poll(t, a, func(s string) bool { return strings.Contains(s, "created") }, "room in team-a once two ConfigMaps are gone",
			"create", "configmap", "blob-4", "-n", "default", "--from-file", big)
	})

	t.Run("a space's objects are bounded", func(t *testing.T) {
		var stderr string
		for i := range 80 {
			var err error
			if _, stderr, err = a.Run(t.Context(), "create", "configmap", fmt.Sprintf("small-%d", i), "-n", "default"); err != nil {
				break
			}
		}
		require.Contains(t, stderr, "is forbidden", "80 more objects in a space bounded to 60")
		require.Contains(t, stderr, "objects, its limit (60, set by the server's --space-object-limit)")
	})

	t.Run("the Space shows its usage and limits", func(t *testing.T) {
		poll(t, admin, func(s string) bool {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			return err == nil && n >= 60
		}, "team-a's Space to show its 60 objects", "--context", "root", "get", "space", "team-a", "-o", "jsonpath={.status.usage.objects}")
		limits := admin.MustRun(t, "--context", "root", "get", "space", "team-a", "-o", "jsonpath={.status.limits}")
		require.JSONEq(t, `{"bytes":"12Mi","objects":60,"watches":3}`, limits)
		wide := admin.MustRun(t, "--context", "root", "get", "spaces", "-o", "wide")
		require.Contains(t, wide, "OBJECTS")
	})

	t.Run("a space's watches are bounded", func(t *testing.T) {
		var watches []<-chan string
		for range 3 {
			watches = append(watches, a.Lines(t, "get", "configmaps", "-n", "default", "--watch-only", "-o", "name"))
		}
		// A watch is open once it sees a delete: delete until each has.
		seen := make([]bool, len(watches))
		deadline := time.Now().Add(time.Minute)
		for i := 0; slices.Contains(seen, false); i++ {
			require.True(t, time.Now().Before(deadline), "watches that saw a delete: %v", seen)
			a.MustRun(t, "delete", "configmap", fmt.Sprintf("small-%d", i), "-n", "default")
			for j, lines := range watches {
				select {
				case line := <-lines:
					require.True(t, strings.HasPrefix(line, "configmap/small-"), "watch %d: %s", j, line)
					seen[j] = true
				case <-time.After(time.Second):
				}
			}
		}
		code, body := watchAnswer(t, srv, alice.token, "/spaces/team-a/api/v1/namespaces/default/configmaps?watch=true")
		require.Equal(t, "429", code, "a fourth watch in team-a: %s", body)
		require.Contains(t, body, `space \"team-a\" has 3 watches open on this server, its limit (3, set by the server's --space-watch-limit)`)
		// bob's space has its own count.
		code, _ = watchAnswer(t, srv, bob.token, "/spaces/team-b/api/v1/namespaces/default/configmaps?watch=true")
		require.Equal(t, "200", code, "a watch in team-b")
	})

	t.Run("the admin raises one space's limits; tenants cannot", func(t *testing.T) {
		quota := `{"apiVersion":"tenancy.kubestellar.io/v1alpha1","kind":"SpaceQuota","metadata":{"name":"team-a-large"},
			"spec":{"spaces":["team-a"],"limits":{"objects":1000,"bytes":"64Mi"}}}`
		stderr := a.MustFailStdin(t, strings.NewReader(quota), "create", "-f", "-")
		require.Contains(t, stderr, "SpaceQuotas are created in the root space")
		code, body := curlAs(t, srv, alice.token, http.MethodPost, "/apis/tenancy.kubestellar.io/v1alpha1/spacequotas", quota)
		require.Equal(t, "403", code, "alice's SpaceQuota in the root space: %s", body)

		admin.MustRunStdin(t, strings.NewReader(quota), "--context", "root", "create", "-f", "-")
		poll(t, a, func(s string) bool { return strings.Contains(s, "created") }, "team-a's create under its SpaceQuota",
			"create", "configmap", "blob-5", "-n", "default", "--from-file", big)
		a.MustRun(t, "create", "configmap", "small-after-quota", "-n", "default")
		// bob's space keeps the defaults.
		for _, name := range []string{"blob-2", "blob-3", "blob-4"} {
			b.MustRun(t, "create", "configmap", name, "-n", "default", "--from-file", big)
		}
		stderr = b.MustFail(t, "create", "configmap", "blob-5", "-n", "default", "--from-file", big)
		require.Contains(t, stderr, "--space-byte-limit")
		poll(t, admin, func(s string) bool {
			return strings.Contains(s, `"objects":1000`) && strings.Contains(s, `"bytes":"64Mi"`)
		},
			"team-a's Space to show its SpaceQuota's limits", "--context", "root", "get", "space", "team-a", "-o", "jsonpath={.status.limits}")
	})
}

// watchAnswer starts a watch with a bearer token and returns its status and
// what came within two seconds: a refused watch answers at once, one
// accepted streams until curl gives up.
func watchAnswer(t *testing.T, srv *harness.Process, bearer, path string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", "-sS", "--max-time", "2", "-w", "\n%{http_code}", "--cacert", filepath.Join(srv.DataDir, "pki", "ca.crt"),
		"-H", "Authorization: Bearer "+bearer, srv.BaseURL()+path).Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 28) {
		require.NoError(t, err, "curl %s", path)
	}
	i := strings.LastIndex(string(out), "\n")
	return string(out[i+1:]), string(out[:max(i, 0)])
}

// TestMailboxLimits replays the amplification a tenant's own inventory
// allows: one ConfigMap of 300 KB, within the WDS's limits, placed on six
// SyncTargets of the tenant's own (no edge needed: the server makes every
// mailbox and copy) is 1.8 MB the server stores; a thousand SyncTargets
// would make it 300 MB, and a WDS at its 8 MiB limit 8 GiB. Now what the
// mailboxes of an inventory space hold together is bounded: copies past
// the limit are left out, the EdgePlacement says so naming the limit, the
// inventory's Space shows what its mailboxes hold, and a SpaceQuota of
// the admin's raises the limit, after which the rest are placed. The
// SyncTargets of a tenant's inventory are bounded too: each costs the
// server a mailbox space.
func TestMailboxLimits(t *testing.T) {
	srv := harness.StartBinary(t, "", "--space-mailbox-byte-limit", "1Mi", "--space-synctarget-limit", "6")
	admin := srv.Kubectl()
	admin.MustRun(t, "--context", "root", "create", "clusterrole", "space-creator", "--verb=create,get,list,watch", "--resource=spaces.tenancy.kubestellar.io")
	admin.MustRun(t, "--context", "root", "create", "clusterrolebinding", "tenants-create-spaces", "--clusterrole=space-creator", "--user=alice")
	alice := newTenant(t, srv, "alice")
	for _, args := range [][]string{{"inv-a", "--type", "inventory"}, {"wds-a", "--type", "wds", "--inventory-space", "inv-a"}} {
		out, err := alice.cli(t, append([]string{"space", "create"}, args...)...)
		require.NoError(t, err, out)
		poll(t, alice.in(t, args[0]), isYes, "alice to be the admin of "+args[0], "auth", "can-i", "*", "*")
	}
	inv, wds := alice.in(t, "inv-a"), alice.in(t, "wds-a")

	const targets = 6
	var inventory strings.Builder
	for i := range targets {
		fmt.Fprintf(&inventory, `apiVersion: edge.kubestellar.io/v2alpha1
kind: SyncTarget
metadata: {name: edge%[1]d, labels: {name: edge%[1]d}}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: Location
metadata: {name: edge%[1]d, labels: {env: prod}}
spec:
  resource: {group: edge.kubestellar.io, version: v2alpha1, resource: synctargets}
  instanceSelector: {matchLabels: {name: edge%[1]d}}
---
`, i)
	}
	inv.MustRunStdin(t, strings.NewReader(inventory.String()), "apply", "-f", "-")
	// Admission counts each create at once: a seventh is refused, naming
	// the limit, with room for other objects.
	refused := inv.MustFailStdin(t, strings.NewReader("apiVersion: edge.kubestellar.io/v2alpha1\nkind: SyncTarget\nmetadata: {name: edge6}\n"), "create", "-f", "-")
	require.Contains(t, refused, `space "inv-a" holds 6 SyncTargets, its limit (6, set by the server's --space-synctarget-limit)`)
	inv.MustRun(t, "create", "configmap", "not-a-synctarget")
	blob := filepath.Join(t.TempDir(), "blob")
	require.NoError(t, os.WriteFile(blob, []byte(strings.Repeat("x", 300*1000)), 0o600))
	wds.MustRun(t, "create", "configmap", "blob", "-n", "default", "--from-file", blob)
	const placement = `apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: blob}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [default], objectNames: [blob]}]
`
	wds.MustRunStdin(t, strings.NewReader(placement), "apply", "-f", "-")

	mailboxes := make([]string, targets)
	for i := range targets {
		mailboxes[i] = poll(t, inv, func(s string) bool { return s != "" }, "a mailbox for edge"+fmt.Sprint(i),
			"get", "synctarget", fmt.Sprint("edge", i), "-o", "jsonpath={.status.mailboxSpace}")
	}
	cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
	require.NoError(t, err)
	base := cfg.Clusters["root"].Server
	placed := func() int {
		n := 0
		for _, mb := range mailboxes {
			if _, _, err := admin.Run(t.Context(), "--server", base+"/spaces/"+mb, "get", "configmap", "blob", "-n", "default"); err == nil {
				n++
			}
		}
		return n
	}
	condition := `jsonpath={.status.conditions[?(@.type=="Propagated")].reason}: {.status.conditions[?(@.type=="Propagated")].message}`

	t.Run("copies past the inventory's mailbox limit are left out, and the placement says why", func(t *testing.T) {
		said := poll(t, wds, func(s string) bool { return strings.HasPrefix(s, "MailboxLimitExceeded") }, "the placement to name the mailbox limit",
			"get", "edgeplacement", "blob", "-o", condition)
		require.Contains(t, said, `the mailboxes of inventory space "inv-a" hold what its limit allows (1048576, set by the server's --space-mailbox-byte-limit)`)
		// Three copies of 300 KB fit in 1 MiB with the mailboxes' own
		// objects (namespaces, SyncerConfigs); a fourth would not.
		require.Equal(t, 3, placed(), "copies of 300 KB in the mailboxes of an inventory bounded to 1 MiB")
		shown := poll(t, admin, func(s string) bool { return s != "" && s != " " }, "inv-a's Space to show its mailboxes' usage",
			"--context", "root", "get", "space", "inv-a", "-o", "jsonpath={.status.usage.mailboxBytes} {.status.limits.mailboxBytes}")
		var used int
		var limit string
		_, err := fmt.Sscan(shown, &used, &limit)
		require.NoError(t, err, shown)
		require.Equal(t, "1Mi", limit)
		require.Greater(t, used, 900*1000, "three copies")
		require.LessOrEqual(t, used, 1<<20)
		require.Equal(t, "6 6", admin.MustRun(t, "--context", "root", "get", "space", "inv-a", "-o", "jsonpath={.status.usage.syncTargets} {.status.limits.syncTargets}"))
	})

	t.Run("an admin's own inventory is not bounded so", func(t *testing.T) {
		srv.CLI(t, "space", "create", "fleet", "--type", "inventory")
		srv.CLI(t, "space", "create", "ops", "--type", "wds", "--inventory-space", "fleet")
		admin.MustRunStdin(t, strings.NewReader(inventory.String()), "--context", "fleet", "apply", "-f", "-")
		admin.MustRun(t, "--context", "ops", "create", "configmap", "blob", "-n", "default", "--from-file", blob)
		admin.MustRunStdin(t, strings.NewReader(placement), "--context", "ops", "apply", "-f", "-")
		poll(t, admin, equals("Propagated: every selected object is in its mailboxes"), "the admin's six copies",
			"--context", "ops", "get", "edgeplacement", "blob", "-o", condition)
		require.Equal(t, "6", admin.MustRun(t, "--context", "ops", "get", "edgeplacement", "blob", "-o", "jsonpath={.status.matchingLocationCount}"))
		admin.MustRunStdin(t, strings.NewReader("apiVersion: edge.kubestellar.io/v2alpha1\nkind: SyncTarget\nmetadata: {name: edge6}\n"), "--context", "fleet", "create", "-f", "-")
	})

	t.Run("the admin raises the limit with a SpaceQuota: the rest are placed", func(t *testing.T) {
		admin.MustRunStdin(t, strings.NewReader(`apiVersion: tenancy.kubestellar.io/v1alpha1
kind: SpaceQuota
metadata: {name: inv-a-fleet}
spec:
  spaces: [inv-a]
  limits: {mailboxBytes: 4Mi}
`), "--context", "root", "apply", "-f", "-")
		// The translator looks again at a mailbox it left copies out of
		// (mailboxLimitRetry: 30 s at most).
		pollFor(t, 3*time.Minute, wds, equals("Propagated: every selected object is in its mailboxes"), "every copy to be placed",
			"get", "edgeplacement", "blob", "-o", condition)
		require.Equal(t, targets, placed())
	})
}
