// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
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

// curlAs sends one request with a bearer token, a body (if not empty) and
// extra headers, and returns the HTTP status and the body.
func curlAs(t *testing.T, srv *harness.Process, bearer, method, path, data string, headers ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"-sS", "-X", method, "-w", "\n%{http_code}", "--cacert", filepath.Join(srv.DataDir, "pki", "ca.crt"),
		"-H", "Authorization: Bearer " + bearer}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	if data != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data", data)
	}
	out, err := exec.CommandContext(ctx, "curl", append(args, srv.BaseURL()+path)...).Output()
	require.NoError(t, err, "curl %s %s", method, path)
	i := strings.LastIndex(string(out), "\n")
	return string(out[i+1:]), string(out[:max(i, 0)])
}

// httpsClient is a client that trusts the server's CA and sends no token:
// a browser's view of the dashboard.
func httpsClient(t *testing.T, srv *harness.Process) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM([]byte(readFile(t, filepath.Join(srv.DataDir, "pki", "ca.crt")))))
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// jsonField returns a string field of a JSON object.
func jsonField(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	v, ok := m[field].(string)
	require.True(t, ok, "%s in %s", field, body)
	return v
}

// selfReview is the body of a SelfSubjectReview (kubectl auth whoami).
const selfReview = `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`

// TestTenantAttacks: an ordinary user who may create spaces owns one
// (cluster-admin there) and tries, with the real kubectl and curl, what
// an audit found that ownership granted outside it: becoming the server,
// an admin or a syncer by impersonation; reaching the dashboard, the edge
// proxy, /metrics and /debug under her space's prefix; reusing an
// impersonation her space allows in another space; learning other
// spaces' API groups through discovery in YAML; making the server call a
// URL of her choosing; naming a space like a mailbox. Each is refused by
// the server, and what she may do in her own space keeps working.
func TestTenantAttacks(t *testing.T) {
	srv := harness.StartBinary(t, "", "--spaces-per-user", "2")
	admin := srv.Kubectl()
	admin.MustRun(t, "--context", "root", "create", "clusterrole", "space-creator", "--verb=create,get,list,watch", "--resource=spaces.tenancy.kubestellar.io")
	admin.MustRun(t, "--context", "root", "create", "clusterrolebinding", "alice-creates-spaces", "--clusterrole=space-creator", "--user=alice")
	alice := newTenant(t, srv, "alice")
	out, err := alice.cli(t, "space", "create", "team-a")
	require.NoError(t, err, out)
	a := alice.in(t, "team-a")
	poll(t, a, isYes, "alice to be the admin of her space", "auth", "can-i", "*", "*")

	// Another owner's space, with a ConfigMap, a CRD of its own, and a
	// ServiceAccount ci/deployer that may read; an inventory with an edge.
	srv.CLI(t, "space", "create", "team-b")
	admin.MustRun(t, "--context", "team-b", "create", "configmap", "plans", "-n", "default", "--from-literal", "secret=b")
	admin.MustRun(t, "--context", "team-b", "create", "namespace", "ci")
	admin.MustRun(t, "--context", "team-b", "create", "serviceaccount", "deployer", "-n", "ci")
	admin.MustRun(t, "--context", "team-b", "create", "rolebinding", "deployer-reads", "--clusterrole=view", "--serviceaccount=ci:deployer", "-n", "default")
	admin.MustRun(t, "--context", "team-b", "apply", "-f", filepath.Join(harness.RepoRoot(), "test", "manifests", "crds", "backups.yaml"))
	srv.CLI(t, "space", "create", "inv-b", "--type", "inventory")
	join := srv.JoinCommand(t, "edge-b", "--inventory-space", "inv-b")
	syncerToken := flagValue(t, join, "--token")
	mailbox := poll(t, admin, func(s string) bool { return strings.Contains(s, "-mb-") }, "edge-b's mailbox",
		"--context", "inv-b", "get", "synctarget", "edge-b", "-o", "jsonpath={.status.mailboxSpace}")

	// alice's own ServiceAccount, of the same name as team-b's.
	a.MustRun(t, "create", "namespace", "ci")
	a.MustRun(t, "create", "serviceaccount", "deployer", "-n", "ci")

	t.Run("impersonation yields nothing the server honours", func(t *testing.T) {
		for _, as := range [][]string{
			{"--as", "kubestellar-admin", "--as-group", "system:masters"},
			{"--as", "alice", "--as-group", "system:masters"},
			{"--as", "system:apiserver"},
			{"--as", "system:kubestellar:syncer:inv-b:edge-b", "--as-group", "kubestellar:syncers"},
		} {
			stderr := a.MustFail(t, append([]string{"get", "configmaps", "-n", "default"}, as...)...)
			require.Contains(t, stderr, "Forbidden", "kubectl get configmaps %v", as)
		}
		// The reason, which kubectl does not print.
		for _, as := range [][]string{
			{"Impersonate-User: kubestellar-admin", "Impersonate-Group: system:masters"},
			{"Impersonate-User: alice", "Impersonate-Group: system:masters"},
			{"Impersonate-User: system:apiserver"},
			{"Impersonate-User: system:kubestellar:syncer:inv-b:edge-b", "Impersonate-Group: kubestellar:syncers"},
		} {
			code, body := curlAs(t, srv, alice.token, http.MethodGet, "/spaces/team-a/api/v1/namespaces/default/configmaps", "", as...)
			require.Equal(t, "403", code, "%v: %s", as, body)
			require.Contains(t, body, "is refused: the server's own identities", "%v", as)
		}
		// The extras the server's authenticators set: a ServiceAccount's
		// space, a syncer's SyncTarget.
		for _, extra := range []string{"Impersonate-Extra-kubestellar.io%2Fspace: team-b", "Impersonate-Extra-kubestellar.io%2Fsync-target: edge-b"} {
			code, body := curlAs(t, srv, alice.token, http.MethodPost, "/spaces/team-a/apis/authentication.k8s.io/v1/selfsubjectreviews", selfReview, "Impersonate-User: alice", extra)
			require.Equal(t, "403", code, "%s: %s", extra, body)
			require.Contains(t, body, "is refused")
		}
		// What her space's RBAC grants still works: a user name it names,
		// and its own ServiceAccount.
		require.Contains(t, a.MustRun(t, "auth", "whoami", "--as", "carol"), "carol")
		require.Contains(t, a.MustRun(t, "auth", "whoami", "--as", "system:serviceaccount:ci:deployer"), "system:serviceaccount:ci:deployer")
	})

	t.Run("an impersonation allowed in one space is not allowed in another", func(t *testing.T) {
		// team-b binds its own ci/deployer; alice may impersonate team-a's.
		// Asked right after each other, within any cache's lifetime.
		// The same request in both: inside a space its path is the same.
		b := alice.in(t, "team-b")
		for range 3 {
			a.MustFail(t, "get", "configmap", "plans", "-n", "default", "--as", "system:serviceaccount:ci:deployer")
			stderr := b.MustFail(t, "get", "configmap", "plans", "-n", "default", "--as", "system:serviceaccount:ci:deployer")
			require.Contains(t, stderr, "Forbidden", "team-b's ConfigMap through team-a's impersonation")
		}
	})

	t.Run("the server's endpoints are not under a space", func(t *testing.T) {
		edgePath := "/kubestellar/v1/edges/inv-b/edge-b/proxy/api/v1/namespaces/default/secrets"
		for _, probe := range []struct{ method, path string }{
			{http.MethodGet, edgePath},
			{http.MethodPost, edgePath},
			{http.MethodPost, "/dashboard/api/login-codes"},
			{http.MethodGet, "/metrics"},
			{http.MethodGet, "/debug/pprof/goroutine?debug=2"},
			{http.MethodGet, "/debug/pprof/profile?seconds=1"},
			{http.MethodPut, "/debug/flags/v"},
			{http.MethodGet, "/kubestellar/v1/syncer"},
			{http.MethodGet, "/kubestellar/v1/tunnel"},
		} {
			code, body := curlAs(t, srv, alice.token, probe.method, "/spaces/team-a"+probe.path, "")
			require.Equal(t, "404", code, "%s /spaces/team-a%s: %s", probe.method, probe.path, body)
			require.Contains(t, body, "is not served in a space")
		}
		// In the root space they are the server's RBAC's: alice has none.
		for _, path := range []string{edgePath, "/metrics", "/debug/pprof/"} {
			code, body := curlAs(t, srv, alice.token, http.MethodGet, path, "")
			require.Equal(t, "403", code, "GET %s: %s", path, body)
		}
		// Not even the edge's own syncer reaches another space's prefix.
		code, _ := curlAs(t, srv, syncerToken, http.MethodGet, "/spaces/"+mailbox+"/metrics", "")
		require.Equal(t, "404", code)
	})

	t.Run("an inventory space's RBAC says who reaches its edges", func(t *testing.T) {
		edgePath := "/kubestellar/v1/edges/inv-b/edge-b/proxy/api"
		code, _ := curlAs(t, srv, alice.token, http.MethodGet, edgePath, "")
		require.Equal(t, "403", code)
		admin.MustRun(t, "--context", "inv-b", "create", "clusterrole", "edge-b-reader", "--verb=get",
			"--resource=synctargets.edge.kubestellar.io/proxy", "--resource-name=edge-b")
		admin.MustRun(t, "--context", "inv-b", "create", "clusterrolebinding", "alice-reads-edge-b", "--clusterrole=edge-b-reader", "--user=alice")
		// Authorized now: the edge is not connected, which only an
		// authorized caller learns.
		var body string
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			code, body = curlAs(t, srv, alice.token, http.MethodGet, edgePath, "")
			return code == "503", nil
		})
		require.NoError(t, err, "GET %s once inv-b's RBAC grants it: %s %s", edgePath, code, body)
		require.Contains(t, body, "has no tunnel open")
		code, _ = curlAs(t, srv, alice.token, http.MethodPost, edgePath+"/v1/namespaces/default/configmaps", "{}")
		require.Equal(t, "403", code, "get only, not create")
	})

	t.Run("a ServiceAccount keeps its space", func(t *testing.T) {
		saToken := strings.TrimSpace(a.MustRun(t, "create", "token", "deployer", "-n", "ci", "--duration", "20m"))
		// Its token is refused outside its space, the dashboard's login
		// codes included (served in the root space only).
		code, _ := curlAs(t, srv, saToken, http.MethodPost, "/dashboard/api/login-codes", "")
		require.Equal(t, "401", code)
		code, _ = curlAs(t, srv, saToken, http.MethodPost, "/spaces/team-a/dashboard/api/login-codes", "")
		require.Equal(t, "404", code)
		// In its space it says which space it is of.
		code, body := curlAs(t, srv, saToken, http.MethodPost, "/spaces/team-a/apis/authentication.k8s.io/v1/selfsubjectreviews", selfReview)
		require.Equal(t, "201", code, body)
		require.Regexp(t, `"kubestellar.io/space":\s*\[\s*"team-a"\s*\]`, body)
	})

	t.Run("a dashboard session is the user's, not a name", func(t *testing.T) {
		// No session as the admin through her space's impersonation.
		code, body := curlAs(t, srv, alice.token, http.MethodPost, "/spaces/team-a/dashboard/api/login-codes", "",
			"Impersonate-User: kubestellar-admin", "Impersonate-Group: system:masters")
		require.NotEqual(t, "201", code, "a login code as the admin: %s", body)
		// alice's own session sees her space and not team-b's objects.
		code, body = curlAs(t, srv, alice.token, http.MethodPost, "/dashboard/api/login-codes", "")
		require.Equal(t, "201", code, body)
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		client := httpsClient(t, srv)
		client.Jar = jar
		link := jsonField(t, body, "path")
		resp, err := client.Get(srv.BaseURL() + link)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp, err = client.Get(srv.BaseURL() + "/dashboard/api/workload?" + url.Values{"space": {"team-b"}, "resource": {"v1/configmaps"},
			"namespace": {"default"}, "name": {"plans"}}.Encode())
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode, "team-b's ConfigMap through alice's dashboard session: %s", got)
		require.NotContains(t, string(got), `"secret"`)
	})

	t.Run("discovery shows no other space's groups, in any representation", func(t *testing.T) {
		for _, accept := range []string{"application/json", "application/yaml", "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
			"application/vnd.kubernetes.protobuf"} {
			code, body := curlAs(t, srv, alice.token, http.MethodGet, "/spaces/team-a/apis", "", "Accept: "+accept)
			require.Equal(t, "200", code, "%s: %s", accept, body)
			require.NotContains(t, body, "ops.example.com", "team-b's CRD group in team-a's discovery as %s", accept)
		}
		code, body := curlAs(t, srv, strings.TrimSpace(readFile(t, filepath.Join(srv.DataDir, "admin.token"))), http.MethodGet, "/spaces/team-b/apis", "", "Accept: application/yaml")
		require.Equal(t, "200", code)
		require.Contains(t, body, "ops.example.com", "team-b's own discovery in YAML")
	})

	t.Run("the server calls no URL a tenant names", func(t *testing.T) {
		crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: probes.scan.example.com}
spec:
  group: scan.example.com
  scope: Namespaced
  names: {plural: probes, singular: probe, kind: Probe}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "https://127.0.0.1:2379/convert"}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`
		stderr := a.MustFailStdin(t, strings.NewReader(crd), "create", "-f", "-")
		require.Contains(t, stderr, "spec.conversion.strategy Webhook is refused")
		webhook := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: scan}
webhooks:
- name: scan.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: "https://127.0.0.1:6443/"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
`
		stderr = a.MustFailStdin(t, strings.NewReader(webhook), "create", "-f", "-")
		require.Contains(t, stderr, "would be stored and never act")
	})

	t.Run("no space named like the root space or a mailbox", func(t *testing.T) {
		stderr := alice.in(t, "root").MustFailStdin(t, strings.NewReader("apiVersion: tenancy.kubestellar.io/v1alpha1\nkind: Space\nmetadata: {name: root}\n"), "create", "-f", "-")
		require.Contains(t, stderr, `"root" is the root space`)
		out, err := alice.cli(t, "space", "create", strings.Replace(mailbox, "inv-b", "inv-x", 1))
		require.Error(t, err, out)
		require.Contains(t, out, "are the server's, for the mailboxes of SyncTargets")
	})

	t.Run("a WDS names only inventories whose owner lets it", func(t *testing.T) {
		out, err := alice.cli(t, "space", "create", "wds-a", "--type", "wds", "--inventory-space", "inv-b")
		require.Error(t, err, "alice's WDS on another owner's edges: %s", out)
		require.Contains(t, out, `may not place workloads on the edges of inventory space "inv-b"`)
	})

	t.Run("a user owns a bounded number of spaces", func(t *testing.T) {
		out, err := alice.cli(t, "space", "create", "team-a-scratch")
		require.NoError(t, err, out)
		out, err = alice.cli(t, "space", "create", "team-a-third")
		require.Error(t, err, "a third space past --spaces-per-user 2: %s", out)
		require.Contains(t, out, "the most a user may (the server's --spaces-per-user 2)")
		srv.CLI(t, "space", "create", "admins-own", "--type", "wds")
	})

	t.Run("the SQLite files are the server's only", func(t *testing.T) {
		matches, err := filepath.Glob(filepath.Join(srv.DataDir, "db", "*"))
		require.NoError(t, err)
		require.NotEmpty(t, matches)
		for _, m := range matches {
			info, err := os.Stat(m)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), m)
		}
	})
}
