// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func field(name string) pathStep { return pathStep{field: name} }
func index(n int) pathStep       { return pathStep{index: n, isIdx: true} }

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		name    string
		path    string
		want    []pathStep
		wantErr string
	}{
		{name: "leading dot", path: ".spec.replicas", want: []pathStep{field("spec"), field("replicas")}},
		{name: "no leading dot", path: "spec.replicas", want: []pathStep{field("spec"), field("replicas")}},
		{name: "single field", path: ".spec", want: []pathStep{field("spec")}},
		{name: "dollar root", path: "$.spec.replicas", want: []pathStep{field("spec"), field("replicas")}},
		{name: "braces", path: "{.spec.replicas}", want: []pathStep{field("spec"), field("replicas")}},
		{name: "braces and dollar", path: "{$.spec.replicas}", want: []pathStep{field("spec"), field("replicas")}},
		{name: "surrounding space", path: "  {.spec.replicas}\t", want: []pathStep{field("spec"), field("replicas")}},
		{name: "list index", path: "spec.template.spec.containers[0].image",
			want: []pathStep{field("spec"), field("template"), field("spec"), field("containers"), index(0), field("image")}},
		{name: "multi-digit index", path: ".spec.containers[12]", want: []pathStep{field("spec"), field("containers"), index(12)}},
		{name: "nested indexes", path: ".a[1][2].b", want: []pathStep{field("a"), index(1), index(2), field("b")}},
		{name: "double-quoted key with dots and slash", path: `.metadata.labels["app.kubernetes.io/name"]`,
			want: []pathStep{field("metadata"), field("labels"), field("app.kubernetes.io/name")}},
		{name: "single-quoted key", path: `.metadata.annotations['example.com/x.y']`,
			want: []pathStep{field("metadata"), field("annotations"), field("example.com/x.y")}},
		{name: "quoted key with bracket", path: `.metadata.labels["a[b"]`,
			want: []pathStep{field("metadata"), field("labels"), field("a[b")}},
		{name: "quoted keys only", path: `["spec"]['replicas']`, want: []pathStep{field("spec"), field("replicas")}},
		{name: "quoted key then index", path: `$["data"][3]`, want: []pathStep{field("data"), index(3)}},

		{name: "empty", path: "", wantErr: "empty path"},
		{name: "only dollar", path: "$", wantErr: "empty path"},
		{name: "only braces", path: "{}", wantErr: "empty path"},
		{name: "only dots", path: "...", wantErr: "recursive descent (..) is not supported"},
		{name: "single dot", path: ".", wantErr: "empty path"},
		{name: "unterminated bracket", path: ".spec.containers[0", wantErr: "unterminated [ at offset 16"},
		{name: "unterminated quoted bracket", path: `.metadata.labels["a`, wantErr: "unterminated ["},
		{name: "negative index", path: ".spec.containers[-1]", wantErr: "[-1] is neither a list index nor a quoted field name"},
		{name: "non-numeric index", path: ".spec.containers[first]", wantErr: "[first] is neither"},
		{name: "empty brackets", path: ".spec.containers[]", wantErr: "[] is neither"},
		{name: "mismatched quotes", path: `.metadata.labels["a']`, wantErr: `["a'] is neither`},
		{name: "slice", path: ".spec.containers[0:2]", wantErr: "[0:2] is neither"},
		{name: "wildcard index", path: ".spec.containers[*].image", wantErr: "[*] is neither"},
		{name: "wildcard field", path: ".metadata.labels.*", wantErr: `"*": only field names and list indexes are supported`},
		{name: "partial wildcard field", path: ".spec.contain*", wantErr: `"contain*": only field names`},
		{name: "filter", path: `.spec.containers[?(@.name=="a")].image`, wantErr: "is neither a list index nor a quoted field name"},
		{name: "function-like field", path: ".spec.length()", wantErr: `"length()": only field names`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePath(tc.path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParsePathRecursiveDescent(t *testing.T) {
	_, err := parsePath("$..image")
	require.Error(t, err)
}

func TestSetPath(t *testing.T) {
	for _, tc := range []struct {
		name    string
		obj     string
		path    string
		value   any
		want    string // the whole object after setting; unchanged from obj when wantErr is set
		wantErr string
	}{
		{name: "replaces a scalar", obj: `{"spec":{"replicas":1,"paused":false}}`, path: ".spec.replicas", value: int64(3),
			want: `{"spec":{"replicas":3,"paused":false}}`},
		{name: "creates missing objects", obj: `{"kind":"Deployment"}`, path: ".spec.template.metadata.labels.app", value: "web",
			want: `{"kind":"Deployment","spec":{"template":{"metadata":{"labels":{"app":"web"}}}}}`},
		{name: "replaces a null on the way", obj: `{"spec":null}`, path: ".spec.replicas", value: int64(2),
			want: `{"spec":{"replicas":2}}`},
		{name: "quoted key is one field", obj: `{"metadata":{"name":"x"}}`, path: `.metadata.labels["app.kubernetes.io/name"]`, value: "web",
			want: `{"metadata":{"name":"x","labels":{"app.kubernetes.io/name":"web"}}}`},
		{name: "field of a list element", obj: `{"spec":{"containers":[{"name":"a","image":"old"},{"name":"b","image":"old"}]}}`,
			path: ".spec.containers[1].image", value: "new",
			want: `{"spec":{"containers":[{"name":"a","image":"old"},{"name":"b","image":"new"}]}}`},
		{name: "whole list element", obj: `{"spec":{"args":["a","b","c"]}}`, path: ".spec.args[2]", value: "z",
			want: `{"spec":{"args":["a","b","z"]}}`},
		{name: "object value", obj: `{"spec":{}}`, path: ".spec.resources", value: map[string]any{"limits": map[string]any{"cpu": "1"}},
			want: `{"spec":{"resources":{"limits":{"cpu":"1"}}}}`},
		{name: "missing field in a list element is created", obj: `{"spec":{"containers":[{"name":"a"}]}}`,
			path: ".spec.containers[0].env", value: []any{"x"},
			want: `{"spec":{"containers":[{"name":"a","env":["x"]}]}}`},
		{name: "nested field under apiVersion-like name deeper down", obj: `{"spec":{}}`, path: ".spec.kind", value: "ok",
			want: `{"spec":{"kind":"ok"}}`},

		{name: "index out of range", obj: `{"spec":{"containers":[{"name":"a"},{"name":"b"}]}}`, path: ".spec.containers[2].image", value: "x",
			wantErr: "step 2: index 2 out of range (length 2)"},
		{name: "index out of range on last step", obj: `{"spec":{"args":[]}}`, path: ".spec.args[0]", value: "x",
			wantErr: "index 0 out of range (length 0)"},
		{name: "field on a number", obj: `{"spec":{"replicas":3}}`, path: ".spec.replicas.value", value: "x",
			wantErr: `step 2: field "value" applied to a non-object`},
		{name: "field on a list", obj: `{"spec":{"args":["a"]}}`, path: ".spec.args.first", value: "x",
			wantErr: `field "first" applied to a non-object`},
		{name: "index on an object", obj: `{"spec":{"template":{}}}`, path: ".spec.template[0]", value: "x",
			wantErr: "step 2: [0] applied to a non-list"},
		{name: "index at the root", obj: `{"spec":{}}`, path: "[0]", value: "x",
			wantErr: "step 0: [0] applied to a non-list"},
		{name: "index on a missing field", obj: `{"spec":{"template":{"spec":{}}}}`, path: ".spec.template.spec.containers[0].image", value: "x",
			wantErr: `step 3: "containers" does not exist, so it has no index 0`},
		{name: "index on a null field", obj: `{"spec":{"args":null}}`, path: ".spec.args[0]", value: "x",
			wantErr: `"args" does not exist, so it has no index 0`},
		{name: "apiVersion refused", obj: `{"apiVersion":"v1"}`, path: ".apiVersion", value: "v2", wantErr: "apiVersion cannot be customized"},
		{name: "kind refused", obj: `{"kind":"Pod"}`, path: "kind", value: "Secret", wantErr: "kind cannot be customized"},
		{name: "quoted kind refused", obj: `{"kind":"Pod"}`, path: `$["kind"]`, value: "Secret", wantErr: "kind cannot be customized"},
		{name: "bad path", obj: `{}`, path: ".spec[x]", value: "x", wantErr: "[x] is neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(tc.obj), &obj))
			err := setPath(obj, tc.path, tc.value)
			got, merr := json.Marshal(obj)
			require.NoError(t, merr)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.JSONEq(t, tc.obj, string(got), "the object must not change")
				return
			}
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(got))
		})
	}
}

// testDest is a destination whose four sources hold overlapping keys, to
// show the lookup order: k1 is in all four, k2 in all but the Location's
// labels, k3 only in the SyncTarget's, k4 only in its annotations.
func testDest() destination {
	loc := &edgev2alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: "loc1",
		Labels:      map[string]string{"k1": "locLabel"},
		Annotations: map[string]string{"k1": "locAnn", "k2": "locAnn"}}}
	st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "st1",
		Labels:      map[string]string{"k1": "stLabel", "k2": "stLabel", "k3": "stLabel"},
		Annotations: map[string]string{"k1": "stAnn", "k2": "stAnn", "k3": "stAnn", "k4": "stAnn", "tricky": "%(k1)"}}}
	return destination{location: loc, syncTarget: st}
}

func TestExpandString(t *testing.T) {
	onlyST := destination{syncTarget: testDest().syncTarget}
	for _, tc := range []struct {
		name    string
		in      string
		dest    destination
		want    string
		wantErr []string
	}{
		{name: "no percent", in: "plain value", want: "plain value"},
		{name: "empty", in: "", want: ""},
		{name: "Location label first", in: "%(k1)", want: "locLabel"},
		{name: "then Location annotation", in: "%(k2)", want: "locAnn"},
		{name: "then SyncTarget label", in: "%(k3)", want: "stLabel"},
		{name: "then SyncTarget annotation", in: "%(k4)", want: "stAnn"},
		{name: "several in one string", in: "a-%(k1)-b-%(k4)-c", want: "a-locLabel-b-stAnn-c"},
		{name: "adjacent", in: "%(k3)%(k4)", want: "stLabelstAnn"},
		{name: "double percent", in: "100%%", want: "100%"},
		{name: "double percent before parenthesis is literal", in: "%%(k1)", want: "%(k1)"},
		{name: "lone percent at end", in: "100%", want: "100%"},
		{name: "lone percent in the middle", in: "50% off %d", want: "50% off %d"},
		{name: "only a percent", in: "%", want: "%"},
		{name: "value is not expanded again", in: "%(tricky)", want: "%(k1)"},
		{name: "without a Location", in: "%(k1)/%(k4)", dest: onlyST, want: "stLabel/stAnn"},

		{name: "unterminated", in: "x-%(k1", wantErr: []string{"unterminated parameter", `"x-%(k1"`}},
		{name: "unterminated after a good one", in: "%(k1)%(", wantErr: []string{"unterminated parameter"}},
		{name: "missing key", in: "a %(nope) b",
			wantErr: []string{"parameter %(nope) is not a label or annotation", `Location "loc1"`, `SyncTarget "st1"`}},
		{name: "empty key", in: "%()", wantErr: []string{"parameter %() is not"}},
		{name: "missing key without a Location", in: "%(nope)", dest: onlyST,
			wantErr: []string{"parameter %(nope)", `Location ""`, `SyncTarget "st1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := tc.dest
			if dest.syncTarget == nil {
				dest = testDest()
			}
			got, err := expandString(tc.in, dest)
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					require.ErrorContains(t, err, w)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func rawJSON(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

func TestCustomize(t *testing.T) {
	const base = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"where":"%(k1)"}},
		"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"c","image":"img:%(k4)","args":["%(k3)",7,true]}]}}}}`
	cust := func(repls ...edgev2alpha1.Replacement) *edgev2alpha1.Customizer {
		return &edgev2alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "cust1"}, Replacements: repls}
	}
	repl := func(path, value string) edgev2alpha1.Replacement {
		return edgev2alpha1.Replacement{Path: path, Value: rawJSON(value)}
	}
	for _, tc := range []struct {
		name    string
		cust    *edgev2alpha1.Customizer
		expand  bool
		want    string
		wantErr []string
	}{
		{name: "nothing to do", want: base},
		{name: "no expansion unless asked", cust: cust(repl(".spec.replicas", "2")),
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"where":"%(k1)"}},
				"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c","image":"img:%(k4)","args":["%(k3)",7,true]}]}}}}`},
		{name: "expansion without a Customizer", expand: true,
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"where":"locLabel"}},
				"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"c","image":"img:stAnn","args":["stLabel",7,true]}]}}}}`},
		{name: "replacements in order, last wins", cust: cust(repl(".spec.replicas", "2"), repl(".spec.replicas", "5")),
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"where":"%(k1)"}},
				"spec":{"replicas":5,"template":{"spec":{"containers":[{"name":"c","image":"img:%(k4)","args":["%(k3)",7,true]}]}}}}`},
		{name: "a later replacement builds on an earlier one",
			cust: cust(repl(".spec.strategy", `{"type":"Recreate"}`), repl(".spec.strategy.type", `"RollingUpdate"`), repl(".spec.strategy.extra", `1`)),
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"where":"%(k1)"}},
				"spec":{"replicas":1,"strategy":{"type":"RollingUpdate","extra":1},"template":{"spec":{"containers":[{"name":"c","image":"img:%(k4)","args":["%(k3)",7,true]}]}}}}`},
		{name: "JSON value types", cust: cust(
			repl(".spec.replicas", "3"),
			repl(".spec.template.spec.containers[0].image", `"nginx:1.25"`),
			repl(".spec.template.spec.containers[0].resources", `{"limits":{"cpu":"500m"}}`),
			repl(".spec.template.spec.containers[0].args", `["--a","--b"]`),
			repl(".spec.paused", `true`),
			repl(".spec.ratio", `1.5`)),
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"where":"%(k1)"}},
				"spec":{"replicas":3,"paused":true,"ratio":1.5,"template":{"spec":{"containers":[
				{"name":"c","image":"nginx:1.25","args":["--a","--b"],"resources":{"limits":{"cpu":"500m"}}}]}}}}`},
		{name: "replaced values are expanded too", expand: true, cust: cust(
			repl(".spec.template.spec.containers[0].env", `[{"name":"REGION","value":"%(k2)"}]`),
			repl(".metadata.annotations", `{"note":"100%% %(k3)"}`)),
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"where":"locLabel"},
				"annotations":{"note":"100% stLabel"}},
				"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"c","image":"img:stAnn","args":["stLabel",7,true],
				"env":[{"name":"REGION","value":"locAnn"}]}]}}}}`},

		{name: "value is not JSON", cust: cust(repl(".spec.replicas", "2"), repl(".spec.paused", `{not json`)),
			wantErr: []string{"replacements[1].value of Customizer cust1 is not JSON"}},
		{name: "empty value", cust: cust(repl(".spec.replicas", "")),
			wantErr: []string{"replacements[0].value of Customizer cust1 is not JSON"}},
		{name: "bad path", cust: cust(repl(".spec.template.spec.containers[3].image", `"x"`)),
			wantErr: []string{`replacements[0].path ".spec.template.spec.containers[3].image" of Customizer cust1`, "index 3 out of range (length 1)"}},
		{name: "kind refused", cust: cust(repl(".kind", `"StatefulSet"`)),
			wantErr: []string{`replacements[0].path ".kind"`, "kind cannot be customized"}},
		{name: "missing parameter", expand: true, cust: cust(repl(".spec.template.spec.hostname", `"%(absent)"`)),
			wantErr: []string{"parameter %(absent)", `Location "loc1"`, `SyncTarget "st1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			require.NoError(t, obj.UnmarshalJSON([]byte(base)))
			err := customize(obj, tc.cust, tc.expand, testDest())
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					require.ErrorContains(t, err, w)
				}
				return
			}
			require.NoError(t, err)
			// The result must stay a valid unstructured object (DeepCopy panics on
			// value types JSON does not have).
			require.NotPanics(t, func() { obj.DeepCopy() })
			got, err := json.Marshal(obj.Object)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestCustomizeLargeInteger(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	cust := &edgev2alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Replacements: []edgev2alpha1.Replacement{
		{Path: ".spec.big", Value: rawJSON("9007199254740993")},
	}}
	require.NoError(t, customize(obj, cust, false, testDest()))
	got, err := json.Marshal(obj.Object)
	require.NoError(t, err)
	// Compared as text: JSONEq would decode both sides to the same float64.
	require.Equal(t, `{"spec":{"big":9007199254740993}}`, string(got))
}
