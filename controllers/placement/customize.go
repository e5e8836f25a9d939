// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// destination is what customization may read about where a copy goes.
type destination struct {
	location, syncTarget metav1Object
}

// metav1Object is the part of an object customization reads.
type metav1Object interface {
	GetName() string
	GetLabels() map[string]string
	GetAnnotations() map[string]string
}

// lookup finds a parameter: the Location's labels, then its annotations,
// then the SyncTarget's labels and annotations.
func (d destination) lookup(key string) (string, bool) {
	for _, o := range []metav1Object{d.location, d.syncTarget} {
		if o == nil {
			continue
		}
		if v, ok := o.GetLabels()[key]; ok {
			return v, true
		}
		if v, ok := o.GetAnnotations()[key]; ok {
			return v, true
		}
	}
	return "", false
}

// customize applies a Customizer's replacements (cust may be nil) and, when
// expand is set, parameter expansion, to a copy bound for dest. On error
// the copy must not be written: it may be half-customized.
func customize(obj *unstructured.Unstructured, cust *edgev2alpha1.Customizer, expand bool, dest destination) error {
	if cust != nil {
		for i, r := range cust.Replacements {
			value, err := decodeJSON(r.Value.Raw)
			if err != nil {
				return fmt.Errorf("replacements[%d].value of Customizer %s is not JSON: %w", i, cust.Name, err)
			}
			if err := setPath(obj.Object, r.Path, value); err != nil {
				return fmt.Errorf("replacements[%d].path %q of Customizer %s: %w", i, r.Path, cust.Name, err)
			}
		}
	}
	if !expand {
		return nil
	}
	expanded, err := expandAll(obj.Object, dest)
	if err != nil {
		return err
	}
	obj.Object = expanded.(map[string]any)
	return nil
}

// expandAll replaces %(key) in every leaf string of v.
func expandAll(v any, dest destination) (any, error) {
	switch t := v.(type) {
	case string:
		return expandString(t, dest)
	case map[string]any:
		for k, item := range t {
			e, err := expandAll(item, dest)
			if err != nil {
				return nil, err
			}
			t[k] = e
		}
		return t, nil
	case []any:
		for i, item := range t {
			e, err := expandAll(item, dest)
			if err != nil {
				return nil, err
			}
			t[i] = e
		}
		return t, nil
	}
	return v, nil
}

// expandString replaces %(key) with the destination's value of key and %%
// with %; any other % stays as it is.
func expandString(s string, dest destination) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '%':
			b.WriteByte('%')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				return "", fmt.Errorf("unterminated parameter in %q", s)
			}
			key := s[i+2 : i+2+end]
			value, ok := dest.lookup(key)
			if !ok {
				return "", fmt.Errorf("parameter %%(%s) is not a label or annotation of Location %q or SyncTarget %q",
					key, nameOf(dest.location), nameOf(dest.syncTarget))
			}
			b.WriteString(value)
			i += 2 + end
		default:
			b.WriteByte('%')
		}
	}
	return b.String(), nil
}

func nameOf(o metav1Object) string {
	if o == nil {
		return ""
	}
	return o.GetName()
}

// pathStep is one step of a path: a field name, or a list index.
type pathStep struct {
	field string
	index int
	isIdx bool
}

// parsePath parses a JSONPath of fields and indexes: .spec.replicas,
// spec.template.spec.containers[0].image, .metadata.labels["a.b/c"], also
// within braces ({.spec.replicas}) and from $.
func parsePath(path string) ([]pathStep, error) {
	p := strings.TrimSpace(path)
	p = strings.TrimSuffix(strings.TrimPrefix(p, "{"), "}")
	p = strings.TrimPrefix(p, "$")
	var steps []pathStep
	for i := 0; i < len(p); {
		switch p[i] {
		case '.':
			if i+1 < len(p) && p[i+1] == '.' {
				return nil, fmt.Errorf("recursive descent (..) is not supported: name the field's full path")
			}
			i++
		case '[':
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated [ at offset %d", i)
			}
			inner := p[i+1 : i+end]
			i += end + 1
			if len(inner) >= 2 && (inner[0] == '"' || inner[0] == '\'') && inner[len(inner)-1] == inner[0] {
				steps = append(steps, pathStep{field: inner[1 : len(inner)-1]})
				continue
			}
			n, err := strconv.Atoi(inner)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("[%s] is neither a list index nor a quoted field name", inner)
			}
			steps = append(steps, pathStep{index: n, isIdx: true})
		default:
			end := strings.IndexAny(p[i:], ".[")
			if end < 0 {
				end = len(p) - i
			}
			name := p[i : i+end]
			if strings.ContainsAny(name, "*?@()=") {
				return nil, fmt.Errorf("%q: only field names and list indexes are supported", name)
			}
			steps = append(steps, pathStep{field: name})
			i += end
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	return steps, nil
}

// setPath sets the value at path, creating missing objects on the way;
// list indexes must exist.
func setPath(obj map[string]any, path string, value any) error {
	steps, err := parsePath(path)
	if err != nil {
		return err
	}
	if !steps[0].isIdx && (steps[0].field == "apiVersion" || steps[0].field == "kind") {
		return fmt.Errorf("%s cannot be customized", steps[0].field)
	}
	var cur any = obj
	for i, step := range steps {
		last := i == len(steps)-1
		if step.isIdx {
			list, ok := cur.([]any)
			if !ok {
				return fmt.Errorf("step %d: [%d] applied to a non-list", i, step.index)
			}
			if step.index >= len(list) {
				return fmt.Errorf("step %d: index %d out of range (length %d)", i, step.index, len(list))
			}
			if last {
				list[step.index] = value
				return nil
			}
			cur = list[step.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return fmt.Errorf("step %d: field %q applied to a non-object", i, step.field)
		}
		if last {
			m[step.field] = value
			return nil
		}
		next, exists := m[step.field]
		if !exists || next == nil {
			if steps[i+1].isIdx {
				return fmt.Errorf("step %d: %q does not exist, so it has no index %d", i, step.field, steps[i+1].index)
			}
			next = map[string]any{}
			m[step.field] = next
		}
		cur = next
	}
	return nil
}

// decodeJSON decodes a value as unstructured objects hold them: integers as
// int64 (exactly, however large), other numbers as float64.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return fromNumbers(v)
}

func fromNumbers(v any) (any, error) {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	case map[string]any:
		for k, item := range t {
			converted, err := fromNumbers(item)
			if err != nil {
				return nil, err
			}
			t[k] = converted
		}
	case []any:
		for i, item := range t {
			converted, err := fromNumbers(item)
			if err != nil {
				return nil, err
			}
			t[i] = converted
		}
	}
	return v, nil
}
