// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/statuscel"
)

// nested is levels comprehensions over a ten-element list, nested: the
// attack of issue 13.
func nested(levels int) string {
	expr := "false"
	for i := levels - 1; i >= 0; i-- {
		expr = fmt.Sprintf("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].exists(x%d, %s)", i, expr)
	}
	return expr
}

func collector(t *testing.T, name string, exprs ...string) *unstructured.Unstructured {
	t.Helper()
	sc := &edgev2alpha1.StatusCollector{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "StatusCollector"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       edgev2alpha1.StatusCollectorSpec{Limit: 10},
	}
	for i, e := range exprs {
		sc.Spec.Select = append(sc.Spec.Select, edgev2alpha1.NamedExpression{Name: fmt.Sprintf("c%d", i), Def: edgev2alpha1.Expression(e)})
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sc)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: content}
}

func TestStatusCollectorCost(t *testing.T) {
	validator, err := statuscel.NewCompiler()
	require.NoError(t, err)
	plugin := newStatusCollectorCost(validator)
	statusCollectors := edgev2alpha1.SchemeGroupVersion.WithResource("statuscollectors")
	kind := edgev2alpha1.SchemeGroupVersion.WithKind("StatusCollector")

	good := collector(t, "sc", "inventory.name", "returned.status.conditions.exists(c, c.type == 'Ready')")
	attack := collector(t, "sc", "inventory.name", nested(10))
	broken := collector(t, "sc", "this is not CEL (")
	attackRelabelled := attack.DeepCopy()
	attackRelabelled.SetLabels(map[string]string{"a": "b"})

	for _, tc := range []struct {
		name        string
		op          admission.Operation
		obj, old    runtime.Object
		resource    string
		subresource string
		// want is part of the error; none when empty.
		want string
	}{
		{name: "create", op: admission.Create, obj: good},
		{name: "create the attack", op: admission.Create, obj: attack,
			want: `StatusCollector.edge.kubestellar.io "sc" is invalid: spec.select[1].def: Forbidden: estimated cost `},
		{name: "create with a bad expression", op: admission.Create, obj: broken,
			want: `StatusCollector.edge.kubestellar.io "sc" is invalid: spec.select[0].def: Invalid value: compilation failed: ERROR: <input>:1:6: Syntax error`},
		{name: "update to the attack", op: admission.Update, obj: attack, old: good,
			want: "exceeds budget 1000000 per expression by factor of more than 100x"},
		{name: "update away from the attack", op: admission.Update, obj: good, old: attack},
		{name: "update of a stored attack that leaves the spec", op: admission.Update, obj: attackRelabelled, old: attack},
		{name: "status of a stored attack", op: admission.Update, obj: attack, old: attack, subresource: "status"},
		{name: "another resource", op: admission.Create, obj: attack, resource: "customizers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gvr := statusCollectors
			if tc.resource != "" {
				gvr = edgev2alpha1.SchemeGroupVersion.WithResource(tc.resource)
			}
			attrs := admission.NewAttributesRecord(tc.obj, tc.old, kind, "", "sc", gvr, tc.subresource, tc.op, nil, false, &user.DefaultInfo{Name: "tenant"})
			require.True(t, plugin.Handles(tc.op))
			err := plugin.Validate(context.Background(), attrs, nil)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, apierrors.IsInvalid(err), "an Invalid error: %v", err)
			require.Contains(t, err.Error(), tc.want)
			causes := err.(apierrors.APIStatus).Status().Details.Causes
			require.NotEmpty(t, causes)
			require.True(t, strings.HasPrefix(causes[0].Field, "spec."), "the cause names the field: %+v", causes[0])
		})
	}
	require.False(t, plugin.Handles(admission.Delete))
	require.False(t, plugin.Handles(admission.Connect))
}

func TestWithStatusCollectorCost(t *testing.T) {
	chain, err := WithStatusCollectorCost(admission.NewChainHandler())
	require.NoError(t, err)
	attrs := admission.NewAttributesRecord(collector(t, "sc", nested(10)), nil, edgev2alpha1.SchemeGroupVersion.WithKind("StatusCollector"), "", "sc",
		edgev2alpha1.SchemeGroupVersion.WithResource("statuscollectors"), "", admission.Create, nil, false, &user.DefaultInfo{Name: "tenant"})
	err = chain.(admission.ValidationInterface).Validate(context.Background(), attrs, nil)
	require.True(t, apierrors.IsInvalid(err), "the chain refuses the attack: %v", err)
}

// TestHealthCheckCost: an EdgePlacement's spec.rollout.healthCheck.cel is
// held to what a StatusCollector's expression is: it compiles, and the
// attack of issue 13 is refused by its estimated cost.
func TestHealthCheckCost(t *testing.T) {
	validator, err := statuscel.NewCompiler()
	require.NoError(t, err)
	plugin := newStatusCollectorCost(validator)
	placement := func(expr string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": edgev2alpha1.SchemeGroupVersion.String(), "kind": "EdgePlacement",
			"metadata": map[string]any{"name": "p"},
			"spec":     map[string]any{"rollout": map[string]any{"strategy": "Progressive", "healthCheck": map[string]any{"cel": expr}}}}}
	}
	for expr, want := range map[string]string{
		"obj.status.readyReplicas >= obj.spec.replicas": "",
		"obj.status.ready ==":                           "spec.rollout.healthCheck.cel: Invalid value: compilation failed",
		nested(10):                                      "spec.rollout.healthCheck.cel: Forbidden: estimated cost",
	} {
		attrs := admission.NewAttributesRecord(placement(expr), nil, edgev2alpha1.SchemeGroupVersion.WithKind("EdgePlacement"), "", "p",
			edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements"), "", admission.Create, nil, false, &user.DefaultInfo{Name: "tenant"})
		err := plugin.Validate(context.Background(), attrs, nil)
		if want == "" {
			require.NoError(t, err, expr)
			continue
		}
		require.True(t, apierrors.IsInvalid(err), "%s: %v", expr, err)
		require.Contains(t, err.Error(), want)
	}
}
