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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/statuscel"
	"github.com/kubestellar/kubestellar/internal/statuscel/celtest"
)

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
	c, err := statuscel.NewCompiler()
	require.NoError(t, err)
	for name, spec := range exampleCollectors(t) {
		t.Run(name, func(t *testing.T) {
			require.Empty(t, c.ValidateSpec(spec))
		})
	}
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
func onlyCost(l *statuscel.Limits) { l.Timeout = time.Hour }

// TestRuntimeLimits: what gets past the estimate (or was stored before it
// existed) is stopped by the runtime limits with an error that says which.
func TestRuntimeLimits(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		limits func(*statuscel.Limits)
		ctx    context.Context
		spec   edgev2alpha1.StatusCollectorSpec
		rows   int
		// status is what each destination reports, if not the default.
		status map[string]any
		// want is the *statuscel.LimitError; wantErr another error (ctx ended).
		want    *statuscel.LimitError
		wantErr error
	}{
		{name: "fits", spec: celtest.SelectOf(celtest.NestedComprehension(3)), rows: 3},
		{name: "an input larger than the estimate assumes", limits: onlyCost, spec: celtest.SelectOf("inventory.name", "returned.status.items.exists(s, s.contains('needle'))"), rows: 1,
			status: map[string]any{"items": repeat(strings.Repeat("x", 1<<20), 20)},
			want:   &statuscel.LimitError{Field: "spec.select[1].def", Reason: "evaluation exceeded the cost limit of 1000000 per evaluation and was stopped; simplify the expression"}},
		{name: "an input the estimate assumes", spec: celtest.SelectOf("inventory.name", "returned.status.items.exists(s, s.contains('needle'))"), rows: 1,
			status: map[string]any{"items": repeat(strings.Repeat("x", statuscel.RealisticInputSize), statuscel.RealisticInputSize)}},
		{name: "the attack, stored before admission refused it", limits: onlyCost, spec: edgev2alpha1.StatusCollectorSpec{Filter: celtest.Expr(celtest.NestedComprehension(10)),
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "n", Type: edgev2alpha1.AggregationCount}}}, rows: 2,
			want: &statuscel.LimitError{Field: "spec.filter", Reason: "evaluation exceeded the cost limit of 1000000 per evaluation and was stopped; simplify the expression"}},
		{name: "the destinations together over the summary budget", limits: func(l *statuscel.Limits) { onlyCost(l); l.Summary = 50_000 },
			spec: edgev2alpha1.StatusCollectorSpec{CombinedFields: []edgev2alpha1.NamedAggregator{
				{Name: "n", Type: edgev2alpha1.AggregationSum, Subject: celtest.Expr(fmt.Sprintf("%s ? 0 : 1", celtest.NestedComprehension(3)))}}}, rows: 100,
			want: &statuscel.LimitError{Field: "spec.combinedFields[0].subject", Reason: "evaluations for one object exceeded the cost budget of 50000 and were stopped; simplify the expressions"}},
		{name: "the deadline interrupts a comprehension without a cost limit", limits: func(l *statuscel.Limits) { l.Evaluation, l.Timeout = math.MaxUint64, 50*time.Millisecond },
			spec: celtest.SelectOf(celtest.NestedComprehension(10)), rows: 1,
			want: &statuscel.LimitError{Field: "spec.select[0].def", Reason: "evaluations for one object took longer than 50ms and were stopped; simplify the expressions"}},
		{name: "an ended context is not a limit", ctx: cancelled, spec: celtest.SelectOf("inventory.name"), rows: 1, wantErr: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := statuscel.DefaultLimits()
			if tc.limits != nil {
				tc.limits(&l)
			}
			c, err := statuscel.NewCompilerWithLimits(l, statuscel.ProgramCacheSize)
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
				require.Empty(t, c.ValidateSpec(tc.spec))
			}
			result, err := summarize(ctx, c, "sc", tc.spec, web, rows)
			switch {
			case tc.want != nil:
				var limit *statuscel.LimitError
				require.ErrorAs(t, err, &limit)
				require.Equal(t, tc.want, limit)
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
				var limit *statuscel.LimitError
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
	c, err := statuscel.NewCompiler()
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
			result, err := summarize(context.Background(), c, tc.collector, spec, web, rows)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, mustJSON(t, result))
		})
	}
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
	comp, err := statuscel.NewCompiler()
	require.NoError(t, err)
	c := &Controller{compiler: comp, failures: newSummaryFailures(failureCacheSize)}
	sc := func(spec edgev2alpha1.StatusCollectorSpec) *edgev2alpha1.StatusCollector {
		s := &edgev2alpha1.StatusCollector{Spec: spec}
		s.Name, s.UID, s.Generation = "sc", "u1", 3
		return s
	}
	good := sc(celtest.SelectOf("inventory.name"))
	cond := c.collectorCondition(good)
	require.Equal(t, reasonValid, cond.Reason)
	require.EqualValues(t, "True", cond.Status)
	require.Equal(t, int64(3), cond.ObservedGeneration)

	cond = c.collectorCondition(sc(celtest.SelectOf("(")))
	require.Equal(t, reasonInvalidExpression, cond.Reason)
	require.Contains(t, cond.Message, "spec.select[0].def: Invalid value")

	cond = c.collectorCondition(sc(celtest.SelectOf(celtest.NestedComprehension(10))))
	require.Equal(t, reasonOverBudget, cond.Reason)
	require.Contains(t, cond.Message, "exceeds budget 1000000 per expression")

	c.failures.set("web", []summaryFailure{{collector: refOf(good), what: "deployments.apps app/web under placement p", err: "spec.select[0].def: stopped"}})
	cond = c.collectorCondition(good)
	require.Equal(t, reasonCostLimitExceeded, cond.Reason)
	require.EqualValues(t, "False", cond.Status)
	require.Equal(t, "summaries stopped by a limit and left out of their CombinedStatus: 1, such as deployments.apps app/web under placement p: spec.select[0].def: stopped", cond.Message)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}
