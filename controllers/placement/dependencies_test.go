// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

func fromYAML(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &obj.Object))
	return obj
}

// shown renders references as "Kind name optional? at path".
func shown(refs []reference) []string {
	var out []string
	for _, r := range refs {
		opt := ""
		if r.optional {
			opt = " (optional)"
		}
		out = append(out, fmt.Sprintf("%s %s/%s%s at %s", r.kind, r.namespace, r.name, opt, r.path))
	}
	return out
}

func TestReferences(t *testing.T) {
	deployment := fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      serviceAccountName: web-sa
      imagePullSecrets: [{name: regcred}]
      volumes:
      - {name: a, configMap: {name: settings}}
      - {name: b, secret: {secretName: tls, optional: true}}
      - {name: c, persistentVolumeClaim: {claimName: data}}
      - {name: d, projected: {sources: [{configMap: {name: extra}}, {secret: {name: token}}, {serviceAccountToken: {path: t}}]}}
      - {name: e, emptyDir: {}}
      initContainers:
      - name: init
        envFrom: [{configMapRef: {name: init-env}}]
      containers:
      - name: app
        envFrom: [{secretRef: {name: app-env, optional: true}}]
        env:
        - {name: A, value: plain}
        - {name: B, valueFrom: {configMapKeyRef: {name: settings, key: b}}}
        - {name: C, valueFrom: {secretKeyRef: {name: db, key: password}}}
        - {name: D, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
`)
	require.Equal(t, []string{
		"ServiceAccount shop/web-sa at spec.template.spec.serviceAccountName",
		"Secret shop/regcred at spec.template.spec.imagePullSecrets[0]",
		"ConfigMap shop/settings at spec.template.spec.volumes[0].configMap",
		"Secret shop/tls (optional) at spec.template.spec.volumes[1].secret",
		"PersistentVolumeClaim shop/data at spec.template.spec.volumes[2].persistentVolumeClaim",
		"ConfigMap shop/extra at spec.template.spec.volumes[3].projected.sources[0].configMap",
		"Secret shop/token at spec.template.spec.volumes[3].projected.sources[1].secret",
		"ConfigMap shop/init-env at spec.template.spec.initContainers[0].envFrom[0].configMapRef",
		"Secret shop/app-env (optional) at spec.template.spec.containers[0].envFrom[0].secretRef",
		"ConfigMap shop/settings at spec.template.spec.containers[0].env[1].valueFrom.configMapKeyRef",
		"Secret shop/db at spec.template.spec.containers[0].env[2].valueFrom.secretKeyRef",
	}, shown(references(schema.GroupResource{Group: "apps", Resource: "deployments"}, deployment)))

	cronJob := fromYAML(t, `
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: ops}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          serviceAccount: legacy
          containers: [{name: c, envFrom: [{configMapRef: {name: job-env}}]}]
`)
	require.Equal(t, []string{
		"ServiceAccount ops/legacy at spec.jobTemplate.spec.template.spec.serviceAccount",
		"ConfigMap ops/job-env at spec.jobTemplate.spec.template.spec.containers[0].envFrom[0].configMapRef",
	}, shown(references(schema.GroupResource{Group: "batch", Resource: "cronjobs"}, cronJob)))

	ingress := fromYAML(t, `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: front, namespace: shop}
spec:
  tls: [{hosts: [shop.example], secretName: shop-tls}]
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  rules:
  - http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /x, pathType: Prefix, backend: {resource: {apiGroup: example.com, kind: Bucket, name: b}}}
`)
	require.Equal(t, []string{
		"Secret shop/shop-tls at spec.tls[0].secretName",
		"Service shop/fallback at spec.defaultBackend.service",
		"Service shop/web at spec.rules[0].http.paths[0].backend.service",
	}, shown(references(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, ingress)))

	// Malformed objects give what can be read, and never a panic.
	for _, doc := range []string{
		`{kind: Deployment, spec: {template: {spec: {volumes: "not a list", containers: [7, {env: [{valueFrom: 3}]}]}}}}`,
		`{kind: Deployment, spec: {template: "not a map"}}`,
		`{kind: Ingress, spec: {tls: [{secretName: 5}], rules: [{http: {paths: [{backend: []}]}}]}}`,
	} {
		obj := fromYAML(t, doc)
		require.NotPanics(t, func() {
			references(schema.GroupResource{Group: "apps", Resource: "deployments"}, obj)
			references(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, obj)
		})
	}
	require.Empty(t, references(schema.GroupResource{Resource: "configmaps"}, configMap("a", "b", nil)), "a ConfigMap references nothing")
}

// followFake is a WDS with a Deployment that references a ConfigMap, a
// Secret, a ServiceAccount and the default ServiceAccount, placed with
// spec.dependencies: Follow.
func followFake(t *testing.T) (*fakeMailbox, *edgev2alpha1.EdgePlacement) {
	f := newFake()
	f.served = append(f.served, deployments, secrets, serviceAccounts)
	f.put(deployments.GroupVersionResource, "wds1", fromYAML(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      serviceAccountName: web
      volumes: [{name: a, configMap: {name: settings}}, {name: b, secret: {secretName: maybe, optional: true}}]
      containers: [{name: app, env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: p}}}]}]
`))
	f.put(cmGVR, "wds1", configMap("shop", "settings", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("shop", "unrelated", map[string]any{"a": "1"}))
	f.put(secrets.GroupVersionResource, "wds1", fromYAML(t, `{apiVersion: v1, kind: Secret, metadata: {name: db, namespace: shop}, data: {p: cw==}}`))
	f.put(serviceAccounts.GroupVersionResource, "wds1", fromYAML(t, `{apiVersion: v1, kind: ServiceAccount, metadata: {name: web, namespace: shop}}`))
	apps := "apps"
	ep := f.place("wds1", "shop", 1, edgev2alpha1.DownsyncClause{APIGroup: &apps, Resources: []string{"deployments"}, Namespaces: []string{"shop"}})
	ep.Spec.Dependencies = edgev2alpha1.DependenciesFollow
	return f, ep
}

var (
	deployments     = resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true}
	secrets         = resource{GroupVersionResource: secretsGVR, Kind: "Secret", Namespaced: true}
	serviceAccounts = resource{GroupVersionResource: serviceAccountsGVR, Kind: "ServiceAccount", Namespaced: true}
)

// TestFollowDependencies: with Follow, a Deployment's ConfigMap, Secret
// and ServiceAccount go with it into the mailbox, listed as dependencies
// of the placement; nothing else does; they leave with it, and without
// Follow they are not placed.
func TestFollowDependencies(t *testing.T) {
	f, ep := followFake(t)
	_, _, err := f.run(t)
	require.NoError(t, err)
	mb := f.mailbox()
	require.NotNil(t, f.get(deployments.GroupVersionResource, mb, "shop", "web"))
	require.NotNil(t, f.get(cmGVR, mb, "shop", "settings"))
	require.NotNil(t, f.get(secretsGVR, mb, "shop", "db"))
	require.NotNil(t, f.get(serviceAccountsGVR, mb, "shop", "web"))
	require.Nil(t, f.get(cmGVR, mb, "shop", "unrelated"), "only what the workload references")
	require.Nil(t, f.get(secretsGVR, mb, "shop", "maybe"), "an optional reference to nothing is no copy")
	require.Empty(t, f.problems, "an optional reference to nothing is no problem")
	epKey := spaces.Key("wds1", "", "shop")
	require.Equal(t, []edgev2alpha1.DependencyReference{
		{Resource: "configmaps", Namespace: "shop", Name: "settings"},
		{Resource: "secrets", Namespace: "shop", Name: "db"},
		{Resource: "serviceaccounts", Namespace: "shop", Name: "web"},
	}, f.dependencies[epKey])
	cp := f.get(cmGVR, mb, "shop", "settings")
	require.Equal(t, "shop", cp.GetAnnotations()[edgev2alpha1.PlacementsAnnotation], "the copy is the placement's, as a selected one is")

	// The ConfigMap changes: its copy follows.
	f.put(cmGVR, "wds1", configMap("shop", "settings", map[string]any{"a": "2"}))
	_, _, err = f.run(t)
	require.NoError(t, err)
	require.Equal(t, "2", f.get(cmGVR, mb, "shop", "settings").Object["data"].(map[string]any)["a"])

	// Without Follow, the dependencies leave the mailbox.
	ep.Spec.Dependencies = edgev2alpha1.DependenciesNone
	_, _, err = f.run(t)
	require.NoError(t, err)
	require.NotNil(t, f.get(deployments.GroupVersionResource, mb, "shop", "web"))
	require.Nil(t, f.get(cmGVR, mb, "shop", "settings"))
	require.Nil(t, f.get(secretsGVR, mb, "shop", "db"))
	require.Nil(t, f.get(serviceAccountsGVR, mb, "shop", "web"))
	require.Empty(t, f.dependencies[epKey])
}

// TestFollowDependencyProblems: a reference to an object the WDS does not
// hold is a problem naming the workload, the object and where it is
// named; a dependency the placement's writer may not read is not placed
// (a tenant who may place Deployments but not read Secrets gets no Secret
// to an edge by naming it); a dependency also selected by a clause is one
// copy, not listed as a dependency.
func TestFollowDependencyProblems(t *testing.T) {
	f, ep := followFake(t)
	delete(f.objects[serviceAccountsGVR], spaces.Key("wds1", "shop", "web"))
	f.deny = map[string]bool{"secrets|shop": true}
	core := ""
	ep.Spec.Downsync = append(ep.Spec.Downsync, edgev2alpha1.DownsyncClause{APIGroup: &core, Resources: []string{"configmaps"}, ObjectNames: []string{"settings"}})
	_, _, err := f.run(t)
	require.NoError(t, err)
	mb := f.mailbox()
	require.Nil(t, f.get(secretsGVR, mb, "shop", "db"), "the writer may not read Secrets in shop")
	require.NotNil(t, f.get(cmGVR, mb, "shop", "settings"))
	epKey := spaces.Key("wds1", "", "shop")
	var reasons, messages []string
	for _, p := range f.problems[epKey] {
		reasons, messages = append(reasons, p.Reason), append(messages, p.Message)
	}
	require.Contains(t, reasons, edgev2alpha1.DependencyReasonNotFound)
	require.Contains(t, reasons, "NotPermitted")
	require.Contains(t, messages, "deployment shop/web references ServiceAccount shop/web (spec.template.spec.serviceAccountName), which is not in the WDS")
	require.Empty(t, f.dependencies[epKey], "the ConfigMap is selected by a clause: not a dependency")

	// A cache not synced yet: the mailbox is looked at again.
	f.notSynced[secretsGVR] = true
	f.deny = nil
	_, requeue, err := f.run(t)
	require.NoError(t, err)
	require.True(t, requeue)
}

// TestFollowCRD: a custom resource placed with Follow brings its CRD, as
// the WDS serves it; a CRD the WDS does not serve is not placed.
func TestFollowCRD(t *testing.T) {
	f := newFake()
	gadgets := resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}, Kind: "Gadget", Namespaced: true}
	f.served = append(f.served, gadgets)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com",
		Annotations: map[string]string{spaces.BoundAnnotation: "wds1"}}}
	f.crds = []*apiextensionsv1.CustomResourceDefinition{crd}
	f.put(gadgets.GroupVersionResource, "wds1", fromYAML(t, `{apiVersion: example.com/v1, kind: Gadget, metadata: {name: g, namespace: lab}}`))
	group := "example.com"
	ep := f.place("wds1", "lab", 1, edgev2alpha1.DownsyncClause{APIGroup: &group, Resources: []string{"gadgets"}})
	ep.Spec.Dependencies = edgev2alpha1.DependenciesFollow
	r := f.reconciler()
	st, _, _ := r.target(spaces.Key(inv, "", stName))
	sel, synced := r.selectAll(t.Context(), r.sources(t.Context(), st))
	require.True(t, synced)
	require.True(t, sel.crdNames["gadgets.example.com"])
	require.Equal(t, []edgev2alpha1.DependencyReference{{APIGroup: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "gadgets.example.com"}},
		sel.dependenciesOf(spaces.Key("wds1", "", "lab")))

	for _, bound := range []string{"wds2", spaces.AllSpaces} {
		crd.Annotations[spaces.BoundAnnotation] = bound
		sel, _ = r.selectAll(t.Context(), r.sources(t.Context(), st))
		require.False(t, sel.crdNames["gadgets.example.com"], "bound to %s: not the WDS's own definition", bound)
	}
}

// TestSetDependencies: the list is sorted and bounded, the count is not,
// and an unchanged status is no write.
func TestSetDependencies(t *testing.T) {
	ep := &edgev2alpha1.EdgePlacement{}
	set := map[edgev2alpha1.DependencyReference]bool{}
	for i := range edgev2alpha1.MaxListedDependencies + 5 {
		set[edgev2alpha1.DependencyReference{Resource: "configmaps", Namespace: "ns", Name: fmt.Sprintf("cm-%03d", i)}] = true
	}
	require.True(t, setDependencies(ep, set))
	require.Len(t, ep.Status.Dependencies, edgev2alpha1.MaxListedDependencies)
	require.EqualValues(t, edgev2alpha1.MaxListedDependencies+5, ep.Status.DependencyCount)
	require.Equal(t, "cm-000", ep.Status.Dependencies[0].Name)
	require.False(t, setDependencies(ep, set))
	require.True(t, setDependencies(ep, nil))
	require.Nil(t, ep.Status.Dependencies)
	require.Zero(t, ep.Status.DependencyCount)
}
