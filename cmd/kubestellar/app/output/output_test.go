// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func fixture() (*unstructured.UnstructuredList, []Column, [][]string) {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "tenancy.kubestellar.io/v1alpha1", "kind": "SpaceList"}}
	for _, name := range []string{"wds1", "inv1"} {
		list.Items = append(list.Items, unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tenancy.kubestellar.io/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": name}}})
	}
	columns := []Column{{Name: "NAME"}, {Name: "TYPE"}, {Name: "OWNER", Wide: true}}
	rows := [][]string{{"root", "", ""}, {"wds1", "wds", "alice"}, {"inv1", "inventory", "bob"}}
	return list, columns, rows
}

func printed(t *testing.T, o Options) string {
	t.Helper()
	list, columns, rows := fixture()
	var out bytes.Buffer
	require.NoError(t, o.Print(&out, list, columns, rows))
	return out.String()
}

func TestTable(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(printed(t, Options{})), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, []string{"NAME", "TYPE"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"wds1", "wds"}, strings.Fields(lines[2]), "no wide column")

	lines = strings.Split(strings.TrimSpace(printed(t, Options{Format: "wide"})), "\n")
	require.Equal(t, []string{"NAME", "TYPE", "OWNER"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"inv1", "inventory", "bob"}, strings.Fields(lines[3]))

	lines = strings.Split(strings.TrimSpace(printed(t, Options{Format: "wide", NoHeaders: true})), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, []string{"root"}, strings.Fields(lines[0]))
}

func TestObjects(t *testing.T) {
	var fromJSON map[string]any
	require.NoError(t, json.Unmarshal([]byte(printed(t, Options{Format: "json"})), &fromJSON))
	require.Equal(t, "SpaceList", fromJSON["kind"])
	require.Len(t, fromJSON["items"], 2, "the objects only: no row of the table is one")

	var fromYAML map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(printed(t, Options{Format: "yaml"})), &fromYAML))
	require.Equal(t, fromJSON, fromYAML)

	require.Equal(t, "space.tenancy.kubestellar.io/wds1\nspace.tenancy.kubestellar.io/inv1\n", printed(t, Options{Format: "name"}))
}

func TestUnknownFormat(t *testing.T) {
	list, columns, rows := fixture()
	err := (&Options{Format: "xml"}).Print(&bytes.Buffer{}, list, columns, rows)
	require.EqualError(t, err, `--output "xml": must be one of json, yaml, name, wide`)
}
