// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package statuscel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/statuscel/celtest"
)

func TestValidateSpec(t *testing.T) {
	c, err := NewCompiler()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		spec edgev2alpha1.StatusCollectorSpec
		// want are the field errors expected, as type, field and a part
		// of the detail; none when empty.
		want []field.Error
	}{
		{name: "a field", spec: celtest.SelectOf("returned.status.availableReplicas")},
		{name: "one pass over a list of the status", spec: celtest.SelectOf("returned.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')")},
		{name: "a string search in one pass", spec: celtest.SelectOf("returned.status.conditions.exists(c, c.message.contains('quota'))")},
		{name: "filter then map", spec: celtest.SelectOf("returned.status.conditions.filter(c, c.type == 'Ready').map(c, c.status)")},
		{name: "the reported pods", spec: celtest.SelectOf("returned.associated.notReadyPods.map(p, p.name + ': ' + p.reason)")},
		{name: "one pass over the object", spec: celtest.SelectOf("obj.spec.template.spec.containers.map(c, c.name + '=' + c.image)")},
		{name: "names", spec: celtest.SelectOf("inventory.name + '/' + obj.metadata.name", "obj.metadata.name.matches('^web-.*')")},
		{name: "four nested comprehensions over literals fit", spec: celtest.SelectOf(celtest.NestedComprehension(4))},
		{name: "five nested comprehensions over literals", spec: celtest.SelectOf(celtest.NestedComprehension(5)),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "exceeds budget 1000000 per expression by factor of 1."}}},
		{name: "seven nested comprehensions over literals", spec: celtest.SelectOf(celtest.NestedComprehension(7)),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "exceeds budget 1000000 per expression by factor of more than 100x"}}},
		{name: "ten nested comprehensions over literals", spec: celtest.SelectOf(celtest.NestedComprehension(10)),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "by factor of more than 100x"}}},
		{name: "the attack as a filter", spec: edgev2alpha1.StatusCollectorSpec{Filter: celtest.Expr(celtest.NestedComprehension(10)),
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.filter", Detail: "by factor of more than 100x"}}},
		{name: "the attack as a subject", spec: edgev2alpha1.StatusCollectorSpec{
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationSum, Subject: celtest.Expr(celtest.NestedComprehension(10))}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.combinedFields[0].subject", Detail: "by factor of more than 100x"}}},
		{name: "the attack as a group", spec: edgev2alpha1.StatusCollectorSpec{
			GroupBy:        []edgev2alpha1.NamedExpression{{Name: "g", Def: edgev2alpha1.Expression(celtest.NestedComprehension(10))}},
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.groupBy[0].def", Detail: "by factor of more than 100x"}}},
		{name: "comprehensions over inputs nested", spec: celtest.SelectOf("obj.spec.template.spec.containers.all(c, returned.status.conditions.exists(d, d.type == c.name))"),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "by factor of more than 100x"}}},
		{name: "comprehensions over the reported pods nested", spec: celtest.SelectOf("returned.associated.notReadyPods.all(c, returned.associated.notReadyPods.exists(d, d.name == c.name))"),
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select[0].def", Detail: "by factor of 2."}}},
		{name: "does not compile", spec: celtest.SelectOf("this is not CEL ("),
			want: []field.Error{{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "compilation failed: ERROR: <input>:1:6: Syntax error"}}},
		{name: "undeclared variable", spec: celtest.SelectOf("status.replicas"),
			want: []field.Error{{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "undeclared reference to 'status'"}}},
		{name: "too long", spec: celtest.SelectOf(strings.Repeat("1 + ", MaxExpressionLength/4) + "1"),
			want: []field.Error{{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "size exceeds limit"}}},
		{name: "empty", spec: celtest.SelectOf(" "),
			want: []field.Error{{Type: field.ErrorTypeRequired, Field: "spec.select[0].def", Detail: "an expression is required"}}},
		{name: "SUM without a subject", spec: edgev2alpha1.StatusCollectorSpec{
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationSum}}},
			want: []field.Error{{Type: field.ErrorTypeRequired, Field: "spec.combinedFields[0].subject", Detail: "SUM needs a subject"}}},
		{name: "select and combinedFields", spec: edgev2alpha1.StatusCollectorSpec{
			Select:         []edgev2alpha1.NamedExpression{{Name: "x", Def: "inventory.name"}},
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}},
			want: []field.Error{{Type: field.ErrorTypeForbidden, Field: "spec.select", Detail: "exclude each other"}}},
		{name: "neither select nor combinedFields", spec: edgev2alpha1.StatusCollectorSpec{Filter: celtest.Expr("true")},
			want: []field.Error{{Type: field.ErrorTypeRequired, Field: "spec", Detail: "name combinedFields or select"}}},
		{name: "every problem is reported", spec: celtest.SelectOf("(", celtest.NestedComprehension(8)),
			want: []field.Error{
				{Type: field.ErrorTypeInvalid, Field: "spec.select[0].def", Detail: "compilation failed"},
				{Type: field.ErrorTypeForbidden, Field: "spec.select[1].def", Detail: "by factor of more than 100x"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := c.ValidateSpec(tc.spec)
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
	c, err := NewCompiler()
	require.NoError(t, err)
	errs := c.ValidateSpec(celtest.SelectOf(celtest.NestedComprehension(10)))
	require.Len(t, errs, 1)
	cost := c.compile(edgev2alpha1.Expression(celtest.NestedComprehension(10))).cost.Max
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
	c, err := NewCompiler()
	require.NoError(t, err)
	const e = "returned.status.conditions.filter(c, c.type == 'Ready').map(c, c.status)"
	cost := c.compile(e).cost.Max
	require.Less(t, cost, ExpressionCostBudget)
	fit := int(CollectorCostBudget / cost)

	exprs := make([]string, fit)
	for i := range exprs {
		exprs[i] = e
	}
	require.Empty(t, c.ValidateSpec(celtest.SelectOf(exprs...)))

	errs := c.ValidateSpec(celtest.SelectOf(append(exprs, e)...))
	require.Len(t, errs, 1, "errors: %v", errs)
	require.Equal(t, field.ErrorTypeForbidden, errs[0].Type)
	require.Equal(t, "spec", errs[0].Field)
	require.Contains(t, errs[0].Detail, fmt.Sprintf("estimated total cost of the expressions %d exceeds budget %d per StatusCollector", uint64(fit+1)*cost, CollectorCostBudget))
}

// TestProgramCacheIsBounded compiles more expressions than the cache holds.
func TestProgramCacheIsBounded(t *testing.T) {
	const size = 8
	c, err := NewCompilerWithLimits(DefaultLimits(), size)
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
