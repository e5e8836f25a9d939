// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestHelmAsTenant: a real third-party client, helm (built from its Go
// module), is a tenant like any other. A user bound to admin in one
// namespace of a space installs, upgrades, lists and uninstalls a chart
// there; everywhere else (another namespace, all namespaces, another
// space) helm fails cleanly with the server's reason and leaves nothing
// behind.
func TestHelmAsTenant(t *testing.T) {
	helmBin := harness.Helm(t) // skips under -short, fails if helm cannot be built
	srv := harness.StartBinary(t, "")
	admin := srv.Kubectl()
	srv.CLI(t, "space", "create", "team-a")
	srv.CLI(t, "space", "create", "team-b")
	admin.MustRun(t, "--context", "team-a", "create", "namespace", "apps")
	admin.MustRun(t, "--context", "team-a", "create", "namespace", "other")
	admin.MustRun(t, "--context", "team-b", "create", "namespace", "apps")
	carol := newTenant(t, srv, "carol")
	admin.MustRun(t, "--context", "team-a", "create", "rolebinding", "carol-admin", "--clusterrole=admin", "--user=carol", "-n", "apps")
	inTeamA := carol.in(t, "team-a")
	poll(t, inTeamA, isYes, "carol to be admin of namespace apps", "auth", "can-i", "create", "secrets", "-n", "apps")
	require.True(t, strings.HasPrefix(canI(t, inTeamA, "create", "secrets", "-n", "other"), "no"), "carol is admin in apps only")

	chart := filepath.Join(harness.RepoRoot(), "test", "manifests", "charts", "web")
	helm := newHelmCLI(t, helmBin, inTeamA.Kubeconfig)
	t.Logf("%s", helm.mustRun(t, "version", "--short"))
	// objects is what admin sees of a release's objects in a namespace of team-a.
	objects := func(namespace, release string) string {
		return admin.MustRun(t, "--context", "team-a", "-n", namespace, "get", "configmaps,deployments,services",
			"-l", "app.kubernetes.io/instance="+release, "-o", "name")
	}
	inApps := func(args ...string) string {
		t.Helper()
		return admin.MustRun(t, append([]string{"--context", "team-a", "-n", "apps"}, args...)...)
	}

	// Install: the chart's objects and helm's release record land in
	// team-a's namespace apps, as carol's.
	out := helm.mustRun(t, "install", "web", chart, "-n", "apps", "--wait=false")
	require.Contains(t, out, "STATUS: deployed")
	require.Equal(t, "configmap/web-settings\ndeployment.apps/web\nservice/web\n", objects("apps", "web"))
	require.Equal(t, "hello", inApps("get", "configmap", "web-settings", "-o", "jsonpath={.data.greeting}"))
	require.Equal(t, "1", inApps("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"))
	require.Equal(t, "80 ClusterIP", inApps("get", "service", "web", "-o", "jsonpath={.spec.ports[0].port} {.spec.type}"))
	require.Equal(t, "web apps Helm", inApps("get", "deployment", "web", "-o",
		`jsonpath={.metadata.annotations.meta\.helm\.sh/release-name} {.metadata.annotations.meta\.helm\.sh/release-namespace} {.metadata.labels.app\.kubernetes\.io/managed-by}`),
		"helm marks what it owns")
	require.Equal(t, "helm.sh/release.v1 helm web deployed 1",
		inApps("get", "secret", "sh.helm.release.v1.web.v1", "-o", "jsonpath={.type} {.metadata.labels.owner} {.metadata.labels.name} {.metadata.labels.status} {.metadata.labels.version}"),
		"helm keeps its release in a Secret of the release's namespace")
	require.Equal(t, []helmRelease{{Name: "web", Namespace: "apps", Revision: "1", Status: "deployed", Chart: "web-0.1.0"}},
		helm.list(t, "-n", "apps"))

	// Upgrade: revision 2, with the new values.
	out = helm.mustRun(t, "upgrade", "web", chart, "-n", "apps", "--wait=false", "--set", "greeting=goodbye", "--set", "replicas=3")
	require.Contains(t, out, "REVISION: 2")
	require.Equal(t, "goodbye", inApps("get", "configmap", "web-settings", "-o", "jsonpath={.data.greeting}"))
	require.Equal(t, "3", inApps("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"))
	require.Equal(t, "sh.helm.release.v1.web.v1=superseded sh.helm.release.v1.web.v2=deployed",
		strings.TrimSpace(inApps("get", "secrets", "-l", "owner=helm,name=web", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.status} {end}`)))
	require.Equal(t, []helmRelease{{Name: "web", Namespace: "apps", Revision: "2", Status: "deployed", Chart: "web-0.1.0"}},
		helm.list(t, "-n", "apps"))
	require.Contains(t, helm.mustRun(t, "get", "values", "web", "-n", "apps"), "greeting: goodbye")

	// Another namespace of the same space: refused, with the server's
	// reason, and nothing is left there.
	errOut := helm.mustFail(t, "install", "web2", chart, "-n", "other", "--wait=false")
	require.Contains(t, errOut, `is forbidden: User "carol" cannot`)
	require.Contains(t, errOut, `in the namespace "other": no RBAC rule of space "team-a" allows it`)
	require.Empty(t, admin.MustRun(t, "--context", "team-a", "-n", "other", "get", "configmaps,deployments,services,secrets",
		"--field-selector", "metadata.name!=kube-root-ca.crt", "-o", "name"), "a refused install leaves nothing in namespace other (but the server's root CA)")

	// All namespaces: helm lists its Secrets at the cluster scope, which
	// carol may not read.
	errOut = helm.mustFail(t, "list", "-A")
	require.Contains(t, errOut, `secrets is forbidden: User "carol" cannot list resource "secrets" in API group "" at the cluster scope`)

	// Another space, where no binding names carol: helm cannot even look.
	// Its first request, GET /version, gets 403 with the reason (user
	// "carol" has no access to space "team-b", which kubectl get --raw
	// shows), but client-go's discovery reads that answer raw and reports
	// only "unknown".
	inTeamB := carol.in(t, "team-b")
	helmB := newHelmCLI(t, helmBin, inTeamB.Kubeconfig)
	errOut = helmB.mustFail(t, "install", "web", chart, "-n", "apps", "--wait=false")
	require.Contains(t, errOut, "Kubernetes cluster unreachable")
	errOut = helmB.mustFail(t, "list", "-n", "apps")
	require.Contains(t, errOut, "Kubernetes cluster unreachable")
	require.Empty(t, admin.MustRun(t, "--context", "team-b", "get", "configmaps,deployments,services,secrets", "-A",
		"--field-selector", "metadata.name!=kube-root-ca.crt,metadata.name!=kubernetes", "-o", "name"),
		"team-b holds nothing of carol's release (but what the server puts in every space)")

	// Uninstall: the objects and helm's record go.
	require.Contains(t, helm.mustRun(t, "uninstall", "web", "-n", "apps"), `release "web" uninstalled`)
	poll(t, admin, equals(""), "the release's objects to be deleted",
		"--context", "team-a", "-n", "apps", "get", "configmaps,deployments,services", "-l", "app.kubernetes.io/instance=web", "-o", "name")
	poll(t, admin, equals(""), "helm's release Secrets to be deleted",
		"--context", "team-a", "-n", "apps", "get", "secrets", "-l", "owner=helm", "-o", "name")
	require.Empty(t, helm.list(t, "-n", "apps"))
}

// helmCLI runs the helm binary with a kubeconfig, and with helm's own
// state (repositories, caches, plugins) in a directory of the test's.
type helmCLI struct {
	bin string
	env []string
}

func newHelmCLI(t *testing.T, bin, kubeconfig string) helmCLI {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HELM_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"KUBECONFIG="+kubeconfig,
		"KUBECACHEDIR="+filepath.Join(home, "kube-cache"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	return helmCLI{bin: bin, env: env}
}

func (h helmCLI) run(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func (h helmCLI) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := h.run(args...)
	require.NoError(t, err, "helm %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

// mustFail runs helm, expects a clean failure (exit status 1, one error
// message, no crash) and returns its stderr.
func (h helmCLI) mustFail(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := h.run(args...)
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "helm %s was expected to fail with an exit status, got %v\nstdout: %s\nstderr: %s",
		strings.Join(args, " "), err, out, errOut)
	require.Equal(t, 1, exitErr.ExitCode(), "helm %s\nstderr: %s", strings.Join(args, " "), errOut)
	require.True(t, strings.HasPrefix(errOut, "Error: "), "helm %s fails with an error message\nstderr: %s", strings.Join(args, " "), errOut)
	require.NotContains(t, errOut, "panic:")
	require.NotContains(t, errOut, "goroutine ")
	t.Logf("helm %s (refused as expected): %s", strings.Join(args, " "), strings.TrimSpace(errOut))
	return errOut
}

// helmRelease is the part of `helm list -o json` that the test checks.
type helmRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Revision  string `json:"revision"`
	Status    string `json:"status"`
	Chart     string `json:"chart"`
}

func (h helmCLI) list(t *testing.T, args ...string) []helmRelease {
	t.Helper()
	var releases []helmRelease
	out := h.mustRun(t, append([]string{"list", "-o", "json"}, args...)...)
	require.NoError(t, json.Unmarshal([]byte(out), &releases), out)
	return releases
}
