// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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

	// A CRD the root space serves everywhere: in every space, under a
	// name no space may define.
	rootExt, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, spaces.Root))
	require.NoError(t, err)
	shared := widgetCRD()
	shared.Name, shared.Spec.Group = "sprockets.shared.example.com", "shared.example.com"
	shared.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "sprockets", Singular: "sprocket", Kind: "Sprocket", ListKind: "SprocketList"}
	shared.Annotations = map[string]string{spaces.BoundAnnotation: spaces.AllSpaces}
	_, err = rootExt.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), shared, metav1.CreateOptions{})
	require.NoError(t, err)
	established(t, s, spaces.Root, shared.Name)
	eventually(t, time.Minute, func() (bool, error) {
		out, err := applyYAML(t, b, "apiVersion: shared.example.com/v1\nkind: Sprocket\nmetadata: {name: s, namespace: default}\nspec: {size: 1}\n")
		return err == nil, errorf(err, out)
	}, "the root's CRD served everywhere used in team B's space")
	shared.Annotations = nil
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), shared, metav1.CreateOptions{})
	require.True(t, apierrors.IsAlreadyExists(err), "a name the root serves everywhere, in a space: %v", err)

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
	s := harness.StartInProcessWith(t, dataDir, boundCRDs)
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

	// The upgrade: started with the default, alone on its datastore, the
	// server splits them.
	s = harness.StartInProcess(t, dataDir)
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
	boundCRDs(opts)
	opts.DataDir, opts.BindAddress, opts.Port = dataDir, "127.0.0.1", harness.FreePort(t)
	completed, err := opts.Complete()
	require.NoError(t, err)
	cfg, err := server.NewConfig(ctx, completed)
	if err == nil {
		cfg.Close()
	}
	require.ErrorContains(t, err, "--"+server.CRDsPerSpaceFlag)
}

// TestCRDsPerSpaceTellNothingOfOtherSpaces: nothing a tenant can ask
// tells whether another space defines a CRD name. Every answer a space
// gets about widgets.example.com, which another space defines, is the
// answer it gets about gizmos.example.com, which no space defines (the
// name replaced); its discovery and OpenAPI documents are the same before
// and after the other space defines it; and the space may define the name
// itself, as if nobody had.
func TestCRDsPerSpaceTellNothingOfOtherSpaces(t *testing.T) {
	s := harness.StartInProcessWith(t, "", func(o *server.Options) { o.CRDsPerSpace = true })
	ctx := context.Background()
	createSpace(t, s, "owner")
	createSpace(t, s, "looker")
	rc := kube(t, s, "looker").Discovery().RESTClient()
	type answer struct {
		code int
		body string
	}
	ask := func(method, path, accept, body string) answer {
		t.Helper()
		req := rc.Verb(method).AbsPath(path).SetHeader("Accept", accept)
		if body != "" {
			req = req.SetHeader("Content-Type", "application/json").Body([]byte(body))
		}
		var code int
		raw, _ := req.Do(ctx).StatusCode(&code).Raw()
		return answer{code, string(raw)}
	}
	const (
		jsonType   = "application/json"
		aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	)
	documents := func() map[string]answer {
		return map[string]answer{
			"/apis":               ask("GET", "/apis", jsonType, ""),
			"/apis (aggregated)":  ask("GET", "/apis", aggregated, ""),
			"/openapi/v2":         ask("GET", "/openapi/v2", jsonType, ""),
			"/openapi/v3":         ask("GET", "/openapi/v3", jsonType, ""),
			"/apis/example.com":   ask("GET", "/apis/example.com", jsonType, ""),
			"/apis/example.com/v": ask("GET", "/apis/example.com/v1", jsonType, ""),
			// The upstream handlers answer any method: a space's
			// documents are read with GET alone.
			"POST /openapi/v2":       ask("POST", "/openapi/v2", jsonType, "{}"),
			"POST /apis/example.com": ask("POST", "/apis/example.com", jsonType, "{}"),
		}
	}
	// What a space can ask of a name: the CRD, its resources, its group.
	about := func(plural string) map[string]answer {
		obj := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"x"}}`
		return map[string]answer{
			"get crd":   ask("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+plural+".example.com", jsonType, ""),
			"patch crd": ask("PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+plural+".example.com", jsonType, ""),
			"list":      ask("GET", "/apis/example.com/v1/"+plural, jsonType, ""),
			"get":       ask("GET", "/apis/example.com/v1/namespaces/default/"+plural+"/x", jsonType, ""),
			"create":    ask("POST", "/apis/example.com/v1/namespaces/default/"+plural, jsonType, obj),
			"watch":     ask("GET", "/apis/example.com/v1/"+plural+"?watch=true&timeoutSeconds=1", jsonType, ""),
			"openapi":   ask("GET", "/openapi/v3/apis/example.com/v1", jsonType, ""),
		}
	}
	before := documents()
	for _, post := range []string{"POST /openapi/v2", "POST /apis/example.com"} {
		require.Equal(t, http.StatusMethodNotAllowed, before[post].code, "%s in a space: %s", post, before[post].body)
	}

	ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "owner"))
	require.NoError(t, err)
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	require.NoError(t, err)
	established(t, s, "owner", "widgets.example.com")
	eventually(t, time.Minute, func() (bool, error) {
		_, err := dyn(t, s, "owner").Resource(widgetsGVR).Namespace("default").Create(ctx, widget("x"), metav1.CreateOptions{})
		return err == nil, err
	}, "a widget in the owner's space")

	require.Equal(t, before, documents(), "the looker's documents changed when another space defined a CRD")
	defined, undefined := about("widgets"), about("gizmos")
	for what, got := range defined {
		want := undefined[what]
		want.body = strings.ReplaceAll(want.body, "gizmos", "widgets")
		require.Equal(t, want, got, "%s: a name another space defines is answered as one nobody defines", what)
	}
	require.Equal(t, http.StatusNotFound, defined["get"].code)

	// The looker defines the name itself, as if nobody had, and its names
	// are accepted with the message anyone's would be.
	looker, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "looker"))
	require.NoError(t, err)
	mine := widgetCRD()
	mine.Spec.Versions[0].Name = "v7"
	_, err = looker.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, mine, metav1.CreateOptions{})
	require.NoError(t, err)
	crd := established(t, s, "looker", "widgets.example.com")
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted {
			require.Equal(t, "NoConflicts", c.Reason)
		}
	}
	// Served once the server's own cache has seen it Established (the
	// status may be read through the API a moment before).
	var list *unstructured.UnstructuredList
	eventually(t, 10*time.Second, func() (bool, error) {
		list, err = dyn(t, s, "looker").Resource(widgetsGVR.GroupResource().WithVersion("v7")).Namespace("default").List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}, "the looker's widgets served")
	require.Empty(t, list.Items, "the owner's widget is not the looker's")
}

// boundCRDs starts a server with CRDs bound to spaces, one definition to a
// name (--crds-per-space=false).
func boundCRDs(o *server.Options) { o.CRDsPerSpace = false }

// perSpaceCRDs starts a server with each space's CRDs its own.
func perSpaceCRDs(o *server.Options) { o.CRDsPerSpace = true }

func widget(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": 1}}}
}

// TestCRDsPerSpaceConversionWebhook: the root space defines
// widgets.example.com with two versions converted by a webhook on
// loopback; a tenant space defines the same name with one version of its
// own and no webhook. Each space's requests follow its own definition:
// the root's are converted through its webhook, the tenant's never reach
// it (nor does any object of the tenant's), and the tenant has no v2.
func TestCRDsPerSpaceConversionWebhook(t *testing.T) {
	var mu sync.Mutex
	var seen []string // the objects the webhook was given, as JSON
	webhook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var review apiextensionsv1.ConversionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			mu.Lock()
			seen = append(seen, string(raw.Raw))
			mu.Unlock()
			var obj map[string]any
			if err := json.Unmarshal(raw.Raw, &obj); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			spec, _ := obj["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
			}
			// v1's size is v2's length.
			if review.Request.DesiredAPIVersion == "example.com/v2" {
				spec["length"], spec["size"] = spec["size"], nil
			} else {
				spec["size"], spec["length"] = spec["length"], nil
			}
			for k, v := range spec {
				if v == nil {
					delete(spec, k)
				}
			}
			obj["spec"], obj["apiVersion"] = spec, review.Request.DesiredAPIVersion
			out, _ := json.Marshal(obj)
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(webhook.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: webhook.Certificate().Raw})

	s := harness.StartInProcessWith(t, "", func(o *server.Options) { o.CRDsPerSpace = true })
	ctx := context.Background()
	createSpace(t, s, "convert-b")

	rootCRD := widgetCRD()
	schema := func(field string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "integer"}}}}}}
	}
	url := webhook.URL + "/convert"
	rootCRD.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Storage: true, Schema: schema("size")},
		{Name: "v2", Served: true, Schema: schema("length")}}
	rootCRD.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle}}}
	tenantCRD := widgetCRD()
	tenantCRD.Spec.Versions[0].Schema = schema("color")
	for space, crd := range map[string]*apiextensionsv1.CustomResourceDefinition{spaces.Root: rootCRD, "convert-b": tenantCRD} {
		c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
		require.NoError(t, err)
		_, err = c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err, "in %s", space)
		established(t, s, space, crd.Name)
	}
	v2 := widgetsGVR.GroupResource().WithVersion("v2")
	eventually(t, time.Minute, func() (bool, error) {
		w := widget("r")
		_, err := dyn(t, s, spaces.Root).Resource(widgetsGVR).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
		return err == nil, err
	}, "a widget in the root space")
	got, err := dyn(t, s, spaces.Root).Resource(v2).Namespace("default").Get(ctx, "r", metav1.GetOptions{})
	require.NoError(t, err)
	length, _, _ := unstructured.NestedInt64(got.Object, "spec", "length")
	require.EqualValues(t, 1, length, "the root's v1 widget read as v2 through its webhook")

	eventually(t, time.Minute, func() (bool, error) {
		w := widget("b")
		w.Object["spec"] = map[string]any{"color": int64(3)}
		_, err := dyn(t, s, "convert-b").Resource(widgetsGVR).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
		return err == nil, err
	}, "a widget in the tenant's space")
	b, err := dyn(t, s, "convert-b").Resource(widgetsGVR).Namespace("default").Get(ctx, "b", metav1.GetOptions{})
	require.NoError(t, err)
	color, _, _ := unstructured.NestedInt64(b.Object, "spec", "color")
	require.EqualValues(t, 3, color, "the tenant's schema keeps its field")
	_, err = dyn(t, s, "convert-b").Resource(v2).Namespace("default").Get(ctx, "b", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the tenant has no v2: %v", err)
	list, err := dyn(t, s, "convert-b").Resource(widgetsGVR).Namespace("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "the tenant lists its own widget alone")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen, "the root's webhook converted")
	for _, obj := range seen {
		require.NotContains(t, obj, "color", "the root's webhook was given a tenant's object")
	}
}

// TestCRDsPerSpaceWatchesEndWithTheirDefinition: two spaces share one
// definition; when one changes its CRD, its watches end (as upstream ends
// a changed CRD's), for its clients to watch again by the new one, while
// the other space's watches go on.
func TestCRDsPerSpaceWatchesEndWithTheirDefinition(t *testing.T) {
	s := harness.StartInProcessWith(t, "", func(o *server.Options) { o.CRDsPerSpace = true })
	ctx := context.Background()
	watches := map[string]watch.Interface{}
	for _, space := range []string{"watch-a", "watch-b"} {
		createSpace(t, s, space)
		c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
		require.NoError(t, err)
		_, err = c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
		require.NoError(t, err)
		established(t, s, space, "widgets.example.com")
		eventually(t, time.Minute, func() (bool, error) {
			w, err := dyn(t, s, space).Resource(widgetsGVR).Namespace("default").Watch(ctx, metav1.ListOptions{})
			watches[space] = w
			return err == nil, err
		}, "a watch of widgets in %s", space)
		t.Cleanup(watches[space].Stop)
	}

	c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "watch-a"))
	require.NoError(t, err)
	crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	require.NoError(t, err)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["shape"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	_, err = c.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
	require.NoError(t, err)

	deadline := time.After(time.Minute)
	for ended := false; !ended; {
		select {
		case _, open := <-watches["watch-a"].ResultChan():
			ended = !open
		case <-deadline:
			t.Fatal("watch-a's watch goes on by the definition its CRD no longer has")
		}
	}
	_, err = dyn(t, s, "watch-b").Resource(widgetsGVR).Namespace("default").Create(ctx, widget("after"), metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case e, open := <-watches["watch-b"].ResultChan():
		require.True(t, open, "watch-b's watch ended, though its CRD did not change")
		require.Equal(t, watch.Added, e.Type)
	case <-time.After(time.Minute):
		t.Fatal("watch-b's watch saw nothing of the widget created")
	}
}

// TestCRDsPerSpaceNamespaceDeletion: deleting a namespace deletes the
// space's own custom resources in it, which only the space's discovery
// lists.
func TestCRDsPerSpaceNamespaceDeletion(t *testing.T) {
	s := harness.StartInProcessWith(t, "", func(o *server.Options) { o.CRDsPerSpace = true })
	ctx := context.Background()
	createSpace(t, s, "ns-gone")
	c, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "ns-gone"))
	require.NoError(t, err)
	_, err = c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	require.NoError(t, err)
	established(t, s, "ns-gone", "widgets.example.com")
	kc := kube(t, s, "ns-gone")
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, func() (bool, error) {
		w := widget("x")
		w.SetNamespace("doomed")
		_, err := dyn(t, s, "ns-gone").Resource(widgetsGVR).Namespace("doomed").Create(ctx, w, metav1.CreateOptions{})
		return err == nil, err
	}, "a widget in namespace doomed")

	require.NoError(t, kc.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}))
	eventually(t, time.Minute, func() (bool, error) {
		_, err := kc.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}, "namespace doomed gone")
	list, err := dyn(t, s, "ns-gone").Resource(widgetsGVR).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "the space's widgets in the deleted namespace are gone with it")
}
