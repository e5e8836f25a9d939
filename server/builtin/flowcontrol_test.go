// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/utils/ptr"

	"github.com/kubestellar/kubestellar/spaces"
)

func TestValidateFlowControl(t *testing.T) {
	root := spaces.WithSpace(context.Background(), spaces.Root)
	// Kubernetes' own objects are valid.
	for _, fs := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
		require.Empty(t, validateFlowControl(root, fs, false), fs.Name)
	}
	for _, pl := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
		require.Empty(t, validateFlowControl(root, pl, false), pl.Name)
	}

	schema := func(mutate func(*flowcontrolv1.FlowSchemaSpec)) *flowcontrolv1.FlowSchema {
		fs := bootstrap.SuggestedFlowSchemaGlobalDefault.DeepCopy()
		mutate(&fs.Spec)
		return fs
	}
	level := func(mutate func(*flowcontrolv1.PriorityLevelConfigurationSpec)) *flowcontrolv1.PriorityLevelConfiguration {
		pl := bootstrap.SuggestedPriorityLevelConfigurationGlobalDefault.DeepCopy()
		mutate(&pl.Spec)
		return pl
	}
	cases := []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{"no level", schema(func(s *flowcontrolv1.FlowSchemaSpec) { s.PriorityLevelConfiguration.Name = "" }), "spec.priorityLevelConfiguration.name: Required"},
		{"precedence 0", schema(func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 0 }), "spec.matchingPrecedence: Invalid value: 0"},
		{"precedence too high", schema(func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 10001 }), "must be between 1 and 10000"},
		{"unknown distinguisher", schema(func(s *flowcontrolv1.FlowSchemaSpec) {
			s.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: "ByColor"}
		}), `spec.distinguisherMethod.type: Unsupported value: "ByColor"`},
		{"no subjects", schema(func(s *flowcontrolv1.FlowSchemaSpec) { s.Rules[0].Subjects = nil }), "spec.rules[0].subjects: Required"},
		{"group without name", schema(func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].Subjects = []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup}}
		}), "spec.rules[0].subjects[0].group: Required"},
		{"unknown subject kind", schema(func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].Subjects = []flowcontrolv1.Subject{{Kind: "Robot"}}
		}), "spec.rules[0].subjects[0].kind: Unsupported value"},
		{"no verbs", schema(func(s *flowcontrolv1.FlowSchemaSpec) { s.Rules[0].ResourceRules[0].Verbs = nil }), "spec.rules[0].resourceRules[0].verbs: Required"},
		{"wildcard not alone", schema(func(s *flowcontrolv1.FlowSchemaSpec) { s.Rules[0].ResourceRules[0].Verbs = []string{"*", "get"} }), "stands for all"},
		{"no namespaces, not cluster-scoped", schema(func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].ResourceRules[0].Namespaces, s.Rules[0].ResourceRules[0].ClusterScope = nil, false
		}), "spec.rules[0].resourceRules[0].namespaces: Required"},
		{"bad URL", schema(func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].NonResourceRules[0].NonResourceURLs = []string{"healthz"}
		}), "must start with"},
		{"no rules at all", schema(func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].ResourceRules, s.Rules[0].NonResourceRules = nil, nil
		}), "spec.rules[0]: Required"},
		{"unknown type", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Type = "Sometimes" }), `spec.type: Unsupported value: "Sometimes"`},
		{"limited without limits", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Limited = nil }), "spec.limited: Required"},
		{"exempt with limits", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Type = flowcontrolv1.PriorityLevelEnablementExempt
		}), "spec.limited: Forbidden"},
		{"negative shares", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.NominalConcurrencyShares = ptr.To[int32](-1)
		}), "spec.limited.nominalConcurrencyShares"},
		{"lending over 100%", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Limited.LendablePercent = ptr.To[int32](101) }), "spec.limited.lendablePercent"},
		{"queue without queuing", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Limited.LimitResponse.Queuing = nil }), "spec.limited.limitResponse.queuing: Required"},
		{"reject with queuing", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.LimitResponse.Type = flowcontrolv1.LimitResponseTypeReject
		}), "spec.limited.limitResponse.queuing: Forbidden"},
		{"hand bigger than the deck", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.LimitResponse.Queuing.Queues, s.Limited.LimitResponse.Queuing.HandSize = 4, 8
		}), "spec.limited.limitResponse.queuing.handSize: Invalid value: 8"},
		{"too much entropy", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.LimitResponse.Queuing.Queues, s.Limited.LimitResponse.Queuing.HandSize = 10000, 50
		}), "bits of entropy"},
		{"no queue length", level(func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.LimitResponse.Queuing.QueueLengthLimit = 0
		}), "queueLengthLimit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := validateFlowControl(root, c.obj, false)
			require.NotEmpty(t, errs)
			require.Contains(t, errs.ToAggregate().Error(), c.want)
		})
	}

	// Outside the root space they configure nothing: refused.
	errs := validateFlowControl(spaces.WithSpace(context.Background(), "team-a"), bootstrap.SuggestedFlowSchemaGlobalDefault, false)
	require.Len(t, errs, 1)
	require.True(t, strings.Contains(errs[0].Error(), "made in the root space, not in space team-a"), errs[0].Error())
	// Other kinds are not its business.
	require.Empty(t, validateFlowControl(root, &corev1.ConfigMap{}, false))
}

// TestCoreKindsAreNotDefaulted: the scheme the server stores built-in
// kinds with has no defaulting for them (a package of k8s.io/kubernetes
// imported anywhere in the binary could register Kubernetes' defaults into
// k8s.io/api's scheme builders), while FlowSchemas and
// PriorityLevelConfigurations get Kubernetes' defaults.
func TestCoreKindsAreNotDefaulted(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	scheme.Default(svc)
	require.Empty(t, svc.Spec.Ports[0].Protocol)
	require.Empty(t, svc.Spec.SessionAffinity)
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	scheme.Default(pod)
	require.Empty(t, pod.Spec.RestartPolicy)
	require.Empty(t, pod.Spec.Containers[0].TerminationMessagePath)

	pl := &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{}}}
	defaultFlowControl(pl)
	require.Equal(t, int32(30), *pl.Spec.Limited.NominalConcurrencyShares)
}
