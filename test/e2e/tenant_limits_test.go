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
