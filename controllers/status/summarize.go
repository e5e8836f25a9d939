package status

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
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

// compiler compiles CEL expressions once and keeps the programs.
type compiler struct {
	env      *cel.Env
	mu       sync.Mutex
	programs map[string]cel.Program
}

func newCompiler() (*compiler, error) {
	env, err := cel.NewEnv(
		cel.Variable("obj", cel.DynType),
		cel.Variable("returned", cel.DynType),
		cel.Variable("inventory", cel.DynType),
	)
	if err != nil {
		return nil, err
	}
	return &compiler{env: env, programs: map[string]cel.Program{}}, nil
}

func (c *compiler) compile(expr edgev2alpha1.Expression) (cel.Program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.programs[string(expr)]; ok {
		return p, nil
	}
	ast, issues := c.env.Compile(string(expr))
	if issues != nil && issues.Err() != nil {
		return nil, issues.Err()
	}
	p, err := c.env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	c.programs[string(expr)] = p
	return p, nil
}

// validate compiles every expression of a collector; the error names the field.
func (c *compiler) validate(spec edgev2alpha1.StatusCollectorSpec) error {
	check := func(field string, e edgev2alpha1.Expression) error {
		if strings.TrimSpace(string(e)) == "" {
			return fmt.Errorf("%s: empty expression", field)
		}
		if _, err := c.compile(e); err != nil {
			return fmt.Errorf("%s: %v", field, err)
		}
		return nil
	}
	if spec.Filter != nil {
		if err := check("spec.filter", *spec.Filter); err != nil {
			return err
		}
	}
	for i, g := range spec.GroupBy {
		if err := check(fmt.Sprintf("spec.groupBy[%d].def", i), g.Def); err != nil {
			return err
		}
	}
	for i, a := range spec.CombinedFields {
		if a.Type != edgev2alpha1.AggregationCount {
			if a.Subject == nil {
				return fmt.Errorf("spec.combinedFields[%d]: %s needs a subject", i, a.Type)
			}
			if err := check(fmt.Sprintf("spec.combinedFields[%d].subject", i), *a.Subject); err != nil {
				return err
			}
		}
	}
	for i, s := range spec.Select {
		if err := check(fmt.Sprintf("spec.select[%d].def", i), s.Def); err != nil {
			return err
		}
	}
	if len(spec.CombinedFields) > 0 && len(spec.Select) > 0 {
		return fmt.Errorf("spec: select and combinedFields exclude each other")
	}
	if len(spec.CombinedFields) == 0 && len(spec.Select) == 0 {
		return fmt.Errorf("spec: name combinedFields or select")
	}
	return nil
}

// eval evaluates an expression to a plain Go value (nil when the
// expression fails on this row, for example on a field not reported yet).
func (c *compiler) eval(expr edgev2alpha1.Expression, vars map[string]any) any {
	p, err := c.compile(expr)
	if err != nil {
		return nil
	}
	out, _, err := p.Eval(vars)
	if err != nil || types.IsError(out) {
		return nil
	}
	return native(out)
}

func native(v ref.Val) any {
	pb, err := v.ConvertToNative(reflect.TypeOf(&structpb.Value{}))
	if err != nil {
		return v.Value()
	}
	data, err := protojson.Marshal(pb.(*structpb.Value))
	if err != nil {
		return v.Value()
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return v.Value()
	}
	return out
}

// summarize runs a StatusCollector over the rows of one object.
func (c *compiler) summarize(name string, spec edgev2alpha1.StatusCollectorSpec, obj map[string]any, rows []row) edgev2alpha1.NamedStatusCombination {
	result := edgev2alpha1.NamedStatusCombination{Name: name}
	var kept []map[string]any
	for _, r := range rows {
		vars := r.activation(obj)
		if spec.Filter != nil {
			if ok, _ := c.eval(*spec.Filter, vars).(bool); !ok {
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
			for _, g := range spec.GroupBy {
				key = append(key, c.eval(g.Def, vars))
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
			for _, a := range spec.CombinedFields {
				line = append(line, c.aggregate(a, g.rows))
			}
			table = append(table, line)
		}
	} else {
		for _, s := range spec.Select {
			result.ColumnNames = append(result.ColumnNames, s.Name)
		}
		for _, vars := range kept {
			var line []any
			for _, s := range spec.Select {
				line = append(line, c.eval(s.Def, vars))
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
	return result
}

func (c *compiler) aggregate(a edgev2alpha1.NamedAggregator, rows []map[string]any) any {
	if a.Type == edgev2alpha1.AggregationCount {
		return int64(len(rows))
	}
	var nums []float64
	for _, vars := range rows {
		switch v := c.eval(*a.Subject, vars).(type) {
		case float64:
			nums = append(nums, v)
		case int64:
			nums = append(nums, float64(v))
		}
	}
	if len(nums) == 0 {
		if a.Type == edgev2alpha1.AggregationSum {
			return int64(0)
		}
		return nil
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
		return int64(out)
	}
	return out
}
