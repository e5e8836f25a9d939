// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/statuscel"
	"github.com/kubestellar/kubestellar/spaces"
)

// Reasons of a StatusCollector's Ready condition.
const (
	reasonValid = "Valid"
	// reasonInvalidExpression: an expression does not compile (or the spec
	// is inconsistent).
	reasonInvalidExpression = "InvalidExpression"
	// reasonOverBudget: the estimated cost is over budget. Admission
	// refuses such a spec; one stored before is never evaluated.
	reasonOverBudget = "CostOverBudget"
	// reasonCostLimitExceeded: a cost limit or the deadline stopped the
	// summary of some object, which its CombinedStatus then lacks.
	reasonCostLimitExceeded = "CostLimitExceeded"
)

// summaries runs the named StatusCollectors of the WDS over the
// destinations of one (object, placement). A collector that does not
// validate is left out (its Ready condition says why), as is one that a
// limit stopped, returned as a failure. An error means ctx ended.
func (c *Controller) summaries(ctx context.Context, key objectKey, placement string, names []string, obj map[string]any, rows []row) (
	[]edgev2alpha1.NamedStatusCombination, []summaryFailure, error) {
	var results []edgev2alpha1.NamedStatusCombination
	var failures []summaryFailure
	for _, n := range names {
		sc, ok := crossspace.Get[*edgev2alpha1.StatusCollector](c.collectors, key.wds, "", n)
		if !ok || c.compiler.Validate(sc.Spec) != nil {
			continue // reported on the StatusCollector itself
		}
		result, err := summarize(ctx, c.compiler, n, sc.Spec, obj, rows)
		var limit *statuscel.LimitError
		switch {
		case errors.As(err, &limit):
			what := fmt.Sprintf("%s %s under placement %s", key.gvr.GroupResource(), objectName(key), placement)
			failures = append(failures, summaryFailure{collector: refOf(sc), what: what, err: limit.Error()})
		case err != nil:
			return nil, nil, err
		default:
			results = append(results, result)
		}
	}
	return results, failures, nil
}

// setSummaryFailures remembers the failed summaries of an object's latest
// reconcile (none once it is gone), and has the Ready condition of every
// StatusCollector whose failures changed written again.
func (c *Controller) setSummaryFailures(ctx context.Context, key objectKey, failures []summaryFailure) {
	object := key.wds + "|" + key.gvr.String() + "|" + key.namespace + "/" + key.name
	for _, ref := range c.failures.set(object, failures) {
		for _, f := range failures {
			if f.collector == ref {
				klog.FromContext(ctx).Info("status summary stopped by a limit", "space", ref.space, "statusCollector", ref.name,
					"generation", ref.generation, "summary", f.what, "problem", f.err)
			}
		}
		c.collectorsQ.Add(spaces.Key(ref.space, "", ref.name))
	}
}

// collectorCondition is a StatusCollector's Ready condition: whether its
// expressions compile and fit the cost budgets, and whether a limit has
// stopped the summary of any object since it last changed.
func (c *Controller) collectorCondition(sc *edgev2alpha1.StatusCollector) metav1.Condition {
	cond := metav1.Condition{Type: edgev2alpha1.StatusCollectorReady, Status: metav1.ConditionTrue, Reason: reasonValid,
		Message: "every expression compiles and fits the cost budget", ObservedGeneration: sc.Generation}
	if errs, overBudget := c.compiler.CheckSpec(sc.Spec); len(errs) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reasonInvalidExpression, errs.ToAggregate().Error()
		if overBudget {
			cond.Reason = reasonOverBudget
		}
		return cond
	}
	failures := c.failures.of(refOf(sc))
	if len(failures) == 0 {
		return cond
	}
	sort.Slice(failures, func(i, j int) bool { return failures[i].what < failures[j].what })
	cond.Status, cond.Reason = metav1.ConditionFalse, reasonCostLimitExceeded
	cond.Message = fmt.Sprintf("summaries stopped by a limit and left out of their CombinedStatus: %d, such as %s: %s",
		len(failures), failures[0].what, failures[0].err)
	return cond
}

func refOf(sc *edgev2alpha1.StatusCollector) collectorRef {
	return collectorRef{space: crossspace.SpaceOf(sc), name: sc.Name, uid: string(sc.UID), generation: sc.Generation}
}

func objectName(key objectKey) string {
	if key.namespace == "" {
		return key.name
	}
	return key.namespace + "/" + key.name
}
