// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package celtest holds StatusCollectors for the tests of the packages that
// compile and run them.
package celtest

import (
	"fmt"
	"strings"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// NestedComprehension is the attack of issue 13: levels comprehensions
// over a ten-element list, nested, whose innermost test never holds, so
// that every one of the 10^levels iterations runs.
func NestedComprehension(levels int) string {
	list := "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
	vars := make([]string, levels)
	for i := range vars {
		vars[i] = fmt.Sprintf("x%d", i)
	}
	expr := strings.Join(vars, " + ") + " < 0"
	for i := levels - 1; i >= 0; i-- {
		expr = fmt.Sprintf("%s.exists(%s, %s)", list, vars[i], expr)
	}
	return expr
}

// SelectOf is a StatusCollector that selects a column per expression.
func SelectOf(exprs ...string) edgev2alpha1.StatusCollectorSpec {
	spec := edgev2alpha1.StatusCollectorSpec{Limit: 10}
	for i, e := range exprs {
		spec.Select = append(spec.Select, edgev2alpha1.NamedExpression{Name: fmt.Sprintf("c%d", i), Def: edgev2alpha1.Expression(e)})
	}
	return spec
}

// Expr is an Expression, for the fields that take a pointer to one.
func Expr(s string) *edgev2alpha1.Expression { e := edgev2alpha1.Expression(s); return &e }
