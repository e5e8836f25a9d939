// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package chart is the syncer's Helm chart (this directory: Chart.yaml,
// values.yaml, templates/) and the one renderer of its template outside
// Helm: `kubestellar syncer manifest` prints what Render makes, so the
// CLI's manifest and `helm template` are the same objects from the same
// file, never two copies.
//
// Render gives the template Helm's data (.Values, the chart's defaults
// deep-merged with the caller's; .Release.Name and .Release.Namespace) and
// the few Helm functions the template may use, with Helm's meaning: quote,
// b64enc, toYaml, nindent, required (printf and eq are Go's). A test
// renders the chart with the real helm and compares.
package chart

import (
	"bytes"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

//go:embed Chart.yaml values.yaml templates/syncer.yaml
var files embed.FS

// DefaultNamespace is where the syncer runs unless told otherwise.
const DefaultNamespace = "kubestellar-syncer"

// Defaults returns the chart's values.yaml.
func Defaults() (map[string]any, error) {
	data, err := files.ReadFile("values.yaml")
	if err != nil {
		return nil, err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("the chart's values.yaml: %w", err)
	}
	return values, nil
}

// Render renders the syncer's manifest into namespace with values over
// the chart's defaults, as `helm template kubestellar-syncer packaging/chart
// --namespace NAMESPACE` does with the same values.
func Render(namespace string, values map[string]any) ([]byte, error) {
	defaults, err := Defaults()
	if err != nil {
		return nil, err
	}
	text, err := files.ReadFile("templates/syncer.yaml")
	if err != nil {
		return nil, err
	}
	t, err := template.New("syncer.yaml").Option("missingkey=zero").Funcs(funcs).Parse(string(text))
	if err != nil {
		return nil, err
	}
	data := map[string]any{
		"Values":  merge(defaults, values),
		"Release": map[string]any{"Name": "kubestellar-syncer", "Namespace": namespace, "Service": "kubestellar"},
	}
	var out bytes.Buffer
	if err := t.Execute(&out, data); err != nil {
		// The template's own error (required) is the message; drop where
		// in the template it was raised.
		var execErr template.ExecError
		if errors.As(err, &execErr) {
			if _, msg, ok := strings.Cut(execErr.Err.Error(), "error calling required: "); ok {
				return nil, fmt.Errorf("%s", msg)
			}
		}
		return nil, err
	}
	return out.Bytes(), nil
}

// merge is Helm's coalescing of values: maps merge key by key, anything
// else in over replaces what base has.
func merge(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = merge(bm, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// funcs are the Helm (sprig) functions the template may use, as Helm
// defines them.
var funcs = template.FuncMap{
	"quote": func(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) },
	"b64enc": func(s string) string {
		return base64.StdEncoding.EncodeToString([]byte(s))
	},
	"toYaml": func(v any) (string, error) {
		data, err := yaml.Marshal(v)
		return strings.TrimSuffix(string(data), "\n"), err
	},
	"nindent": func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	},
	"required": func(msg string, v any) (any, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	},
}
