// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/statuscel"
)

// WithStatusCollectorCost returns the admission chain next followed by the
// check of StatusCollectors: every CEL expression must compile, and its
// estimated cost (and that of all of a StatusCollector's expressions) fit
// the budget the status controller runs them within.
func WithStatusCollectorCost(next admission.Interface) (admission.Interface, error) {
	validator, err := statuscel.NewCompiler()
	if err != nil {
		return nil, fmt.Errorf("building the StatusCollector checks: %w", err)
	}
	return admission.NewChainHandler(next, newStatusCollectorCost(validator)), nil
}

func newStatusCollectorCost(validator *statuscel.Compiler) *statusCollectorCost {
	return &statusCollectorCost{Handler: admission.NewHandler(admission.Create, admission.Update), validator: validator}
}

type statusCollectorCost struct {
	*admission.Handler
	validator *statuscel.Compiler
}

var _ admission.ValidationInterface = &statusCollectorCost{}

var statusCollectorsResource = edgev2alpha1.Resource("statuscollectors")

// Validate refuses a StatusCollector created, or whose spec is changed,
// with an expression that does not compile or costs too much. An update
// that leaves the spec as it is (metadata, status, deletion) passes, so
// that an object stored before a budget existed can still be handled.
func (p *statusCollectorCost) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() == edgePlacementResource && a.GetSubresource() == "" {
		return p.validateHealthCheck(a)
	}
	if a.GetResource().GroupResource() != statusCollectorsResource || a.GetSubresource() != "" {
		return nil
	}
	sc, err := asStatusCollector(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("reading the StatusCollector: %v", err))
	}
	if a.GetOperation() == admission.Update {
		if old, err := asStatusCollector(a.GetOldObject()); err == nil && apiequality.Semantic.DeepEqual(old.Spec, sc.Spec) {
			return nil
		}
	}
	if errs := p.validator.ValidateSpec(sc.Spec); len(errs) > 0 {
		return apierrors.NewInvalid(edgev2alpha1.SchemeGroupVersion.WithKind("StatusCollector").GroupKind(), a.GetName(), errs)
	}
	return nil
}

// asStatusCollector reads the object of a request: unstructured, as the
// API server serves StatusCollectors from their CRD, or typed.
func asStatusCollector(obj runtime.Object) (*edgev2alpha1.StatusCollector, error) {
	switch o := obj.(type) {
	case *edgev2alpha1.StatusCollector:
		return o, nil
	case runtime.Unstructured:
		sc := &edgev2alpha1.StatusCollector{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.UnstructuredContent(), sc); err != nil {
			return nil, err
		}
		return sc, nil
	}
	return nil, fmt.Errorf("unexpected object %T", obj)
}

// validateHealthCheck refuses an EdgePlacement whose
// spec.rollout.healthCheck.cel does not compile or costs too much, as a
// StatusCollector's expression would be: the rollout runs it within the
// same budgets.
func (p *statusCollectorCost) validateHealthCheck(a admission.Attributes) error {
	obj, err := toUnstructured(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	expr, found, _ := unstructured.NestedString(obj, "spec", "rollout", "healthCheck", "cel")
	if !found {
		return nil
	}
	if errs := p.validator.ValidateExpression(field.NewPath("spec", "rollout", "healthCheck", "cel"), edgev2alpha1.Expression(expr)); len(errs) > 0 {
		return apierrors.NewInvalid(edgev2alpha1.SchemeGroupVersion.WithKind("EdgePlacement").GroupKind(), a.GetName(), errs)
	}
	return nil
}
