// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package statuscel compiles, costs and evaluates the CEL expressions of
// StatusCollectors: admission refuses what costs too much, and the status
// controller runs what it admitted within the same budgets. It is its own
// package so that admission need not import a controller.
package statuscel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/library"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// CEL is costed as the API server costs CRD validation rules and
// ValidatingAdmissionPolicies. At admission, cel-go's checker estimates the
// cost of each expression on inputs of realistic size, and an expression
// (or a StatusCollector) over budget is refused. At run time, whatever the
// size of the inputs, one evaluation stops at a cost limit, one
// StatusCollector's evaluations for one object share a budget, and a
// deadline interrupts comprehensions whatever their cost.
const (
	// ExpressionCostBudget is the largest estimated cost of one expression:
	// what one evaluation may cost at run time, so that an expression
	// admitted runs within its limit on inputs of realistic size.
	ExpressionCostBudget uint64 = EvaluationCostLimit
	// CollectorCostBudget is the largest estimated cost of all the
	// expressions of one StatusCollector: what its evaluations for one
	// object may cost at run time.
	CollectorCostBudget uint64 = SummaryCostBudget
	// EvaluationCostLimit bounds the actual cost of one evaluation (one
	// expression over one destination), as the API server bounds one CEL
	// call (about a tenth of a second).
	EvaluationCostLimit uint64 = celconfig.PerCallLimit
	// SummaryCostBudget bounds the actual cost of all the evaluations of
	// one StatusCollector for one object (every destination), as the API
	// server bounds the rules of one custom resource.
	SummaryCostBudget uint64 = celconfig.RuntimeCELCostBudget
	// SummaryTimeout bounds the time of one StatusCollector's evaluations
	// for one object, should the cost model underestimate a function.
	SummaryTimeout = time.Second
	// MaxExpressionLength is the longest expression, in characters; with the
	// size of the program cache it bounds the cache's memory.
	MaxExpressionLength = 10 * 1024
)

// The sizes the cost estimate assumes: how many elements a list or map, or
// characters a string, may hold. The variables have no schema, so any
// value inside one may be as large as these; bounding them by what the
// server accepts (3 MiB objects) would refuse a mere pass over a status
// list that compares strings. Larger inputs are stopped at run time.
const (
	// RealisticInputSize bounds any value in obj and returned.status.
	RealisticInputSize = 1024
	// realisticAssociatedSize bounds any value in returned.associated,
	// which the syncer fills (at most 20 not-ready pods, names of at most
	// 253 characters).
	realisticAssociatedSize = 256
	// maxInventoryNameLength bounds inventory.name, a SyncTarget's name.
	maxInventoryNameLength = uint64(utilvalidation.DNS1123SubdomainMaxLength)
)

const (
	// envName names the CEL environment in the program cache's keys: a
	// program compiled for one environment is never run in another.
	envName = "statuscollector/v1"
	// ProgramCacheSize bounds the compiled-program cache (least recently
	// used programs are dropped and compiled again when needed).
	ProgramCacheSize = 1024
	// interruptCheckFrequency is how many comprehension iterations run
	// between two looks at the context. cel-go stops only the comprehension
	// that sees the interrupt, and the one around it goes on; looking at
	// every iteration (the API server looks every 100th) stops each of a
	// nest after its next iteration. It costs no measurable time.
	interruptCheckFrequency = 1
)

// Limits are the budgets a Compiler enforces; tests shrink them.
type Limits struct {
	Expression, Collector uint64 // estimated, at admission
	Evaluation, Summary   uint64 // actual, at run time
	Timeout               time.Duration
}

// DefaultLimits are the API server's budgets for CEL (see the constants).
func DefaultLimits() Limits {
	return Limits{
		Expression: ExpressionCostBudget,
		Collector:  CollectorCostBudget,
		Evaluation: EvaluationCostLimit,
		Summary:    SummaryCostBudget,
		Timeout:    SummaryTimeout,
	}
}

// programKey keys the program cache.
type programKey struct {
	env, expression string
}

// compiled is an expression compiled once: its program and estimated cost,
// or why it does not compile.
type compiled struct {
	program cel.Program
	cost    checker.CostEstimate
	err     error
}

// Compiler compiles StatusCollector expressions, estimates their cost,
// keeps the programs in a bounded cache and evaluates them within its
// limits. It is safe for concurrent use.
type Compiler struct {
	env      *cel.Env
	limits   Limits
	programs *lru.Cache[programKey, *compiled]
}

// NewCompiler returns a Compiler with the default limits, the status
// controller's and admission's.
func NewCompiler() (*Compiler, error) {
	return NewCompilerWithLimits(DefaultLimits(), ProgramCacheSize)
}

// NewCompilerWithLimits returns a Compiler with limits l, keeping at most
// cacheSize compiled programs.
func NewCompilerWithLimits(l Limits, cacheSize int) (*Compiler, error) {
	programs, err := lru.New[programKey, *compiled](max(cacheSize, 1))
	if err != nil {
		return nil, err
	}
	env, err := cel.NewEnv(
		cel.Variable("obj", cel.DynType),
		cel.Variable("returned", cel.DynType),
		cel.Variable("inventory", cel.DynType),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
	)
	if err != nil {
		return nil, fmt.Errorf("building the StatusCollector CEL environment: %w", err)
	}
	return &Compiler{env: env, limits: l, programs: programs}, nil
}

// compile returns the compiled expression, from the cache when it is there.
func (c *Compiler) compile(expr edgev2alpha1.Expression) *compiled {
	key := programKey{env: envName, expression: string(expr)}
	if p, ok := c.programs.Get(key); ok {
		return p
	}
	out := c.build(string(expr))
	c.programs.Add(key, out)
	return out
}

func (c *Compiler) build(expr string) *compiled {
	ast, issues := c.env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return &compiled{err: issues.Err()}
	}
	cost, err := c.env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: inputSizes{}})
	if err != nil {
		return &compiled{err: fmt.Errorf("estimating the cost: %w", err)}
	}
	p, err := c.env.Program(ast,
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostLimit(c.limits.Evaluation),
		cel.CostTracking(&library.CostEstimator{}),
		cel.InterruptCheckFrequency(interruptCheckFrequency),
	)
	if err != nil {
		return &compiled{err: err}
	}
	return &compiled{program: p, cost: cost}
}

// inputSizes tells the cost estimator how large the variables can be. It
// is asked only about values whose size CEL cannot see, by their path from
// a variable (field names, then @items, @keys... inside comprehensions).
type inputSizes struct{}

func (inputSizes) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	path := node.Path()
	if len(path) == 0 {
		return nil
	}
	bound := func(n uint64) *checker.SizeEstimate { return &checker.SizeEstimate{Min: 0, Max: n} }
	switch path[0] {
	case "obj":
		return bound(RealisticInputSize)
	case "returned":
		switch {
		case len(path) == 1:
			return bound(2) // status and associated
		case path[1] == "associated":
			return bound(realisticAssociatedSize)
		}
		return bound(RealisticInputSize)
	case "inventory":
		if len(path) == 1 {
			return bound(1) // name
		}
		return bound(maxInventoryNameLength)
	}
	return nil
}

func (inputSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Validate checks a StatusCollector's spec; the error names the fields.
func (c *Compiler) Validate(spec edgev2alpha1.StatusCollectorSpec) error {
	return c.ValidateSpec(spec).ToAggregate()
}

// ValidateSpec checks that every expression compiles and that each, and
// all of them together, fit the estimated cost budgets.
func (c *Compiler) ValidateSpec(spec edgev2alpha1.StatusCollectorSpec) field.ErrorList {
	errs, _ := c.CheckSpec(spec)
	return errs
}

// CheckSpec is ValidateSpec, and says whether a cost is over budget.
func (c *Compiler) CheckSpec(spec edgev2alpha1.StatusCollectorSpec) (errs field.ErrorList, overBudget bool) {
	var total uint64
	specPath := field.NewPath("spec")
	check := func(path *field.Path, e edgev2alpha1.Expression) {
		fe, cost, over := c.checkExpression(path, e)
		if fe != nil {
			errs = append(errs, fe)
		}
		overBudget = overBudget || over
		total = addSaturating(total, cost)
	}
	if spec.Filter != nil {
		check(specPath.Child("filter"), *spec.Filter)
	}
	for i, g := range spec.GroupBy {
		check(specPath.Child("groupBy").Index(i).Child("def"), g.Def)
	}
	for i, a := range spec.CombinedFields {
		if a.Type == edgev2alpha1.AggregationCount {
			continue
		}
		path := specPath.Child("combinedFields").Index(i).Child("subject")
		if a.Subject == nil {
			errs = append(errs, field.Required(path, fmt.Sprintf("%s needs a subject", a.Type)))
			continue
		}
		check(path, *a.Subject)
	}
	for i, s := range spec.Select {
		check(specPath.Child("select").Index(i).Child("def"), s.Def)
	}
	if len(spec.CombinedFields) > 0 && len(spec.Select) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("select"), "select and combinedFields exclude each other"))
	}
	if len(spec.CombinedFields) == 0 && len(spec.Select) == 0 {
		errs = append(errs, field.Required(specPath, "name combinedFields or select"))
	}
	if total > c.limits.Collector && !overBudget {
		overBudget = true
		errs = append(errs, field.Forbidden(specPath, costMessage("estimated total cost of the expressions", total, c.limits.Collector, "per StatusCollector")))
	}
	return errs, overBudget
}

// ValidateExpression checks one expression that stands alone (an
// EdgePlacement's spec.rollout.healthCheck.cel): it compiles, and its
// estimated cost fits the budget of one expression.
func (c *Compiler) ValidateExpression(path *field.Path, e edgev2alpha1.Expression) field.ErrorList {
	if fe, _, _ := c.checkExpression(path, e); fe != nil {
		return field.ErrorList{fe}
	}
	return nil
}

// checkExpression compiles an expression and checks its estimated cost,
// returning the problem (nil: none), the cost, and whether it is over
// budget.
func (c *Compiler) checkExpression(path *field.Path, e edgev2alpha1.Expression) (*field.Error, uint64, bool) {
	if strings.TrimSpace(string(e)) == "" {
		return field.Required(path, "an expression is required"), 0, false
	}
	p := c.compile(e)
	if p.err != nil {
		return field.Invalid(path, field.OmitValueType{}, "compilation failed: "+p.err.Error()), 0, false
	}
	if p.cost.Max > c.limits.Expression {
		return field.Forbidden(path, costMessage("estimated cost", p.cost.Max, c.limits.Expression, "per expression")), p.cost.Max, true
	}
	return nil, p.cost.Max, false
}

// costMessage says by how much a cost exceeds its budget, in the API
// server's words for CEL rules.
func costMessage(what string, cost, budget uint64, per string) string {
	factor := float64(cost) / float64(budget)
	var by string
	switch {
	case factor > 100:
		by = "more than 100x"
	case factor < 1.5:
		by = fmt.Sprintf("%.2fx", factor)
	default:
		by = fmt.Sprintf("%.1fx", factor)
	}
	return fmt.Sprintf("%s %d exceeds budget %d %s by factor of %s (the estimate assumes lists, maps and strings of up to %d elements "+
		"in obj and returned.status; avoid nesting comprehensions such as all, exists, map and filter in one another)",
		what, cost, budget, per, by, RealisticInputSize)
}

func addSaturating(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// LimitError is an evaluation a cost limit or the deadline stopped.
type LimitError struct {
	// Field is the expression's field path, such as spec.filter.
	Field string
	// Reason says which limit: one evaluation's cost, the summary's cost
	// budget or its deadline.
	Reason string
}

func (e *LimitError) Error() string { return e.Field + ": " + e.Reason }

// Evaluation runs the expressions of one StatusCollector for one object
// and spends their shared budget.
type Evaluation struct {
	ctx   context.Context
	c     *Compiler
	spent uint64
}

// NewEvaluation returns an Evaluation bounded by the summary timeout, and
// the function that releases it.
func (c *Compiler) NewEvaluation(ctx context.Context) (*Evaluation, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(ctx, c.limits.Timeout, errSummaryTimeout)
	return &Evaluation{ctx: ctx, c: c}, cancel
}

var errSummaryTimeout = errors.New("summary deadline")

// Eval evaluates an expression to a plain Go value: nil when it fails on
// this row (for example on a field not reported yet) or did not compile
// (reported on the StatusCollector). A *LimitError stops the summary; any
// other error means the context ended.
func (e *Evaluation) Eval(path string, expr edgev2alpha1.Expression, vars map[string]any) (any, error) {
	if err := e.stopped(path); err != nil {
		return nil, err
	}
	p := e.c.compile(expr)
	if p.err != nil {
		return nil, nil
	}
	out, details, err := p.program.ContextEval(e.ctx, vars)
	if details != nil && details.ActualCost() != nil {
		e.spent = addSaturating(e.spent, *details.ActualCost())
	}
	var cancelled interpreter.EvalCancelledError
	switch {
	case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
		return nil, &LimitError{Field: path, Reason: fmt.Sprintf(
			"evaluation exceeded the cost limit of %d per evaluation and was stopped; simplify the expression", e.c.limits.Evaluation)}
	case errors.As(err, &cancelled), err != nil && e.ctx.Err() != nil:
		// An interrupted comprehension fails with a plain error.
		return nil, e.stopped(path)
	case e.spent > e.c.limits.Summary:
		return nil, e.overBudget(path)
	case err != nil:
		return nil, nil
	}
	return native(out), nil
}

// stopped reports why the evaluation may not go on: the summary's budget
// is spent, its deadline passed or the caller's context ended.
func (e *Evaluation) stopped(path string) error {
	if e.spent > e.c.limits.Summary {
		return e.overBudget(path)
	}
	if e.ctx.Err() == nil {
		return nil
	}
	if context.Cause(e.ctx) == errSummaryTimeout {
		return &LimitError{Field: path, Reason: fmt.Sprintf(
			"evaluations for one object took longer than %s and were stopped; simplify the expressions", e.c.limits.Timeout)}
	}
	return fmt.Errorf("%s: Evaluation stopped: %w", path, context.Cause(e.ctx))
}

func (e *Evaluation) overBudget(path string) error {
	return &LimitError{Field: path, Reason: fmt.Sprintf(
		"evaluations for one object exceeded the cost budget of %d and were stopped; simplify the expressions", e.c.limits.Summary)}
}

// native is a CEL value as plain Go: what encoding/json makes of its JSON.
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
