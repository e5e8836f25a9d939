// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// A placement with spec.dependencies Follow places, with each workload it
// selects, what the workload references in its WDS (as Karmada's
// propagateDeps does for a Deployment's ConfigMaps, Secrets, PVCs and
// ServiceAccount). The references are read from the copy, after
// customization, since that is what the edge runs; they go one level
// deep (a followed ServiceAccount's own references are not followed).

// reference is an object a workload cannot run without.
type reference struct {
	gvr             schema.GroupVersionResource
	kind            string
	namespace, name string
	// optional references (a ConfigMap volume marked optional) are placed
	// when the object exists and are no problem when it does not.
	optional bool
	// path is where the workload names it, for messages.
	path string
}

var (
	configMapsGVR      = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretsGVR         = corev1.SchemeGroupVersion.WithResource("secrets")
	serviceAccountsGVR = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	pvcsGVR            = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	servicesGVR        = corev1.SchemeGroupVersion.WithResource("services")
)

// podSpecPaths are where the kinds that run pods hold their pod spec.
var podSpecPaths = map[schema.GroupResource][]string{
	{Resource: "pods"}:                                  {"spec"},
	{Resource: "replicationcontrollers"}:                {"spec", "template", "spec"},
	{Group: "apps", Resource: "deployments"}:            {"spec", "template", "spec"},
	{Group: "apps", Resource: "replicasets"}:            {"spec", "template", "spec"},
	{Group: "apps", Resource: "statefulsets"}:           {"spec", "template", "spec"},
	{Group: "apps", Resource: "daemonsets"}:             {"spec", "template", "spec"},
	{Group: "batch", Resource: "jobs"}:                  {"spec", "template", "spec"},
	{Group: "batch", Resource: "cronjobs"}:              {"spec", "jobTemplate", "spec", "template", "spec"},
	{Group: "networking.k8s.io", Resource: "ingresses"}: nil, // see ingressReferences
}

// references returns what an object of a resource references in its own
// namespace, in the order the object names them (duplicates included).
func references(gr schema.GroupResource, obj *unstructured.Unstructured) []reference {
	if gr == (schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}) {
		return ingressReferences(obj)
	}
	path, ok := podSpecPaths[gr]
	if !ok {
		return nil
	}
	spec, ok, _ := unstructured.NestedMap(obj.Object, path...)
	if !ok {
		return nil
	}
	r := refCollector{namespace: obj.GetNamespace(), prefix: strings.Join(path, ".")}
	r.podSpec(spec)
	return r.refs
}

// refCollector gathers the references of one object.
type refCollector struct {
	namespace, prefix string
	refs              []reference
}

func (r *refCollector) add(gvr schema.GroupVersionResource, kind string, name any, optional any, path string) {
	n, _ := name.(string)
	if n == "" {
		return
	}
	opt, _ := optional.(bool)
	r.refs = append(r.refs, reference{gvr: gvr, kind: kind, namespace: r.namespace, name: n, optional: opt, path: r.prefix + "." + path})
}

func (r *refCollector) podSpec(spec map[string]any) {
	if sa, _ := spec["serviceAccountName"].(string); sa != "" {
		r.add(serviceAccountsGVR, "ServiceAccount", sa, false, "serviceAccountName")
	} else if sa, _ := spec["serviceAccount"].(string); sa != "" {
		r.add(serviceAccountsGVR, "ServiceAccount", sa, false, "serviceAccount")
	}
	for i, s := range objectsIn(spec["imagePullSecrets"]) {
		r.add(secretsGVR, "Secret", s["name"], false, fmt.Sprintf("imagePullSecrets[%d]", i))
	}
	for i, v := range objectsIn(spec["volumes"]) {
		at := fmt.Sprintf("volumes[%d]", i)
		if cm, ok := v["configMap"].(map[string]any); ok {
			r.add(configMapsGVR, "ConfigMap", cm["name"], cm["optional"], at+".configMap")
		}
		if s, ok := v["secret"].(map[string]any); ok {
			r.add(secretsGVR, "Secret", s["secretName"], s["optional"], at+".secret")
		}
		if c, ok := v["persistentVolumeClaim"].(map[string]any); ok {
			r.add(pvcsGVR, "PersistentVolumeClaim", c["claimName"], false, at+".persistentVolumeClaim")
		}
		if p, ok := v["projected"].(map[string]any); ok {
			for j, src := range objectsIn(p["sources"]) {
				sat := fmt.Sprintf("%s.projected.sources[%d]", at, j)
				if cm, ok := src["configMap"].(map[string]any); ok {
					r.add(configMapsGVR, "ConfigMap", cm["name"], cm["optional"], sat+".configMap")
				}
				if s, ok := src["secret"].(map[string]any); ok {
					r.add(secretsGVR, "Secret", s["name"], s["optional"], sat+".secret")
				}
			}
		}
	}
	for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
		for i, c := range objectsIn(spec[field]) {
			at := fmt.Sprintf("%s[%d]", field, i)
			for j, from := range objectsIn(c["envFrom"]) {
				if cm, ok := from["configMapRef"].(map[string]any); ok {
					r.add(configMapsGVR, "ConfigMap", cm["name"], cm["optional"], fmt.Sprintf("%s.envFrom[%d].configMapRef", at, j))
				}
				if s, ok := from["secretRef"].(map[string]any); ok {
					r.add(secretsGVR, "Secret", s["name"], s["optional"], fmt.Sprintf("%s.envFrom[%d].secretRef", at, j))
				}
			}
			for j, env := range objectsIn(c["env"]) {
				vf, _ := env["valueFrom"].(map[string]any)
				if cm, ok := vf["configMapKeyRef"].(map[string]any); ok {
					r.add(configMapsGVR, "ConfigMap", cm["name"], cm["optional"], fmt.Sprintf("%s.env[%d].valueFrom.configMapKeyRef", at, j))
				}
				if s, ok := vf["secretKeyRef"].(map[string]any); ok {
					r.add(secretsGVR, "Secret", s["name"], s["optional"], fmt.Sprintf("%s.env[%d].valueFrom.secretKeyRef", at, j))
				}
			}
		}
	}
}

// ingressReferences are an Ingress's TLS Secrets and backend Services.
func ingressReferences(obj *unstructured.Unstructured) []reference {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	r := refCollector{namespace: obj.GetNamespace(), prefix: "spec"}
	for i, t := range objectsIn(spec["tls"]) {
		r.add(secretsGVR, "Secret", t["secretName"], false, fmt.Sprintf("tls[%d].secretName", i))
	}
	backend := func(b any, at string) {
		bm, _ := b.(map[string]any)
		if svc, ok := bm["service"].(map[string]any); ok {
			r.add(servicesGVR, "Service", svc["name"], false, at+".service")
		}
	}
	backend(spec["defaultBackend"], "defaultBackend")
	for i, rule := range objectsIn(spec["rules"]) {
		http, _ := rule["http"].(map[string]any)
		for j, p := range objectsIn(http["paths"]) {
			backend(p["backend"], fmt.Sprintf("rules[%d].http.paths[%d].backend", i, j))
		}
	}
	return r.refs
}

// objectsIn returns the elements of a list that are objects.
func objectsIn(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// dependencyRef is how status.dependencies names a reference.
func dependencyRef(gvr schema.GroupVersionResource, namespace, name string) edgev2alpha1.DependencyReference {
	return edgev2alpha1.DependencyReference{APIGroup: gvr.Group, Resource: gvr.Resource, Namespace: namespace, Name: name}
}

// sortDependencies orders references by group, resource, namespace, name.
func sortDependencies(refs []edgev2alpha1.DependencyReference) {
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		if a.APIGroup != b.APIGroup {
			return a.APIGroup < b.APIGroup
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
