// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app"
	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// lockedBuffer is written by the CLI and, through logrus, by the server.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cli runs the kubestellar CLI in-process against the server and returns
// its stdout, stderr and exit code.
func cli(t *testing.T, s *harness.InProcess, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := app.Run(ctx, append(args, "--kubeconfig", s.Kubeconfig), app.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr})
	logrus.SetOutput(os.Stderr) // the CLI pointed the (global) logrus output at its stderr
	return stdout.String(), stderr.String(), code
}

func mustCLI(t *testing.T, s *harness.InProcess, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, s, args...)
	require.Zero(t, code, "kubestellar %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

// joinCommand parses what `synctarget create` prints.
func joinCommand(t *testing.T, out string) (center string, tok jointoken.Token) {
	t.Helper()
	fields := strings.Fields(out)
	require.Len(t, fields, 9, "one join command on stdout: %q", out)
	require.Equal(t, []string{"kubestellar", "syncer", "join", "--server"}, fields[:4])
	require.Equal(t, "--token", fields[5])
	require.Equal(t, "--sync-target", fields[7])
	tok, err := jointoken.Parse(fields[6])
	require.NoError(t, err)
	require.NotEmpty(t, tok.CAHash, "synctarget create prints the full form")
	return fields[4], tok
}

// syncerConfig is a client configuration for a space that carries only a
// syncer token.
func syncerConfig(t *testing.T, s *harness.InProcess, space, bearer string) *rest.Config {
	t.Helper()
	admin := s.RESTConfig(t, space)
	return &rest.Config{Host: admin.Host, BearerToken: bearer, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}, Timeout: 10 * time.Second}
}

func syncerKube(t *testing.T, s *harness.InProcess, space, bearer string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(syncerConfig(t, s, space, bearer))
	require.NoError(t, err)
	return c
}

func syncerDyn(t *testing.T, s *harness.InProcess, space, bearer string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(syncerConfig(t, s, space, bearer))
	require.NoError(t, err)
	return c
}

var syncTargetsGVR = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")

// getSyncTarget reads a SyncTarget with a syncer token.
func getSyncTarget(t *testing.T, s *harness.InProcess, bearer, inv, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	return syncerDyn(t, s, inv, bearer).Resource(syncTargetsGVR).Get(context.Background(), name, metav1.GetOptions{})
}

// waitUnauthorized polls until a token gets 401.
func waitUnauthorized(t *testing.T, s *harness.InProcess, bearer, inv, name, what string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := getSyncTarget(t, s, bearer, inv, name)
		return apierrors.IsUnauthorized(err), err
	}, what)
}

// insecureGet reads a URL of the server without a token or CA (what a
// syncer does before it trusts the CA).
func insecureGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test checks the hash
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// syncerInfo reads the syncer description endpoint with a bearer token.
func syncerInfo(t *testing.T, s *harness.InProcess, bearer string) (int, jointoken.SyncerInfo) {
	t.Helper()
	cfg := syncerConfig(t, s, spaces.Root, bearer)
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	resp, err := hc.Get(cfg.Host + jointoken.SyncerInfoPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	var info jointoken.SyncerInfo
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
	}
	return resp.StatusCode, info
}

// TestSyncerTokenAccess checks what a syncer token reaches: its SyncTarget
// and its mailbox, nothing else; and that revoked and expired tokens stop
// working.
func TestSyncerTokenAccess(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	ctx := context.Background()
	createEdgeSpaces(t, s)

	center, tok1 := joinCommand(t, mustCLI(t, s, "synctarget", "create", "edge1", "--inventory-space", "inv1", "--labels", "env=prod"))
	_, tok2 := joinCommand(t, mustCLI(t, s, "synctarget", "create", "edge2", "--inventory-space", "inv1"))
	require.Equal(t, s.RESTConfig(t, spaces.Root).Host, center)
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")
	bearer1 := tok1.String()

	// The CA is served to anyone, byte for byte what the token pins.
	code, caPEM := insecureGet(t, center+jointoken.CACertsPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, tok1.CAHash, jointoken.CAHash(caPEM))
	onDisk, err := os.ReadFile(filepath.Join(server.PKIDir(s.DataDir), certs.CACertFile))
	require.NoError(t, err)
	require.Equal(t, onDisk, caPEM)

	// The syncer learns who it is; nobody else gets an answer.
	eventually(t, 30*time.Second, func() (bool, error) {
		code, info := syncerInfo(t, s, bearer1)
		return code == http.StatusOK && info == jointoken.SyncerInfo{InventorySpace: "inv1", SyncTarget: "edge1", MailboxSpace: mb1}, nil
	}, "the syncer endpoint to describe edge1 and its mailbox %s", mb1)
	code, _ = syncerInfo(t, s, s.Config.AdminToken)
	require.Equal(t, http.StatusForbidden, code, "the admin is no syncer")
	code, _ = insecureGet(t, center+jointoken.SyncerInfoPath)
	require.Equal(t, http.StatusUnauthorized, code)

	// Its mailbox: read everything; write only what it upsyncs (what the
	// upsync clauses of its placements select, labelled as upsynced); delete
	// only that; never deletecollection.
	mailbox := syncerKube(t, s, mb1, bearer1)
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := mailbox.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
		return err == nil, err
	}, "the syncer to read its mailbox %s", mb1)
	upsyncedLabel := map[string]string{edgev2alpha1.UpsyncedLabel: "true"}
	_, err = mailbox.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "upsynced", Labels: upsyncedLabel}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "upsync before any placement asks for it: %v", err)
	require.NoError(t, c.Create(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "reports"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Upsync:            []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"configmaps"}, Namespaces: []string{"upsynced"}}},
	}}))
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := mailbox.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "upsynced", Labels: upsyncedLabel}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	}, "the syncer to create a namespace for upsynced objects once a placement asks for them")
	unlabelled := configMap("upsynced", "unlabelled", "v")
	_, err = mailbox.CoreV1().ConfigMaps("upsynced").Create(ctx, unlabelled, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "an object not labelled as upsynced: %v", err)
	fromEdge := configMap("upsynced", "from-edge", "v")
	fromEdge.Labels = upsyncedLabel
	cm, err := mailbox.CoreV1().ConfigMaps("upsynced").Create(ctx, fromEdge, metav1.CreateOptions{})
	require.NoError(t, err)
	cm.Data["v"] = "changed at the edge"
	cm, err = mailbox.CoreV1().ConfigMaps("upsynced").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	cm.Annotations = map[string]string{edgev2alpha1.SourceSpaceAnnotation: "wds1"}
	_, err = mailbox.CoreV1().ConfigMaps("upsynced").Update(ctx, cm, metav1.UpdateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a kubestellar annotation on an upsynced object: %v", err)
	err = mailbox.CoreV1().ConfigMaps("upsynced").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "deletecollection: %v", err)
	require.NoError(t, mailbox.CoreV1().ConfigMaps("upsynced").Delete(ctx, "from-edge", metav1.DeleteOptions{}))
	err = mailbox.CoreV1().Namespaces().Delete(ctx, "upsynced", metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "deleting a namespace of the mailbox: %v", err)
	_, err = mailbox.Discovery().ServerGroups()
	require.NoError(t, err, "discovery in the mailbox")

	// A syncer reads its mailbox's CRDs (copies of its WDSs'), never
	// writes them.
	crds := syncerDyn(t, s, mb1, bearer1).Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	_, err = crds.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	err = crds.Delete(ctx, "synctargets.edge.kubestellar.io", metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "deleting a CRD from the mailbox: %v", err)
	widget := widgetCRD()
	widget.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(widget)
	require.NoError(t, err)
	_, err = crds.Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "creating a CRD from the mailbox: %v", err)

	// Impersonation would be a way out: refused.
	impersonating := syncerConfig(t, s, mb1, bearer1)
	impersonating.Impersonate = rest.ImpersonationConfig{UserName: auth.AdminUser, Groups: []string{"system:masters"}}
	imp, err := kubernetes.NewForConfig(impersonating)
	require.NoError(t, err)
	_, err = imp.CoreV1().Secrets(auth.TokenNamespace).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "impersonation: %v", err)

	// Its SyncTarget: read it, list and watch it by name, write its
	// status; nothing more.
	st, err := getSyncTarget(t, s, bearer1, "inv1", "edge1")
	require.NoError(t, err)
	inv := syncerDyn(t, s, "inv1", bearer1).Resource(syncTargetsGVR)
	own := metav1.ListOptions{FieldSelector: "metadata.name=edge1"}
	mine, err := inv.List(ctx, own)
	require.NoError(t, err)
	require.Len(t, mine.Items, 1)
	w, err := inv.Watch(ctx, own)
	require.NoError(t, err)
	w.Stop()
	_, err = inv.List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "listing every SyncTarget of the inventory: %v", err)
	_, err = inv.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=edge2"})
	require.True(t, apierrors.IsForbidden(err), "watching another SyncTarget: %v", err)
	_, err = inv.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=edge2"})
	require.True(t, apierrors.IsForbidden(err), "listing all but another: %v", err)
	require.NoError(t, unstructured.SetNestedField(st.Object, "test-syncer", "status", "syncerVersion"))
	_, err = inv.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Not the status fields the server owns: where its mailbox is, which
	// server holds its tunnel.
	for field, value := range map[string]string{"mailboxSpace": "wds1", "tunnelServer": "https://attacker.example:6443"} {
		st, err := getSyncTarget(t, s, bearer1, "inv1", "edge1")
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(st.Object, value, "status", field))
		_, err = inv.UpdateStatus(ctx, st, metav1.UpdateOptions{})
		require.True(t, apierrors.IsForbidden(err), "a syncer setting status.%s: %v", field, err)
	}
	got := &edgev2alpha1.SyncTarget{}
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge1"}, got))
	require.Equal(t, "test-syncer", got.Status.SyncerVersion)
	st, err = getSyncTarget(t, s, bearer1, "inv1", "edge1")
	require.NoError(t, err)
	st.SetLabels(map[string]string{"name": "edge1", "hijacked": "true"})
	_, err = inv.Update(ctx, st, metav1.UpdateOptions{})
	require.True(t, apierrors.IsForbidden(err), "updating its own SyncTarget's labels: %v", err)
	_, err = getSyncTarget(t, s, bearer1, "inv1", "edge2")
	require.True(t, apierrors.IsForbidden(err), "reading another SyncTarget: %v", err)
	_, err = syncerDyn(t, s, "inv1", bearer1).Resource(edgev2alpha1.SchemeGroupVersion.WithResource("locations")).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "listing Locations: %v", err)

	// Everything else is forbidden, with a reason naming the user and the space.
	for space, what := range map[string]string{mb2: "another SyncTarget's mailbox", "wds1": "a WDS", spaces.Root: "the root space"} {
		_, err := syncerKube(t, s, space, bearer1).CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "%s: %v", what, err)
		require.ErrorContains(t, err, fmt.Sprintf(`user "system:kubestellar:syncer:inv1:edge1" has no access to space %q`, space))
	}
	_, err = syncerKube(t, s, spaces.Root, bearer1).CoreV1().Secrets(auth.TokenNamespace).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "the token Secrets: %v", err)
	_, err = syncerKube(t, s, spaces.Wildcard, bearer1).CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "the wildcard space: %v", err)

	// The bare form works too; a token pinning another CA does not.
	_, err = getSyncTarget(t, s, tok1.Bearer(), "inv1", "edge1")
	require.NoError(t, err)
	otherCA := tok1
	otherCA.CAHash = jointoken.CAHash([]byte("another server's CA"))
	_, err = getSyncTarget(t, s, otherCA.String(), "inv1", "edge1")
	require.True(t, apierrors.IsUnauthorized(err), "a token for another server: %v", err)
	wrongSecret := tok1
	wrongSecret.Secret = strings.Repeat("0", jointoken.SecretLength)
	_, err = getSyncTarget(t, s, wrongSecret.String(), "inv1", "edge1")
	require.True(t, apierrors.IsUnauthorized(err), "a wrong secret: %v", err)

	// The admin token keeps working as before.
	_, err = kube(t, s, mb1).CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)

	// Revoked: 401 from then on; the other SyncTarget's token is unaffected.
	out := mustCLI(t, s, "token", "revoke", tok1.ID)
	require.Contains(t, out, "token "+tok1.ID+" revoked")
	waitUnauthorized(t, s, bearer1, "inv1", "edge1", "the revoked token to get 401")
	_, err = getSyncTarget(t, s, tok2.String(), "inv1", "edge2")
	require.NoError(t, err)

	// A token with a TTL works for that long, then gets 401.
	short := strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge2", "--ttl", "1s", "--description", "short-lived"))
	shortTok, err := jointoken.Parse(short)
	require.NoError(t, err)
	waitUnauthorized(t, s, short, "inv1", "edge2", "the expired token to get 401")
	eventually(t, 10*time.Second, func() (bool, error) {
		return strings.Contains(mustCLI(t, s, "token", "list"), "(expired)"), nil
	}, "token list to show the token as expired")
	list := mustCLI(t, s, "token", "list")
	require.Contains(t, list, shortTok.ID)
	require.NotContains(t, list, shortTok.Secret)
	require.NotContains(t, list, tok2.Secret)
	_, err = getSyncTarget(t, s, tok2.String(), "inv1", "edge2")
	require.NoError(t, err, "the token without a TTL still works")
}

// TestSyncTargetAndTokenCommands checks the CLI: what `synctarget create`
// makes, `token list`, `synctarget delete`, and clear errors for bad input.
func TestSyncTargetAndTokenCommands(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	ctx := context.Background()
	createTypedSpace(t, s, "inv1", tenancyv1alpha1.SpaceTypeInventory)

	out, errOut, code := cli(t, s, "synctarget", "create", "edge1", "--inventory-space", "inv1", "--labels", "env=prod,region=east",
		"--location", "edge1-loc", "--server", "https://edge-gateway.example.com:7443/spaces/inv1/", "--ttl", "24h")
	require.Zero(t, code, errOut)
	center, tok := joinCommand(t, out)
	require.Equal(t, "https://edge-gateway.example.com:7443", center)
	require.Contains(t, errOut, "--kubeconfig", "a hint for edge clusters other than the default")
	require.True(t, strings.HasSuffix(strings.TrimSpace(out), "--sync-target edge1"))

	st := &edgev2alpha1.SyncTarget{}
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge1"}, st))
	require.Equal(t, map[string]string{"env": "prod", "region": "east", "name": "edge1"}, st.Labels)
	loc := &edgev2alpha1.Location{}
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge1-loc"}, loc))
	require.Equal(t, "prod", loc.Labels["env"])
	require.Equal(t, "east", loc.Labels["region"])
	require.Equal(t, edgev2alpha1.GroupVersionResource{Group: "edge.kubestellar.io", Version: "v2alpha1", Resource: "synctargets"}, loc.Spec.Resource)
	require.Equal(t, map[string]string{"name": "edge1"}, loc.Spec.InstanceSelector.MatchLabels)

	// Again: labels are added, the SyncTarget stays, another token is made.
	out = mustCLI(t, s, "synctarget", "create", "edge1", "--inventory-space", "inv1", "--labels", "tier=gold", "--location", "edge1-loc")
	_, tok2 := joinCommand(t, out)
	require.NotEqual(t, tok.ID, tok2.ID)
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge1"}, st))
	require.Equal(t, map[string]string{"env": "prod", "region": "east", "name": "edge1", "tier": "gold"}, st.Labels)

	// A Location someone else made is left alone, and kept on delete.
	require.NoError(t, c.Create(in("inv1"), &edgev2alpha1.Location{
		ObjectMeta: metav1.ObjectMeta{Name: "edge2", Labels: map[string]string{"handmade": "true"}},
		Spec: edgev2alpha1.LocationSpec{Resource: edgev2alpha1.GroupVersionResource{Group: "edge.kubestellar.io", Version: "v2alpha1", Resource: "synctargets"},
			InstanceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "edge2"}}}}))
	_, errOut, code = cli(t, s, "synctarget", "create", "edge2", "--inventory-space", "inv1", "--labels", "env=dev")
	require.Zero(t, code, errOut)
	require.Contains(t, errOut, "not made by this command")
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge2"}, loc))
	require.Equal(t, map[string]string{"handmade": "true"}, loc.Labels)

	out = mustCLI(t, s, "token", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Equal(t, []string{"ID", "SYNC-TARGET", "USER", "GROUPS", "EXPIRES", "DESCRIPTION"}, strings.Fields(lines[0]))
	var row []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); f[0] == tok.ID {
			row = f
		}
	}
	require.GreaterOrEqual(t, len(row), 5, out)
	require.Equal(t, []string{tok.ID, "inv1/edge1", "-", "-"}, row[:4], out)
	require.NotContains(t, out, tok.Secret)
	require.NotContains(t, out, tok2.Secret)

	token3 := strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge1", "--description", "spare"))
	tok3, err := jointoken.Parse(token3)
	require.NoError(t, err)
	require.Equal(t, tok.CAHash, tok3.CAHash)
	require.Contains(t, mustCLI(t, s, "token", "list"), "spare")
	// A whole token names itself for revoke.
	require.Contains(t, mustCLI(t, s, "token", "revoke", token3), "token "+tok3.ID+" revoked")

	// Bad input gets errors naming the flag.
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"synctarget", "create", "edge9"}, wantErr: "--inventory-space is required"},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "nope"}, wantErr: `--inventory-space: there is no space "nope"`},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "Bad_Space"}, wantErr: "--inventory-space: invalid space name"},
		{args: []string{"synctarget", "create", "Edge9", "--inventory-space", "inv1"}, wantErr: `invalid SyncTarget name "Edge9"`},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--labels", "bad key=x"}, wantErr: `--labels: invalid key "bad key"`},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--labels", "k=bad value"}, wantErr: `--labels: invalid value "bad value"`},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--labels", "novalue"}, wantErr: `"--labels"`},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--labels", "name=other"}, wantErr: "--labels: name=other conflicts"},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--server", "edge-gateway:7443"}, wantErr: "--server:"},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--ttl", "-1h"}, wantErr: "--ttl: -1h0m0s is negative"},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--ttl", "soon"}, wantErr: `"--ttl"`},
		{args: []string{"synctarget", "create", "edge9", "--inventory-space", "inv1", "--location", "Bad Location"}, wantErr: "--location: invalid name"},
		{args: []string{"synctarget", "delete", "edge9"}, wantErr: "--inventory-space is required"},
		{args: []string{"synctarget", "delete", "edge9", "--inventory-space", "inv1"}, wantErr: `there is no SyncTarget "edge9" in space "inv1"`},
		{args: []string{"token", "create"}, wantErr: "--sync-target INVENTORY-SPACE/NAME (a syncer token) or --user NAME (a user token) is required"},
		{args: []string{"token", "create", "--user", "system:admin"}, wantErr: `--user/--group: the user name "system:admin" starts with "system:"`},
		{args: []string{"token", "create", "--user", "alice", "--group", "system:masters"}, wantErr: `--user/--group: the group "system:masters" starts with "system:"`},
		{args: []string{"token", "create", "--user", "alice", "--sync-target", "inv1/edge1"}, wantErr: "--sync-target and --user exclude each other"},
		{args: []string{"token", "create", "--group", "team-a"}, wantErr: "--group needs --user"},
		{args: []string{"token", "create", "--sync-target", "edge1"}, wantErr: `--sync-target: "edge1" is not INVENTORY-SPACE/NAME`},
		{args: []string{"token", "create", "--sync-target", "nope/edge1"}, wantErr: `--sync-target: there is no space "nope"`},
		{args: []string{"token", "create", "--sync-target", "inv1/edge9"}, wantErr: `--sync-target: there is no SyncTarget "edge9" in space "inv1"`},
		{args: []string{"token", "create", "--sync-target", "inv1/edge1", "--ttl", "-5s"}, wantErr: "--ttl: -5s is negative"},
		{args: []string{"token", "revoke", "zzzzzz"}, wantErr: "token zzzzzz: no such token"},
		{args: []string{"token", "revoke", "not-a-token"}, wantErr: "neither a token id"},
	} {
		out, errOut, code := cli(t, s, tc.args...)
		require.Equal(t, 1, code, "kubestellar %s should fail\nstdout: %s", strings.Join(tc.args, " "), out)
		require.Contains(t, errOut, tc.wantErr, "kubestellar %s", strings.Join(tc.args, " "))
		require.Empty(t, out, "kubestellar %s prints nothing on stdout when it fails", strings.Join(tc.args, " "))
	}

	// Delete: tokens revoked, our Location and the SyncTarget gone, the
	// mailbox with it.
	mailbox := mailboxOf(t, c, "inv1", "edge1")
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := getSyncTarget(t, s, tok.String(), "inv1", "edge1")
		return err == nil, err
	}, "the token to work")
	out, errOut, code = cli(t, s, "synctarget", "delete", "edge1", "--inventory-space", "inv1")
	require.Zero(t, code, errOut)
	require.Contains(t, out, `SyncTarget "edge1" deleted`)
	require.Contains(t, errOut, tok.ID)
	require.Contains(t, errOut, tok2.ID)
	require.Contains(t, errOut, `deleted Location "edge1-loc"`)
	require.True(t, apierrors.IsNotFound(c.Get(in("inv1"), client.ObjectKey{Name: "edge1"}, &edgev2alpha1.SyncTarget{})))
	require.True(t, apierrors.IsNotFound(c.Get(in("inv1"), client.ObjectKey{Name: "edge1-loc"}, &edgev2alpha1.Location{})))
	_, err = kube(t, s, spaces.Root).CoreV1().Secrets(auth.TokenNamespace).Get(ctx, auth.TokenSecretName(tok.ID), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the token Secret is gone: %v", err)
	_, err = dyn(t, s, spaces.Root).Resource(spacesGVR()).Get(ctx, mailbox, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the mailbox is gone: %v", err)
	require.NotContains(t, mustCLI(t, s, "token", "list"), "inv1/edge1")

	mustCLI(t, s, "synctarget", "delete", "edge2", "--inventory-space", "inv1")
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge2"}, loc), "a Location made otherwise stays")
}
