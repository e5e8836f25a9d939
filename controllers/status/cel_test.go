// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// nestedComprehension is the attack of issue 13: levels comprehensions
// over a ten-element list, nested, whose innermost test never holds, so
// that every one of the 10^levels iterations runs.
func nestedComprehension(levels int) string {
	list := "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
	vars := make([]string, levels)
	for i := range vars {
		vars[i] = fmt.Sprintf("x%d", i)
	}
	expr := strings.Join(vars, " + ") + " < 0"
	for i := levels - 1; i >= 0; i-- {
		expr = fmt.Sprintf("%s.exists(%s, %s)", list, vars[i], expr)
	}
	return expr
}

func selectOf(exprs ...string) edgev2alpha1.StatusCollectorSpec {
	spec := edgev2alpha1.StatusCollectorSpec{Limit: 10}
	for i, e := range exprs {
		spec.Select = append(spec.Select, edgev2alpha1.NamedExpression{Name: fmt.Sprintf("c%d", i), Def: edgev2alpha1.Expression(e)})
	}
	return spec
}

// exampleCollectors reads the StatusCollectors of the README's examples.
func exampleCollectors(t *testing.T) map[string]edgev2alpha1.StatusCollectorSpec {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "examples", "placement", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]edgev2alpha1.StatusCollectorSpec{}
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var sc edgev2alpha1.StatusCollector
			err := dec.Decode(&sc)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, name)
			if sc.Kind == "StatusCollector" {
				out[sc.Name] = sc.Spec
			}
		}
		require.NoError(t, f.Close())
	}
	require.NotEmpty(t, out, "the examples hold StatusCollectors")
	return out
}

func TestValidateSpecAcceptsTheExamples(t *testing.T) {
	c, err := newCompiler()
	require.NoError(t, err)
	for name, spec := range exampleCollectors(t) {
		t.Run(name, func(t *testing.T) {
			require.Empty(t, c.validateSpec(spec))
		})
	}
}

func TestValidateSpec(t *testing.T) {
	c, err := newCompiler()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		spec edgev2alpha1.StatusCollectorSpec
		// want are the field errors expected, as type, field and a part
		// of the detail; none when empty.
		want []field.Error
	}{
		{name: "a field", spec: selectOf("returned.status.availableReplicas")},
		{name: "one pass over a list of the status", spec: selectOf("returned.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')")},
		{name: "a string search in one pass", spec: selectOf("returned.status.conditions.exists(c, c.message.contains('quota'))")},
		{name: "filter then map", spec: selectOf("returned.status.conditions.filter(c, c.type == 'Ready').map(c, c.status)")},
		{name: "the reported pods", spec: selectOf("returned.associated.notReadyPods.map(p, p.name + ': ' + p.reason)")},
		{name: "one pass over the object", spec: selectOf("obj.spec.template.spec.containers.map(c, c.name + '=' + c.image)")},
		{name: "names", spec: selectOf("inventory.name + '/' + obj.metadata.name", "obj.metadata.name.matches('^web-.*')")},
		{name: "four nested comprehensions over literals fit", spec: selectOf(nestedComprehension(4))},
		{name: "five nested comprehensions over literals", spec: selectOf(nestedComprehension(5)),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "exceeds budget 1000000 per expression by factor of 1."}}},
		{name: "seven nested comprehensions over literals", spec: selectOf(nestedComprehension(7)),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "exceeds budget 1000000 per expression by factor of more than 100x"}}},
		{name: "ten nested comprehensions over literals", spec: selectOf(nestedComprehension(10)),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "by factor of more than 100x"}}},
		{name: "the attack as a filter", spec: edgev2alpha1.StatusCollectorSpec{Filter: expr(nestedComprehension(10)),
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.filter", Detail: "by factor of more than 100x"}}},
		{name: "the attack as a subject", spec: edgev2alpha1.StatusCollectorSpec{
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationSum, Subject: expr(nestedComprehension(10))}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.combinedFields[0].subject", Detail: "by factor of more than 100x"}}},
		{name: "the attack as a group", spec: edgev2alpha1.StatusCollectorSpec{
			GroupBy:        []edgev2alpha1.NamedExpression{{Name: "g", Def: edgev2alpha1.Expression(nestedComprehension(10))}},
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.groupBy[0].def", Detail: "by factor of more than 100x"}}},
		{name: "comprehensions over inputs nested", spec: selectOf("obj.spec.template.spec.containers.all(c, returned.status.conditions.exists(d, d.type == c.name))"),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "by factor of more than 100x"}}},
		{name: "comprehensions over the reported pods nested", spec: selectOf("returned.associated.notReadyPods.all(c, returned.associated.notReadyPods.exists(d, d.name == c.name))"),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "by factor of 2."}}},
		{name: "does not compile", spec: selectOf("this is not CEL ("),
			want: []field.Error{{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "compilation failed: ERROR: <input>:1:6: Syntax error"}}},
		{name: "undeclared variable", spec: selectOf("status.replicas"),
			want: []field.Error{{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "undeclared reference to 'status'"}}},
		{name: "too long", spec: selectOf(strings.Repeat("1 + ", MaxExpressionLength/4) + "1"),
			want: []field.Error{{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "size exceeds limit"}}},
		{name: "empty", spec: selectOf(" "),
			want: []field.Error{{Type: field.ErrorTypeRequired, Field: "spec.select[0].def", Detail: "an expression is required"}}},
		{name: "SUM without a subject", spec: edgev2alpha1.StatusCollectorSpec{
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationSum}}},
			want: []field.Error{{Type: field.ErrorTypeRequired, Field: "spec.combinedFields[0].subject", Detail: "SUM needs a subject"}}},
		{name: "select and combinedFields", spec: edgev2alpha1.StatusCollectorSpec{
			Select:         []edgev2alpha1.NamedExpression{{Name: "x", Def: "inventory.name"}},
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select", Detail: "exclude each other"}}},
		{name: "neither select nor combinedFields", spec: edgev2alpha1.StatusCollectorSpec{Filter: expr("true")},
			want: []field.Error{{Type: field.ErrorTypeRequired, Field: "spec", Detail: "name combinedFields or select"}}},
		{name: "every problem is reported", spec: selectOf("(", nestedComprehension(8)),
			want: []field.Error{
				{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "compilation failed"},
				{Type: field.ErrorTypeForbidden, Field: "spec.select[1].def", Detail: "by factor of more than 100x"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := c.validateSpec(tc.spec)
			require.Len(t, errs, len(tc.want), "errors: %v", errs)
			for i, want := range tc.want {
				require.Equal(t, want.Type, errs[i].Type, "error %d: %v", i, errs[i])
				require.Equal(t, want.Field, errs[i].Field, "error %d: %v", i, errs[i])
				require.Contains(t, errs[i].Detail, want.Detail, "error %d", i)
			}
		})
	}
}

// TestCostMessage checks the refusal says the cost, the budget, by how
// much and what to do.
func TestCostMessage(t *testing.T) {
	c, err := newCompiler()
	require.NoError(t, err)
	errs := c.validateSpec(selectOf(nestedComprehension(10)))
	require.Len(t, errs, 1)
	cost := c.compile(edgev2alpha1.Expression(nestedComprehension(10))).cost.Max
	require.Equal(t, fmt.Sprintf("spec.select[0].def: Forbidden: estimated cost %d exceeds budget 1000000 per expression by factor of more than 100x "+
		"(the estimate assumes lists, maps and strings of up to 1024 elements in obj and returned.status; "+
		"avoid nesting comprehensions such as all, exists, map and filter in one another)", cost),
		errs[0].Error())

	for _, tc := range []struct {
		cost, budget uint64
		want         string
	}{
		{cost: 101, budget: 100, want: "by factor of 1.01x"},
		{cost: 250, budget: 100, want: "by factor of 2.5x"},
		{cost: 10001, budget: 100, want: "by factor of more than 100x"},
	} {
		require.Contains(t, costMessage("estimated cost", tc.cost, tc.budget, "per expression"), tc.want)
	}
}

// TestCollectorBudget: expressions each within budget are refused together
// when their total is not.
func TestCollectorBudget(t *testing.T) {
	c, err := newCompiler()
	require.NoError(t, err)
	const e = "returned.status.conditions.filter(c, c.type == 'Ready').map(c, c.status)"
	cost := c.compile(e).cost.Max
	require.Less(t, cost, ExpressionCostBudget)
	fit := int(CollectorCostBudget / cost)

	exprs := make([]string, fit)
	for i := range exprs {
		exprs[i] = e
	}
	require.Empty(t, c.validateSpec(selectOf(exprs...)))

	errs := c.validateSpec(selectOf(append(exprs, e)...))
	require.Len(t, errs, 1, "errors: %v", errs)
	require.Equal(t, field.ErrorTypeForbidden, errs[0].Type)
	require.Equal(t, "spec", errs[0].Field)
	require.Contains(t, errs[0].Detail, fmt.Sprintf("estimated total cost of the expressions %d exceeds budget %d per StatusCollector", uint64(fit+1)*cost, CollectorCostBudget))
}

func repeat(s string, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func destinations(n int) []row {
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{Inventory: fmt.Sprintf("edge%d", i), Status: map[string]any{"availableReplicas": int64(1)}}
	}
	return rows
}

var web = map[string]any{"spec": map[string]any{"replicas": int64(2)}}

// onlyCost leaves the cost limits alone to stop an evaluation, however slow
// the machine.
func onlyCost(l *limits) { l.timeout = time.Hour }

// TestRuntimeLimits: what gets past the estimate (or was stored before it
// existed) is stopped by the runtime limits with an error that says which.
func TestRuntimeLimits(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		limits func(*limits)
		ctx    context.Context
		spec   edgev2alpha1.StatusCollectorSpec
		rows   int
		// status is what each destination reports, if not the default.
		status map[string]any
		// want is the *LimitError; wantErr another error (ctx ended).
		want    *LimitError
		wantErr error
	}{
		{name: "fits", spec: selectOf(nestedComprehension(3)), rows: 3},
		{name: "an input larger than the estimate assumes", limits: onlyCost, spec: selectOf("inventory.name", "returned.status.items.exists(s, s.contains('needle'))"), rows: 1,
			status: map[string]any{"items": repeat(strings.Repeat("x", 1<<20), 20)},
			want:   &LimitError{Field: "spec.select[1].def", Reason: "evaluation exceeded the cost limit of 1000000 per evaluation and was stopped; simplify the expression"}},
		{name: "an input the estimate assumes", spec: selectOf("inventory.name", "returned.status.items.exists(s, s.contains('needle'))"), rows: 1,
			status: map[string]any{"items": repeat(strings.Repeat("x", realisticInputSize), realisticInputSize)}},
		{name: "the attack, stored before admission refused it", limits: onlyCost, spec: edgev2alpha1.StatusCollectorSpec{Filter: expr(nestedComprehension(10)),
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}}, rows: 2,
			want: &LimitError{Field: "spec.filter", Reason: "evaluation exceeded the cost limit of 1000000 per evaluation and was stopped; simplify the expression"}},
		{name: "the destinations together over the summary budget", limits: func(l *limits) { onlyCost(l); l.summary = 50_000 },
			spec: edgev2alpha1.StatusCollectorSpec{CombinedFields: []edgev2alpha1.NamedAggregator{
				{Name: "n", Type: edgev2alpha1.AggregationSum, Subject: expr(fmt.Sprintf("%s ? 0 : 1", nestedComprehension(3)))}}}, rows: 100,
			want: &LimitError{Field: "spec.combinedFields[0].subject", Reason: "evaluations for one object exceeded the cost budget of 50000 and were stopped; simplify the expressions"}},
		{name: "the deadline interrupts a comprehension without a cost limit", limits: func(l *limits) { l.evaluation, l.timeout = math.MaxUint64, 50*time.Millisecond },
			spec: selectOf(nestedComprehension(10)), rows: 1,
			want: &LimitError{Field: "spec.select[0].def", Reason: "evaluations for one object took longer than 50ms and were stopped; simplify the expressions"}},
		{name: "an ended context is not a limit", ctx: cancelled, spec: selectOf("inventory.name"), rows: 1, wantErr: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := defaultLimits()
			if tc.limits != nil {
				tc.limits(&l)
			}
			c, err := newCompilerWithLimits(l, programCacheSize)
			require.NoError(t, err)
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			rows := destinations(tc.rows)
			if tc.status != nil {
				for i := range rows {
					rows[i].Status = tc.status
				}
				// What fits the estimate is admitted.
				require.Empty(t, c.validateSpec(tc.spec))
			}
			result, err := c.summarize(ctx, "sc", tc.spec, web, rows)
			switch {
			case tc.want != nil:
				var limit *LimitError
				require.ErrorAs(t, err, &limit)
				require.Equal(t, tc.want, limit)
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
				var limit *LimitError
				require.False(t, errors.As(err, &limit), "not a limit: %v", err)
			default:
				require.NoError(t, err)
				require.Len(t, result.Rows, tc.rows)
			}
		})
	}
}

// TestSummarize checks the summaries of the examples' collectors.
func TestSummarize(t *testing.T) {
	c, err := newCompiler()
	require.NoError(t, err)
	examples := exampleCollectors(t)
	rows := []row{
		{Inventory: "edge1", Status: map[string]any{"availableReplicas": int64(1)}, Associated: map[string]any{"podPhases": map[string]any{"Running": int64(1), "Pending": int64(1)}}},
		{Inventory: "edge2", Status: map[string]any{"availableReplicas": int64(2)}, Associated: map[string]any{"podPhases": map[string]any{"Running": int64(2)}}},
		{Inventory: "edge3"}, // not reported yet
	}
	for _, tc := range []struct {
		collector string
		want      string
	}{
		{collector: "available", want: `{"name":"available","columnNames":["availableReplicas","clusters","runningPods"],"rows":[{"columns":[3,3,3]}]}`},
		{collector: "not-available", want: `{"name":"not-available","columnNames":["cluster"],"rows":[{"columns":["edge1"]},{"columns":["edge3"]}]}`},
	} {
		t.Run(tc.collector, func(t *testing.T) {
			spec, ok := examples[tc.collector]
			require.True(t, ok)
			result, err := c.summarize(context.Background(), tc.collector, spec, web, rows)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, mustJSON(t, result))
		})
	}
}

// TestProgramCacheIsBounded compiles more expressions than the cache holds.
func TestProgramCacheIsBounded(t *testing.T) {
	const size = 8
	c, err := newCompilerWithLimits(defaultLimits(), size)
	require.NoError(t, err)
	first := c.compile("inventory.name == 'edge0'")
	require.Same(t, first, c.compile("inventory.name == 'edge0'"), "a compiled expression is reused")
	for i := 1; i < 1000; i++ {
		c.compile(edgev2alpha1.Expression(fmt.Sprintf("inventory.name == 'edge%d'", i)))
		require.LessOrEqual(t, c.programs.Len(), size)
	}
	require.Equal(t, size, c.programs.Len())
	latest := c.compile("inventory.name == 'edge999'")
	require.Same(t, latest, c.compile("inventory.name == 'edge999'"), "the recently used stay")
	again := c.compile("inventory.name == 'edge0'")
	require.NotSame(t, first, again, "the least recently used were dropped, and are compiled again")
	require.NoError(t, again.err)

	// Expressions that do not compile are cached, and bounded, too.
	for i := range 100 {
		require.Error(t, c.compile(edgev2alpha1.Expression(fmt.Sprintf("(%d", i))).err)
	}
	require.Equal(t, size, c.programs.Len())
}

func TestLRU(t *testing.T) {
	c := newLRU[string, int](2)
	c.Add("a", 1)
	c.Add("b", 2)
	_, _ = c.Get("a") // b is now the least recently used
	c.Add("c", 3)
	_, ok := c.Get("b")
	require.False(t, ok)
	v, ok := c.Get("a")
	require.True(t, ok)
	require.Equal(t, 1, v)
	c.Add("a", 10)
	require.Equal(t, []int{10, 3}, c.Values())
	c.Remove("a")
	require.Equal(t, []int{3}, c.Values())
	require.Equal(t, 1, c.Len())
}

func TestSummaryFailures(t *testing.T) {
	a := collectorRef{space: "wds1", name: "a", uid: "u1", generation: 1}
	aNext := collectorRef{space: "wds1", name: "a", uid: "u1", generation: 2}
	b := collectorRef{space: "wds1", name: "b", uid: "u2", generation: 1}
	fail := func(ref collectorRef, what string) summaryFailure {
		return summaryFailure{collector: ref, what: what, err: "spec.filter: over"}
	}
	f := newSummaryFailures(2)
	require.ElementsMatch(t, []collectorRef{a, b}, f.set("web", []summaryFailure{fail(a, "web under p"), fail(b, "web under p")}))
	require.Empty(t, f.set("web", []summaryFailure{fail(a, "web under p"), fail(b, "web under p")}), "nothing changed")
	require.Equal(t, []collectorRef{a}, f.set("db", []summaryFailure{fail(a, "db under p")}))
	require.Len(t, f.of(a), 2)
	require.Empty(t, f.of(aNext), "a new generation starts clean")

	require.Equal(t, []collectorRef{b}, f.set("web", []summaryFailure{fail(a, "web under p")}), "b recovered on web")
	require.Equal(t, []collectorRef{a}, f.set("web", nil), "web is gone")
	require.Equal(t, []summaryFailure{fail(a, "db under p")}, f.of(a))

	// The least recently reconciled objects are forgotten first.
	f.set("x", []summaryFailure{fail(b, "x")})
	f.set("y", []summaryFailure{fail(b, "y")})
	require.Empty(t, f.of(a))
	require.Len(t, f.of(b), 2)
}

func TestCollectorCondition(t *testing.T) {
	comp, err := newCompiler()
	require.NoError(t, err)
	c := &Controller{compiler: comp}
	sc := func(spec edgev2alpha1.StatusCollectorSpec) *edgev2alpha1.StatusCollector {
		s := &edgev2alpha1.StatusCollector{Spec: spec}
		s.Name, s.UID, s.Generation = "sc", "u1", 3
		return s
	}
	good := sc(selectOf("inventory.name"))
	cond := c.collectorCondition(good)
	require.Equal(t, reasonValid, cond.Reason)
	require.EqualValues(t, "True", cond.Status)
	require.Equal(t, int64(3), cond.ObservedGeneration)

	cond = c.collectorCondition(sc(selectOf("(")))
	require.Equal(t, reasonInvalidExpression, cond.Reason)
	require.Contains(t, cond.Message, "spec.select[0].def: Invalid value")

	cond = c.collectorCondition(sc(selectOf(nestedComprehension(10))))
	require.Equal(t, reasonOverBudget, cond.Reason)
	require.Contains(t, cond.Message, "exceeds budget 1000000 per expression")

	comp.failures.set("web", []summaryFailure{{collector: refOf(good), what: "deployments.apps app/web under placement p", err: "spec.select[0].def: stopped"}})
	cond = c.collectorCondition(good)
	require.Equal(t, reasonCostLimitExceeded, cond.Reason)
	require.EqualValues(t, "False", cond.Status)
	require.Equal(t, "summaries stopped by a limit and left out of their CombinedStatus: 1, such as deployments.apps app/web under placement p: spec.select[0].def: stopped", cond.Message)
}

func expr(s string) *edgev2alpha1.Expression { e := edgev2alpha1.Expression(s); return &e }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}
