// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/shufflesharding"
	flowcontrolapiv1 "k8s.io/kubernetes/pkg/apis/flowcontrol/v1"

	"github.com/kubestellar/kubestellar/spaces"
)

// FlowSchemas and PriorityLevelConfigurations configure API Priority and
// Fairness for the whole server (server/fairness), which reads them in
// the root space. They get Kubernetes' own defaults, and validation: the
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
// as far as the APF controller depends on it (it trusts what it reads: an
// unknown distinguisher method, for one, would panic it), and keeps them
// in the root space: elsewhere they would configure nothing. Kubernetes'
// own validation (k8s.io/kubernetes/pkg/apis/flowcontrol/validation) is
// not imported: it imports the core API's validation, whose package
// registers Kubernetes' defaults for core/v1 kinds into k8s.io/api's
// scheme builder, and the server stores those kinds as written.
func validateFlowControl(ctx context.Context, obj runtime.Object, status bool) field.ErrorList {
	switch o := obj.(type) {
	case *flowcontrolv1.FlowSchema:
		errs := rootOnly(ctx, "FlowSchemas")
		if !status {
			errs = append(errs, validateFlowSchemaSpec(&o.Spec, field.NewPath("spec"))...)
		}
		return errs
	case *flowcontrolv1.PriorityLevelConfiguration:
		errs := rootOnly(ctx, "PriorityLevelConfigurations")
		if !status {
			errs = append(errs, validatePriorityLevelSpec(&o.Spec, field.NewPath("spec"))...)
		}
		return errs
	}
	return nil
}

func validateFlowSchemaSpec(spec *flowcontrolv1.FlowSchemaSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name := spec.PriorityLevelConfiguration.Name; name == "" {
		errs = append(errs, field.Required(fld.Child("priorityLevelConfiguration", "name"), "the priority level this schema sends requests to"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(fld.Child("priorityLevelConfiguration", "name"), name, msg))
		}
	}
	if p := spec.MatchingPrecedence; p < 1 || p > flowcontrolv1.FlowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(fld.Child("matchingPrecedence"), p, fmt.Sprintf("must be between 1 and %d", flowcontrolv1.FlowSchemaMaxMatchingPrecedence)))
	}
	if m := spec.DistinguisherMethod; m != nil && m.Type != flowcontrolv1.FlowDistinguisherMethodByUserType && m.Type != flowcontrolv1.FlowDistinguisherMethodByNamespaceType {
		errs = append(errs, field.NotSupported(fld.Child("distinguisherMethod", "type"), m.Type,
			[]flowcontrolv1.FlowDistinguisherMethodType{flowcontrolv1.FlowDistinguisherMethodByUserType, flowcontrolv1.FlowDistinguisherMethodByNamespaceType}))
	}
	for i, rule := range spec.Rules {
		rfld := fld.Child("rules").Index(i)
		if len(rule.Subjects) == 0 {
			errs = append(errs, field.Required(rfld.Child("subjects"), "at least one subject"))
		}
		for j, subject := range rule.Subjects {
			errs = append(errs, validateFlowSubject(subject, rfld.Child("subjects").Index(j))...)
		}
		if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
			errs = append(errs, field.Required(rfld, "at least one resourceRule or nonResourceRule"))
		}
		for j, r := range rule.ResourceRules {
			f := rfld.Child("resourceRules").Index(j)
			errs = append(errs, validateList(r.Verbs, flowcontrolv1.VerbAll, f.Child("verbs"))...)
			errs = append(errs, validateList(r.APIGroups, flowcontrolv1.APIGroupAll, f.Child("apiGroups"))...)
			errs = append(errs, validateList(r.Resources, flowcontrolv1.ResourceAll, f.Child("resources"))...)
			if len(r.Namespaces) == 0 && !r.ClusterScope {
				errs = append(errs, field.Required(f.Child("namespaces"), "namespaces, or clusterScope: true"))
			}
			for k, ns := range r.Namespaces {
				if ns == flowcontrolv1.NamespaceEvery {
					continue
				}
				for _, msg := range validation.IsDNS1123Label(ns) {
					errs = append(errs, field.Invalid(f.Child("namespaces").Index(k), ns, msg))
				}
			}
		}
		for j, r := range rule.NonResourceRules {
			f := rfld.Child("nonResourceRules").Index(j)
			errs = append(errs, validateList(r.Verbs, flowcontrolv1.VerbAll, f.Child("verbs"))...)
			errs = append(errs, validateList(r.NonResourceURLs, flowcontrolv1.NonResourceAll, f.Child("nonResourceURLs"))...)
			for k, url := range r.NonResourceURLs {
				if url != flowcontrolv1.NonResourceAll && (!strings.HasPrefix(url, "/") || strings.Contains(strings.TrimSuffix(url, "/*"), "*")) {
					errs = append(errs, field.Invalid(f.Child("nonResourceURLs").Index(k), url, `must start with "/", with "*" only as the whole of its last segment`))
				}
			}
		}
	}
	return errs
}

func validateFlowSubject(subject flowcontrolv1.Subject, fld *field.Path) field.ErrorList {
	required := func(child string, ok bool) field.ErrorList {
		if ok {
			return nil
		}
		return field.ErrorList{field.Required(fld.Child(child), "a "+string(subject.Kind)+" subject names its "+child)}
	}
	switch subject.Kind {
	case flowcontrolv1.SubjectKindUser:
		return required("user", subject.User != nil && subject.User.Name != "")
	case flowcontrolv1.SubjectKindGroup:
		return required("group", subject.Group != nil && subject.Group.Name != "")
	case flowcontrolv1.SubjectKindServiceAccount:
		return required("serviceAccount", subject.ServiceAccount != nil && subject.ServiceAccount.Namespace != "" && subject.ServiceAccount.Name != "")
	}
	return field.ErrorList{field.NotSupported(fld.Child("kind"), subject.Kind,
		[]flowcontrolv1.SubjectKind{flowcontrolv1.SubjectKindUser, flowcontrolv1.SubjectKindGroup, flowcontrolv1.SubjectKindServiceAccount})}
}

// validateList checks a list of a policy rule: not empty, and its
// wildcard, if any, alone.
func validateList(list []string, wildcard string, fld *field.Path) field.ErrorList {
	if len(list) == 0 {
		return field.ErrorList{field.Required(fld, "at least one, or "+strconv.Quote(wildcard)+" for all")}
	}
	if len(list) > 1 && slices.Contains(list, wildcard) {
		return field.ErrorList{field.Invalid(fld, list, strconv.Quote(wildcard)+" stands for all: it goes alone")}
	}
	return nil
}

func validatePriorityLevelSpec(spec *flowcontrolv1.PriorityLevelConfigurationSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	percent := func(p *int32, f *field.Path, upTo100 bool) {
		if p != nil && (*p < 0 || (upTo100 && *p > 100)) {
			errs = append(errs, field.Invalid(f, *p, "must be a percentage (0 to 100)"))
		}
	}
	shares := func(n *int32, f *field.Path) {
		if n != nil && *n < 0 {
			errs = append(errs, field.Invalid(f, *n, "must not be negative"))
		}
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(fld.Child("limited"), "an Exempt level has no limits"))
		}
		if e := spec.Exempt; e != nil {
			shares(e.NominalConcurrencyShares, fld.Child("exempt", "nominalConcurrencyShares"))
			percent(e.LendablePercent, fld.Child("exempt", "lendablePercent"), true)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(fld.Child("exempt"), "a Limited level is not exempt"))
		}
		l := spec.Limited
		if l == nil {
			errs = append(errs, field.Required(fld.Child("limited"), "a Limited level says its limits"))
			break
		}
		lf := fld.Child("limited")
		shares(l.NominalConcurrencyShares, lf.Child("nominalConcurrencyShares"))
		percent(l.LendablePercent, lf.Child("lendablePercent"), true)
		percent(l.BorrowingLimitPercent, lf.Child("borrowingLimitPercent"), false)
		rf := lf.Child("limitResponse")
		switch q := l.LimitResponse.Queuing; l.LimitResponse.Type {
		case flowcontrolv1.LimitResponseTypeReject:
			if q != nil {
				errs = append(errs, field.Forbidden(rf.Child("queuing"), "a Reject response has no queues"))
			}
		case flowcontrolv1.LimitResponseTypeQueue:
			if q == nil {
				errs = append(errs, field.Required(rf.Child("queuing"), "a Queue response says how many queues"))
				break
			}
			qf := rf.Child("queuing")
			if q.Queues < 1 {
				errs = append(errs, field.Invalid(qf.Child("queues"), q.Queues, "must be positive"))
			}
			if q.QueueLengthLimit < 1 {
				errs = append(errs, field.Invalid(qf.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
			}
			switch {
			case q.HandSize < 1:
				errs = append(errs, field.Invalid(qf.Child("handSize"), q.HandSize, "must be positive"))
			case q.HandSize > q.Queues:
				errs = append(errs, field.Invalid(qf.Child("handSize"), q.HandSize, fmt.Sprintf("must not be greater than queues (%d)", q.Queues)))
			case shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)) > shufflesharding.MaxHashBits:
				errs = append(errs, field.Invalid(qf.Child("handSize"), q.HandSize, fmt.Sprintf("queues %d and handSize %d need more than %d bits of entropy", q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
			}
		default:
			errs = append(errs, field.NotSupported(rf.Child("type"), l.LimitResponse.Type,
				[]flowcontrolv1.LimitResponseType{flowcontrolv1.LimitResponseTypeQueue, flowcontrolv1.LimitResponseTypeReject}))
		}
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), spec.Type,
			[]flowcontrolv1.PriorityLevelEnablement{flowcontrolv1.PriorityLevelEnablementExempt, flowcontrolv1.PriorityLevelEnablementLimited}))
	}
	return errs
}

func rootOnly(ctx context.Context, what string) field.ErrorList {
	if space := spaces.SpaceOrRoot(ctx); space != spaces.Root {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata"),
			what+" configure API Priority and Fairness for the whole server: they are made in the root space, not in space "+space)}
	}
	return nil
}
