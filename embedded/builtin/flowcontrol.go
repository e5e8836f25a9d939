package builtin

import (
	"context"
	"strconv"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/flowcontrol"
	flowcontrolapiv1 "k8s.io/kubernetes/pkg/apis/flowcontrol/v1"
	flowcontrolvalidation "k8s.io/kubernetes/pkg/apis/flowcontrol/validation"

	"github.com/kubestellar/kubestellar/spaces"
)

// FlowSchemas and PriorityLevelConfigurations configure API Priority and
// Fairness for the whole server (embedded/fairness), which reads them in
// the root space. They get Kubernetes' own defaults and validation: the
// APF controller trusts what it reads, so what it reads must be valid.

var (
	flowSchemaColumns = []Column{
		col("PriorityLevel", func(o runtime.Object) any {
			return o.(*flowcontrolv1.FlowSchema).Spec.PriorityLevelConfiguration.Name
		}),
		{Name: "MatchingPrecedence", Type: "integer", Value: func(o runtime.Object) any {
			return int64(o.(*flowcontrolv1.FlowSchema).Spec.MatchingPrecedence)
		}},
		col("DistinguisherMethod", func(o runtime.Object) any {
			if m := o.(*flowcontrolv1.FlowSchema).Spec.DistinguisherMethod; m != nil {
				return string(m.Type)
			}
			return "<none>"
		}),
	}
	priorityLevelColumns = []Column{
		col("Type", func(o runtime.Object) any { return string(o.(*flowcontrolv1.PriorityLevelConfiguration).Spec.Type) }),
		col("NominalConcurrencyShares", func(o runtime.Object) any {
			if l := o.(*flowcontrolv1.PriorityLevelConfiguration).Spec.Limited; l != nil && l.NominalConcurrencyShares != nil {
				return strconv.Itoa(int(*l.NominalConcurrencyShares))
			}
			return "<none>"
		}),
		col("Queues", func(o runtime.Object) any {
			if l := o.(*flowcontrolv1.PriorityLevelConfiguration).Spec.Limited; l != nil && l.LimitResponse.Queuing != nil {
				return strconv.Itoa(int(l.LimitResponse.Queuing.Queues))
			}
			return "<none>"
		}),
	}
)

// defaultFlowControl sets Kubernetes' defaults on a FlowSchema or a
// PriorityLevelConfiguration.
func defaultFlowControl(obj runtime.Object) {
	switch o := obj.(type) {
	case *flowcontrolv1.FlowSchema:
		flowcontrolapiv1.SetObjectDefaults_FlowSchema(o)
	case *flowcontrolv1.PriorityLevelConfiguration:
		flowcontrolapiv1.SetObjectDefaults_PriorityLevelConfiguration(o)
	}
}

// validateFlowControl validates a FlowSchema or a PriorityLevelConfiguration
// as kube-apiserver does, and keeps them in the root space: elsewhere they
// would configure nothing.
func validateFlowControl(ctx context.Context, obj runtime.Object, status bool) field.ErrorList {
	var errs field.ErrorList
	switch o := obj.(type) {
	case *flowcontrolv1.FlowSchema:
		errs = rootOnly(ctx, "FlowSchemas")
		var internal flowcontrol.FlowSchema
		if err := flowcontrolapiv1.Convert_v1_FlowSchema_To_flowcontrol_FlowSchema(o, &internal, nil); err != nil {
			return append(errs, field.InternalError(field.NewPath("spec"), err))
		}
		if status {
			return append(errs, flowcontrolvalidation.ValidateFlowSchemaStatus(&internal.Status, field.NewPath("status"))...)
		}
		return append(errs, flowcontrolvalidation.ValidateFlowSchema(&internal)...)
	case *flowcontrolv1.PriorityLevelConfiguration:
		errs = rootOnly(ctx, "PriorityLevelConfigurations")
		var internal flowcontrol.PriorityLevelConfiguration
		if err := flowcontrolapiv1.Convert_v1_PriorityLevelConfiguration_To_flowcontrol_PriorityLevelConfiguration(o, &internal, nil); err != nil {
			return append(errs, field.InternalError(field.NewPath("spec"), err))
		}
		if status {
			return append(errs, flowcontrolvalidation.ValidatePriorityLevelConfigurationStatus(&internal.Status, field.NewPath("status"))...)
		}
		return append(errs, flowcontrolvalidation.ValidatePriorityLevelConfiguration(&internal, flowcontrolv1.SchemeGroupVersion,
			flowcontrolvalidation.PriorityLevelValidationOptions{})...)
	}
	return nil
}

func rootOnly(ctx context.Context, what string) field.ErrorList {
	if space := spaces.SpaceOrRoot(ctx); space != spaces.Root {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata"),
			what+" configure API Priority and Fairness for the whole server: they are made in the root space, not in space "+space)}
	}
	return nil
}
