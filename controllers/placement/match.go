// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// clause is a DownsyncClause with its selectors parsed.
type clause struct {
	edgev2alpha1.DownsyncClause
	namespaceSelectors []labels.Selector
	labelSelectors     []labels.Selector
}

// parseClause parses a clause's selectors; the error names the field.
func parseClause(i int, c edgev2alpha1.DownsyncClause) (*clause, error) {
	out := &clause{DownsyncClause: c}
	for j := range c.NamespaceSelectors {
		s, err := metav1.LabelSelectorAsSelector(&c.NamespaceSelectors[j])
		if err != nil {
			return nil, fmt.Errorf("spec.downsync[%d].namespaceSelectors[%d]: %w", i, j, err)
		}
		out.namespaceSelectors = append(out.namespaceSelectors, s)
	}
	for j := range c.LabelSelectors {
		s, err := metav1.LabelSelectorAsSelector(&c.LabelSelectors[j])
		if err != nil {
			return nil, fmt.Errorf("spec.downsync[%d].labelSelectors[%d]: %w", i, j, err)
		}
		out.labelSelectors = append(out.labelSelectors, s)
	}
	if len(c.Resources) == 0 {
		return nil, fmt.Errorf("spec.downsync[%d].resources: name at least one resource (or \"*\")", i)
	}
	return out, nil
}

func listMatches(list []string, value string) bool {
	return len(list) == 0 || slices.Contains(list, "*") || slices.Contains(list, value)
}

// matches reports whether an object (of a resource the clause names) is
// selected: every field given must hold. namespaceLabels returns the labels
// of a namespace of the object's space.
func (c *clause) matches(namespace, name string, objLabels map[string]string, namespaceLabels func(string) (map[string]string, bool)) bool {
	if namespace == "" {
		// Cluster-scoped objects match only clauses that do not restrict namespaces.
		if len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, "*") || len(c.NamespaceSelectors) > 0 {
			return false
		}
	} else {
		if !listMatches(c.Namespaces, namespace) {
			return false
		}
		if len(c.namespaceSelectors) > 0 {
			nsLabels, ok := namespaceLabels(namespace)
			if !ok || !anySelects(c.namespaceSelectors, nsLabels) {
				return false
			}
		}
	}
	if !listMatches(c.ObjectNames, name) {
		return false
	}
	return len(c.labelSelectors) == 0 || anySelects(c.labelSelectors, objLabels)
}

func anySelects(selectors []labels.Selector, set map[string]string) bool {
	for _, s := range selectors {
		if s.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}
