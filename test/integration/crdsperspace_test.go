// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// Two definitions of widgets.example.com that have nothing in common but
// the name: team A's, v1 with a size; team B's, v1alpha1 and v2 (stored),
// with a color, a short name and a printer column of its own.
const (
	widgetsOfA = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: the size of team A's widget
            properties:
              size: {type: integer, minimum: 1}
`
	widgetsOfB = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wdg]}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {colour: {type: string}}}
  - name: v2
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: the color of team B's widget
            properties:
              color: {type: string, enum: [red, blue]}
`
	// A squatter's junk: anything goes.
	widgetsOfSquatter = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Junk, listKind: JunkList}
  versions:
  - name: v9
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
)

// spaceKubectl runs the real kubectl in a space, with a kubeconfig of its
// own (and so a discovery cache of its own).
func spaceKubectl(t *testing.T, s *harness.InProcess, space string) harness.Kubectl {
	t.Helper()
	cfg := s.RESTConfig(t, space)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubestellar"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "kubestellar", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "admin"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return harness.Kubectl{Kubeconfig: path}
}

// applyYAML applies a manifest with kubectl, with extra flags.
func applyYAML(t *testing.T, k harness.Kubectl, manifest string, flags ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := k.RunStdin(ctx, strings.NewReader(manifest), append([]string{"apply", "-f", "-"}, flags...)...)
	return out + errOut, err
}

// established waits until a space's CRD is established.
func established(t *testing.T, s *harness.InProcess, space, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
	require.NoError(t, err)
	var crd *apiextensionsv1.CustomResourceDefinition
	eventually(t, time.Minute, func() (bool, error) {
		got, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		crd = got
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}, "CRD %s established in space %s", name, space)
	return crd
}

// TestCRDsPerSpace: with --crds-per-space, two spaces define one CRD name
// differently and use both at once through the real kubectl (apply,
// strict validation, server-side apply, get with each one's columns,
// explain); a squatter's junk definition in a third space changes nothing
// for them; an update and a delete in one space leave the other's
// instances and schema as they were; all of it survives a restart.
func TestCRDsPerSpace(t *testing.T) {
	dataDir := t.TempDir()
	perSpace := func(o *server.Options) { o.CRDsPerSpace = true }
	s := harness.StartInProcessWith(t, dataDir, perSpace)
	for _, name := range []string{"team-a", "team-b", "squat"} {
		createSpace(t, s, name)
	}
	a, b, squat := spaceKubectl(t, s, "team-a"), spaceKubectl(t, s, "team-b"), spaceKubectl(t, s, "squat")

	// The squatter first: it takes nothing from anyone.
	out, err := applyYAML(t, squat, widgetsOfSquatter)
	require.NoError(t, err, out)
	established(t, s, "squat", "widgets.example.com")

	for _, c := range []struct {
		k        harness.Kubectl
		space    string
		manifest string
	}{{a, "team-a", widgetsOfA}, {b, "team-b", widgetsOfB}} {
		out, err := applyYAML(t, c.k, c.manifest)
		require.NoError(t, err, "a CRD another space defines differently is created: %s", out)
		crd := established(t, s, c.space, "widgets.example.com")
		require.Equal(t, "Widget", crd.Status.AcceptedNames.Kind, "names are judged within the space")
	}

	widgetA := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 3}\n"
	widgetB := "apiVersion: example.com/v2\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {color: red}\n"
	eventually(t, time.Minute, func() (bool, error) {
		out, err := applyYAML(t, a, widgetA, "--validate=strict")
		return err == nil, errorf(err, out)
	}, "team A's widget applied")
	eventually(t, time.Minute, func() (bool, error) {
		out, err := applyYAML(t, b, widgetB, "--validate=strict", "--server-side")
		return err == nil, errorf(err, out)
	}, "team B's widget applied server-side")

	// Each space validates by its own schema.
	out, err = applyYAML(t, a, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x, namespace: default}\nspec: {color: red}\n", "--validate=strict")
	require.Error(t, err, "team B's field in team A's widget: %s", out)
	require.Contains(t, out, "color")
	out, err = applyYAML(t, b, "apiVersion: example.com/v2\nkind: Widget\nmetadata: {name: x, namespace: default}\nspec: {color: green}\n")
	require.Error(t, err, "a color outside team B's enum: %s", out)
	require.Contains(t, out, "Unsupported value")
	out, err = applyYAML(t, a, "apiVersion: example.com/v2\nkind: Widget\nmetadata: {name: x, namespace: default}\nspec: {color: red}\n")
	require.Error(t, err, "team B's version in team A's space: %s", out)

	// get shows each one's own, with its own columns and short names.
	require.Contains(t, b.MustRun(t, "get", "wdg", "w"), "red")
	require.Contains(t, b.MustRun(t, "get", "widgets", "w"), "COLOR")
	require.NotContains(t, a.MustRun(t, "get", "widgets", "w"), "COLOR")
	a.MustFail(t, "get", "wdg")
	require.Contains(t, a.MustRun(t, "get", "widgets", "w", "-o", "jsonpath={.spec.size}"), "3")

	// explain reads the space's own OpenAPI.
	require.Contains(t, a.MustRun(t, "explain", "widgets.spec"), "team A's widget")
	require.Contains(t, b.MustRun(t, "explain", "widgets.spec"), "team B's widget")
	require.Contains(t, squat.MustRun(t, "api-resources", "--api-group=example.com"), "Junk")

	// An update in one space (a new version, a changed schema) and a
	// delete in another touch nothing else.
	out, err = applyYAML(t, a, strings.Replace(widgetsOfA, "minimum: 1}", "minimum: 1}\n              shape: {type: string}", 1))
	require.NoError(t, err, out)
	eventually(t, time.Minute, func() (bool, error) {
		out, err := applyYAML(t, a, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2, namespace: default}\nspec: {size: 2, shape: round}\n", "--validate=strict")
		return err == nil, errorf(err, out)
	}, "team A's changed schema in use")
	require.Contains(t, b.MustRun(t, "get", "widgets", "w", "-o", "jsonpath={.spec.color}"), "red")
	require.NotContains(t, b.MustRun(t, "explain", "widgets.spec"), "shape")

	squat.MustRun(t, "delete", "crd", "widgets.example.com")
	eventually(t, time.Minute, func() (bool, error) {
		_, errOut, err := squat.Run(context.Background(), "get", "crd", "widgets.example.com")
		return err != nil && strings.Contains(errOut, "NotFound"), nil
	}, "the squatter's CRD gone")
	require.Contains(t, a.MustRun(t, "get", "widgets", "-o", "name"), "widget.example.com/w2")
	require.Contains(t, b.MustRun(t, "get", "widgets", "-o", "name"), "widget.example.com/w")

	// The server's own CRDs are its own.
	ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "team-a"))
	require.NoError(t, err)
	own := widgetCRD()
	own.Name, own.Spec.Group, own.Spec.Names.Plural = "synctargets.edge.kubestellar.io", "edge.kubestellar.io", "synctargets"
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), own, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "the server's CRD in a space: %v", err)

	// A restart: each space still has its own.
	s.Stop()
	s = harness.StartInProcessWith(t, dataDir, perSpace)
	a, b = spaceKubectl(t, s, "team-a"), spaceKubectl(t, s, "team-b")
	eventually(t, time.Minute, func() (bool, error) {
		out, errOut, err := b.Run(context.Background(), "get", "widgets", "w", "-o", "jsonpath={.spec.color}")
		return err == nil && out == "red", errorf(err, errOut)
	}, "team B's widget after a restart")
	require.Contains(t, a.MustRun(t, "get", "widgets", "w2", "-o", "jsonpath={.spec.shape}"), "round")
	require.Contains(t, a.MustRun(t, "explain", "widgets.spec"), "team A's widget")
}

// errorf joins a command's error and output, for eventually's report.
func errorf(err error, out string) error {
	if err == nil {
		return nil
	}
	return &commandError{err: err, out: out}
}

type commandError struct {
	err error
	out string
}

func (e *commandError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.out) }

// TestCRDsPerSpaceUpgrade: CRDs stored by a server without
// --crds-per-space (one per name, bound to the spaces that created it)
// are split at the first start with it, each space keeping the definition
// it served and its instances; from then on the spaces' definitions are
// independent. A server started without the flag again refuses the
// datastore rather than misread it.
func TestCRDsPerSpaceUpgrade(t *testing.T) {
	dataDir := t.TempDir()
	s := harness.StartInProcess(t, dataDir)
	ctx := context.Background()
	for _, name := range []string{"up-a", "up-b", "up-c"} {
		createSpace(t, s, name)
	}
	crds := func(space string) apiextensionsclient.Interface {
		c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
		require.NoError(t, err)
		return c
	}
	for _, space := range []string{"up-a", "up-b"} {
		_, err := crds(space).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
		require.NoError(t, err)
		established(t, s, space, "widgets.example.com")
		eventually(t, time.Minute, func() (bool, error) {
			out, err := applyYAML(t, spaceKubectl(t, s, space), "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: before, namespace: default}\nspec: {size: 5}\n")
			return err == nil, errorf(err, out)
		}, "a widget in %s", space)
	}
	s.Stop()

	perSpace := func(o *server.Options) { o.CRDsPerSpace = true }
	s = harness.StartInProcessWith(t, dataDir, perSpace)
	uids := map[string]string{}
	for _, space := range []string{"up-a", "up-b"} {
		crd := established(t, s, space, "widgets.example.com")
		uids[space] = string(crd.UID)
		require.NotContains(t, crd.Annotations, spaces.BoundAnnotation, "a space's own CRD says nothing of other spaces")
		require.Contains(t, spaceKubectl(t, s, space).MustRun(t, "get", "widgets", "before", "-o", "jsonpath={.spec.size}"), "5")
	}
	require.NotEqual(t, uids["up-a"], uids["up-b"], "each space's CRD is its own object")
	_, err := crds("up-c").ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a space that served none has none: %v", err)

	// Independent now: up-a's change is not up-b's.
	a := spaceKubectl(t, s, "up-a")
	out, err := applyYAML(t, a, strings.Replace(widgetsOfA, "description: the size of team A's widget", "description: upgraded", 1))
	require.NoError(t, err, out)
	eventually(t, time.Minute, func() (bool, error) {
		out, errOut, err := a.Run(ctx, "explain", "widgets.spec")
		return err == nil && strings.Contains(out, "upgraded"), errorf(err, errOut)
	}, "up-a's definition changed")
	b := spaceKubectl(t, s, "up-b")
	require.NotContains(t, b.MustRun(t, "explain", "widgets.spec"), "upgraded")
	s.Stop()

	// Without the flag, the datastore is refused, with what to do.
	opts := server.NewOptions()
	opts.DataDir, opts.BindAddress, opts.Port = dataDir, "127.0.0.1", harness.FreePort(t)
	completed, err := opts.Complete()
	require.NoError(t, err)
	cfg, err := server.NewConfig(ctx, completed)
	if err == nil {
		cfg.Close()
	}
	require.ErrorContains(t, err, "--"+server.CRDsPerSpaceFlag)
}
