// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// reviewKubectl runs the real kubectl as one identity: a kubeconfig of its
// own (so that no discovery cache is shared with another identity) holding
// only its token, pointed at a space with --server.
type reviewKubectl struct {
	k    harness.Kubectl
	base string
}

func newReviewKubectl(t *testing.T, s *harness.InProcess, token string) reviewKubectl {
	t.Helper()
	admin := s.RESTConfig(t, spaces.Root)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubestellar"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["me"] = &clientcmdapi.Context{Cluster: "kubestellar", AuthInfo: "me", Namespace: "default"}
	cfg.CurrentContext = "me"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return reviewKubectl{k: harness.Kubectl{Kubeconfig: path}, base: admin.Host}
}

// canI runs kubectl auth can-i ARGS in a space and returns its stdout and
// exit code; kubectl exits 0 for yes and 1 for no.
func (r reviewKubectl) canI(t *testing.T, space string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// kubectl takes no flags before "auth": --server goes after the arguments.
	argv := append(append([]string{"auth", "can-i"}, args...), "--server", r.base+spaces.URLPath(space))
	out, errOut, err := r.k.Run(ctx, argv...)
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	require.NotContains(t, errOut, "Error from server", "kubectl %s\nstdout: %s", strings.Join(argv, " "), out)
	return strings.TrimSpace(out), code
}

// requireCanI checks a yes-or-no answer, and its exit code.
func (r reviewKubectl) requireCanI(t *testing.T, want, space string, args ...string) string {
	t.Helper()
	out, code := r.canI(t, space, args...)
	answer, _, _ := strings.Cut(out, " ")
	require.Equal(t, want, answer, "kubectl auth can-i %s in space %s: %s", strings.Join(args, " "), space, out)
	if want == "yes" {
		require.Zero(t, code, out)
	} else {
		require.Equal(t, 1, code, out)
	}
	return out
}

// TestReviewKubectlAuthCanI asks the server what identities may do, with the
// real kubectl auth can-i, in each kind of space: the admin may do
// everything; a syncer what its SyncTarget needs, in its own spaces only.
func TestReviewKubectlAuthCanI(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	createTypedSpace(t, s, "inv1", tenancyv1alpha1.SpaceTypeInventory)
	createTypedSpace(t, s, "wds1", tenancyv1alpha1.SpaceTypeWDS, "inv1")
	_, tok := joinCommand(t, mustCLI(t, s, "synctarget", "create", "edge1", "--inventory-space", "inv1"))
	mb1 := mailboxOf(t, c, "inv1", "edge1")
	syncerName := "system:kubestellar:syncer:inv1:edge1"

	admin := newReviewKubectl(t, s, s.Config.AdminToken)
	for _, space := range []string{spaces.Root, "inv1", "wds1"} {
		admin.requireCanI(t, "yes", space, "*", "*")
		admin.requireCanI(t, "yes", space, "delete", "secrets", "-n", "kube-system")
		admin.requireCanI(t, "yes", space, "get", "/metrics")
	}
	admin.requireCanI(t, "yes", "inv1", "patch", "synctargets/edge1")
	list, code := admin.canI(t, "inv1", "--list")
	require.Zero(t, code)
	require.Regexp(t, `(?m)^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$`, list, "the admin may do everything")
	require.Regexp(t, `(?m)^\s+\[\*\]\s+\[\]\s+\[\*\]$`, list, "on every non-resource URL")

	syncer := newReviewKubectl(t, s, tok.String())
	// Its inventory space: its SyncTarget's status, and reading its
	// SyncTarget (by name), no other.
	eventually(t, 30*time.Second, func() (bool, error) {
		out, _ := syncer.canI(t, "inv1", "patch", "synctargets/edge1", "--subresource=status")
		return out == "yes", nil
	}, "the syncer token to work")
	syncer.requireCanI(t, "yes", "inv1", "update", "synctargets/edge1", "--subresource=status")
	syncer.requireCanI(t, "yes", "inv1", "list", "synctargets/edge1")
	syncer.requireCanI(t, "yes", "inv1", "watch", "synctargets/edge1")
	syncer.requireCanI(t, "no", "inv1", "list", "synctargets")
	syncer.requireCanI(t, "no", "inv1", "get", "synctargets/edge2")
	syncer.requireCanI(t, "no", "inv1", "patch", "synctargets/edge1")
	syncer.requireCanI(t, "no", "inv1", "patch", "synctargets/edge2", "--subresource=status")
	syncer.requireCanI(t, "no", "inv1", "create", "locations")
	syncer.requireCanI(t, "no", "inv1", "get", "secrets")
	// Its mailbox: the usual verbs, not deletecollection, not impersonation.
	syncer.requireCanI(t, "yes", mb1, "update", "configmaps")
	syncer.requireCanI(t, "no", mb1, "deletecollection", "configmaps")
	syncer.requireCanI(t, "no", mb1, "impersonate", "users")
	// Anywhere else: no, with a reason naming it and the space; a space that
	// does not exist answers alike.
	for _, space := range []string{"wds1", spaces.Root, "no-such-space"} {
		out := syncer.requireCanI(t, "no", space, "get", "configmaps")
		require.Contains(t, out, fmt.Sprintf(`user %q has no access to space %q`, syncerName, space))
	}
	// kubectl auth can-i --list shows the truth.
	list, code = syncer.canI(t, "inv1", "--list")
	require.Zero(t, code)
	require.Regexp(t, `(?m)^synctargets\.edge\.kubestellar\.io/status\s+\[\]\s+\[edge1\]\s+\[get update patch\]$`, list)
	require.Regexp(t, `(?m)^synctargets\.edge\.kubestellar\.io\s+\[\]\s+\[edge1\]\s+\[get list watch\]$`, list)
	require.Regexp(t, `(?m)^selfsubjectaccessreviews\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]$`, list)
	require.Regexp(t, `(?m)^\s+\[/api\]\s+\[\]\s+\[get\]$`, list)
	require.NotContains(t, list, "*.*")
	list, code = syncer.canI(t, mb1, "--list")
	require.Zero(t, code)
	require.Regexp(t, `(?m)^\*\.\*\s+\[\]\s+\[\]\s+\[get list watch create update patch delete\]$`, list)
	list, code = syncer.canI(t, "wds1", "--list")
	require.Zero(t, code)
	require.NotContains(t, list, "synctargets")
	require.NotContains(t, list, "*.*")
	require.NotContains(t, list, "/api")
}

// TestReviewSubjectAccessReviews checks the reviews about somebody else:
// the admin asks what a syncer may do; a syncer may not ask about others.
func TestReviewSubjectAccessReviews(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	ctx := context.Background()
	createTypedSpace(t, s, "inv1", tenancyv1alpha1.SpaceTypeInventory)
	_, tok := joinCommand(t, mustCLI(t, s, "synctarget", "create", "edge1", "--inventory-space", "inv1"))
	mailboxOf(t, c, "inv1", "edge1")
	syncer := principal.SyncerUser("inv1", "edge1")
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range syncer.Extra {
		extra[k] = v
	}
	spec := func(subresource string) authorizationv1.SubjectAccessReviewSpec {
		return authorizationv1.SubjectAccessReviewSpec{User: syncer.Name, Groups: syncer.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "patch", Group: "edge.kubestellar.io", Resource: "synctargets", Subresource: subresource, Name: "edge1", Namespace: "default"}}
	}
	reviews := kube(t, s, "inv1").AuthorizationV1()
	sar, err := reviews.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec("status")}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, sar.Status.Allowed, "%+v", sar.Status)
	sar, err = reviews.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec("")}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.False(t, sar.Status.Allowed)
	require.True(t, sar.Status.Denied)
	require.Contains(t, sar.Status.Reason, syncer.Name)
	local, err := reviews.LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: spec("status")}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, local.Status.Allowed, "%+v", local.Status)
	// The same question in another space gets another answer.
	sar, err = kube(t, s, spaces.Root).AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec("status")}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.False(t, sar.Status.Allowed)
	// Served like any group: discovery and OpenAPI (kubectl explain).
	resources := harness.Kubectl{Kubeconfig: s.Kubeconfig}.MustRun(t, "api-resources", "--api-group=authorization.k8s.io", "-o", "name")
	require.ElementsMatch(t, []string{"localsubjectaccessreviews.authorization.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
		"selfsubjectrulesreviews.authorization.k8s.io", "subjectaccessreviews.authorization.k8s.io"}, strings.Fields(resources))
	_, err = kube(t, s, "inv1").Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/authorization.k8s.io/v1").DoRaw(ctx)
	require.NoError(t, err)

	// Malformed: refused with the field named.
	_, err = reviews.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "x"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	require.ErrorContains(t, err, "exactly one of resourceAttributes and nonResourceAttributes")

	// A syncer asks about itself only.
	asSyncer := syncerKube(t, s, "inv1", tok.String()).AuthorizationV1()
	eventually(t, 30*time.Second, func() (bool, error) {
		self, err := asSyncer.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: spec("status").ResourceAttributes}}, metav1.CreateOptions{})
		return err == nil && self.Status.Allowed, err
	}, "the syncer to learn it may patch its status")
	_, err = asSyncer.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec("status")}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a syncer asking about another identity: %v", err)
	_, err = asSyncer.LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: spec("status")}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a syncer asking about another identity: %v", err)
}
