// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/packaging/chart"
)

// The edge RBAC modes of an in-cluster syncer (the chart's rbac.mode).
const (
	RBACLeastPrivilege = "least-privilege"
	RBACClusterAdmin   = "cluster-admin"
)

// InClusterSyncer is a syncer that runs in a Deployment inside its edge
// cluster: what `kubestellar syncer manifest` and `synctarget create
// --output manifest` render through the chart's template.
type InClusterSyncer struct {
	// Server is the center's URL as the edge reaches it.
	Server string
	// Token is the join token; it goes into a Secret, mounted as a file.
	Token string
	// SyncTarget is the SyncTarget's name.
	SyncTarget string
	// Namespace is where the syncer runs (chart.DefaultNamespace when "").
	Namespace string
	// Image is the kubestellar image ("" for the chart's default).
	Image string
	// RBACMode is RBACLeastPrivilege ("" too) or RBACClusterAdmin.
	RBACMode string
	// Rules are what is placed on the SyncTarget now (syncer.PlacedRules).
	Rules []rbacv1.PolicyRule
	// PriorityClassName, ClaimName (a PVC for the syncer's state) and
	// Proxy are optional.
	PriorityClassName, ClaimName, Proxy string
}

// Validate names the flag of what is wrong.
func (s *InClusterSyncer) Validate() error {
	if s.Namespace == "" {
		s.Namespace = chart.DefaultNamespace
	}
	if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", s.Namespace, errs[0])
	}
	switch s.RBACMode {
	case "":
		s.RBACMode = RBACLeastPrivilege
	case RBACLeastPrivilege, RBACClusterAdmin:
	default:
		return fmt.Errorf("--rbac-mode %q must be %s or %s", s.RBACMode, RBACLeastPrivilege, RBACClusterAdmin)
	}
	if s.Proxy != "" {
		if p, err := url.Parse(s.Proxy); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("--proxy %q must be an http:// or https:// URL of an HTTP proxy, e.g. http://proxy:3128", s.Proxy)
		}
	}
	if s.ClaimName != "" {
		if errs := validation.IsDNS1123Subdomain(s.ClaimName); len(errs) > 0 {
			return fmt.Errorf("--persistent-volume-claim %q: %s", s.ClaimName, errs[0])
		}
	}
	if s.PriorityClassName != "" {
		if errs := validation.IsDNS1123Subdomain(s.PriorityClassName); len(errs) > 0 {
			return fmt.Errorf("--priority-class %q: %s", s.PriorityClassName, errs[0])
		}
	}
	if s.Image != "" && strings.ContainsAny(s.Image, " \t\n\"'") {
		return fmt.Errorf("--image %q is not an image reference", s.Image)
	}
	return nil
}

// Values are the chart's values for s.
func (s *InClusterSyncer) Values() (map[string]any, error) {
	rules, err := toValues(s.Rules)
	if err != nil {
		return nil, err
	}
	v := map[string]any{
		"server":            s.Server,
		"syncTarget":        s.SyncTarget,
		"createNamespace":   true,
		"token":             map[string]any{"value": s.Token},
		"rbac":              map[string]any{"mode": s.RBACMode, "rules": rules},
		"priorityClassName": s.PriorityClassName,
		"persistence":       map[string]any{"claimName": s.ClaimName},
		"proxy":             s.Proxy,
	}
	if s.Image != "" {
		v["image"] = s.Image
	}
	return v, nil
}

// Manifest renders s: the Namespace, ServiceAccount, token Secret, RBAC
// and Deployment, as YAML documents.
func (s *InClusterSyncer) Manifest() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if _, err := jointoken.Parse(s.Token); err != nil {
		return nil, fmt.Errorf("the join token: %w", err)
	}
	values, err := s.Values()
	if err != nil {
		return nil, err
	}
	return chart.Render(s.Namespace, values)
}

// UninstallManifest lists the objects Manifest makes in namespace, by
// kind and name only, for `kubectl delete -f -`: deleting them stops the
// syncer and takes its credentials away, and leaves what it placed at the
// edge running (a workload is owned by nothing the manifest makes).
func UninstallManifest(namespace string) ([]byte, error) {
	s := InClusterSyncer{SyncTarget: "x", Namespace: namespace}
	objs, err := s.objects()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	// Namespaced objects first, the namespace last: kubectl deletes in
	// order, and the namespace's deletion takes the rest with it anyway.
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		stub := map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(), "metadata": map[string]any{"name": o.GetName()}}
		if o.GetNamespace() != "" {
			stub["metadata"].(map[string]any)["namespace"] = o.GetNamespace()
		}
		data, err := yaml.Marshal(stub)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return out.Bytes(), nil
}

// objects renders s and decodes what it makes, for what needs only the
// objects' names or rules: with a placeholder token (its Secret is not
// shown) and server where s has none.
func (s InClusterSyncer) objects() ([]*unstructured.Unstructured, error) {
	s.Token = "placeholder"
	if s.Server == "" {
		s.Server = "https://center.invalid:6443"
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	values, err := s.Values()
	if err != nil {
		return nil, err
	}
	full, err := chart.Render(s.Namespace, values)
	if err != nil {
		return nil, err
	}
	return DecodeManifest(full)
}

// DecodeManifest splits YAML documents into objects, skipping empty ones.
func DecodeManifest(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("the rendered manifest: %w", err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("the rendered manifest: %w", err)
		}
		objs = append(objs, u)
	}
}

// toValues turns typed rules into the plain values a template reads.
func toValues(rules []rbacv1.PolicyRule) ([]any, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	var out []any
	return out, json.Unmarshal(data, &out)
}

// DescribeRules lists the resources rules name, as group/resource (or
// resource for the core group), with what may be done to them.
func DescribeRules(rules []rbacv1.PolicyRule) string {
	var parts []string
	for _, r := range rules {
		access := "read"
		if slices.Contains(r.Verbs, "patch") {
			access = "write"
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				name := res
				if g != "" {
					name = g + "/" + res
				}
				parts = append(parts, name+" ("+access+")")
			}
		}
	}
	return strings.Join(parts, ", ")
}

// PlacedRole is the manifest's ClusterRole of what is placed on the
// SyncTarget (s.Rules), alone, for the edge's admin to apply when a
// placement needs more than the syncer was granted.
func (s InClusterSyncer) PlacedRole() ([]byte, error) {
	s.RBACMode = RBACLeastPrivilege
	objs, err := s.objects()
	if err != nil {
		return nil, err
	}
	want := "kubestellar-syncer:" + s.Namespace + ":placed"
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == want {
			return yaml.Marshal(o.Object)
		}
	}
	return nil, fmt.Errorf("the chart's template has no ClusterRole %s", want)
}
