// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/statuscel"
)

// row is what a StatusCollector's expressions see of one destination.
type row struct {
	// Inventory is the SyncTarget's name.
	Inventory string
	// Status is the status the edge reported (nil until it reports).
	Status map[string]any
	// Associated is the state of the object's descendants at the edge.
	Associated map[string]any
}

func (r row) activation(obj map[string]any) map[string]any {
	status := r.Status
	if status == nil {
		status = map[string]any{}
	}
	associated := r.Associated
	if associated == nil {
		associated = map[string]any{}
	}
	return map[string]any{
		"obj":       obj,
		"returned":  map[string]any{"status": status, "associated": associated},
		"inventory": map[string]any{"name": r.Inventory},
	}
}

// summarize runs a StatusCollector over the rows of one object. A
// *statuscel.LimitError says a cost limit or the deadline stopped it; any other error
// that ctx ended.
func summarize(ctx context.Context, c *statuscel.Compiler, name string, spec edgev2alpha1.StatusCollectorSpec, obj map[string]any, rows []row) (edgev2alpha1.NamedStatusCombination, error) {
	e, cancel := c.NewEvaluation(ctx)
	defer cancel()
	result := edgev2alpha1.NamedStatusCombination{Name: name}
	var kept []map[string]any
	for _, r := range rows {
		vars := r.activation(obj)
		if spec.Filter != nil {
			v, err := e.Eval("spec.filter", *spec.Filter, vars)
			if err != nil {
				return result, err
			}
			if ok, _ := v.(bool); !ok {
				continue
			}
		}
		kept = append(kept, vars)
	}
	var table [][]any
	if len(spec.CombinedFields) > 0 {
		for _, g := range spec.GroupBy {
			result.ColumnNames = append(result.ColumnNames, g.Name)
		}
		for _, a := range spec.CombinedFields {
			result.ColumnNames = append(result.ColumnNames, a.Name)
		}
		type group struct {
			key  []any
			rows []map[string]any
		}
		groups := map[string]*group{}
		var order []string
		for _, vars := range kept {
			var key []any
			for i, g := range spec.GroupBy {
				v, err := e.Eval(fmt.Sprintf("spec.groupBy[%d].def", i), g.Def, vars)
				if err != nil {
					return result, err
				}
				key = append(key, v)
			}
			k, _ := json.Marshal(key)
			if groups[string(k)] == nil {
				groups[string(k)] = &group{key: key}
				order = append(order, string(k))
			}
			groups[string(k)].rows = append(groups[string(k)].rows, vars)
		}
		if len(spec.GroupBy) == 0 && len(order) == 0 {
			// Aggregates over nothing: one row (COUNT 0).
			groups["[]"], order = &group{}, []string{"[]"}
		}
		sort.Strings(order)
		for _, k := range order {
			g := groups[k]
			line := append([]any{}, g.key...)
			for i, a := range spec.CombinedFields {
				v, err := aggregate(e, fmt.Sprintf("spec.combinedFields[%d].subject", i), a, g.rows)
				if err != nil {
					return result, err
				}
				line = append(line, v)
			}
			table = append(table, line)
		}
	} else {
		for _, s := range spec.Select {
			result.ColumnNames = append(result.ColumnNames, s.Name)
		}
		for _, vars := range kept {
			var line []any
			for i, s := range spec.Select {
				v, err := e.Eval(fmt.Sprintf("spec.select[%d].def", i), s.Def, vars)
				if err != nil {
					return result, err
				}
				line = append(line, v)
			}
			table = append(table, line)
		}
		sort.SliceStable(table, func(i, j int) bool {
			a, _ := json.Marshal(table[i])
			b, _ := json.Marshal(table[j])
			return string(a) < string(b)
		})
	}
	if spec.Limit > 0 && int64(len(table)) > spec.Limit {
		table = table[:spec.Limit]
	}
	for _, line := range table {
		var out edgev2alpha1.StatusCombinationRow
		for _, v := range line {
			data, _ := json.Marshal(v)
			out.Columns = append(out.Columns, apiextensionsv1.JSON{Raw: data})
		}
		result.Rows = append(result.Rows, out)
	}
	return result, nil
}

func aggregate(e *statuscel.Evaluation, path string, a edgev2alpha1.NamedAggregator, rows []map[string]any) (any, error) {
	if a.Type == edgev2alpha1.AggregationCount {
		return int64(len(rows)), nil
	}
	var nums []float64
	for _, vars := range rows {
		v, err := e.Eval(path, *a.Subject, vars)
		if err != nil {
			return nil, err
		}
		switch v := v.(type) {
		case float64:
			nums = append(nums, v)
		case int64:
			nums = append(nums, float64(v))
		}
	}
	if len(nums) == 0 {
		if a.Type == edgev2alpha1.AggregationSum {
			return int64(0), nil
		}
		return nil, nil
	}
	var out float64
	switch a.Type {
	case edgev2alpha1.AggregationSum, edgev2alpha1.AggregationAvg:
		for _, n := range nums {
			out += n
		}
		if a.Type == edgev2alpha1.AggregationAvg {
			out /= float64(len(nums))
		}
	case edgev2alpha1.AggregationMin:
		out = math.Inf(1)
		for _, n := range nums {
			out = math.Min(out, n)
		}
	case edgev2alpha1.AggregationMax:
		out = math.Inf(-1)
		for _, n := range nums {
			out = math.Max(out, n)
		}
	}
	if out == math.Trunc(out) && math.Abs(out) < 1<<53 {
		return int64(out), nil
	}
	return out, nil
}
