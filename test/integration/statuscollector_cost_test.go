// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// nestedComprehension is the attack of issue 13: levels comprehensions
// over a ten-element list, nested, whose innermost test never holds, so
// that all 10^levels iterations run (at 10 levels, hours).
func nestedComprehension(levels int) string {
	vars := make([]string, levels)
	for i := range vars {
		vars[i] = fmt.Sprintf("x%d", i)
	}
	expr := strings.Join(vars, " + ") + " < 0"
	for i := levels - 1; i >= 0; i-- {
		expr = fmt.Sprintf("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].exists(%s, %s)", vars[i], expr)
	}
	return expr
}

// collectorFile writes a StatusCollector as YAML for kubectl.
func collectorFile(t *testing.T, dir string, sc *edgev2alpha1.StatusCollector) string {
	t.Helper()
	sc.APIVersion, sc.Kind = edgev2alpha1.SchemeGroupVersion.String(), "StatusCollector"
	data, err := yaml.Marshal(sc)
	require.NoError(t, err)
	path := filepath.Join(dir, sc.Name+".yaml")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func countCollector(name string, filter string) *edgev2alpha1.StatusCollector {
	return &edgev2alpha1.StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: edgev2alpha1.StatusCollectorSpec{Limit: 10,
		Filter:         expr(filter),
		CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "clusters", Type: edgev2alpha1.AggregationCount}}}}
}

func readyCondition(t *testing.T, c client.Client, wds, name string) *metav1.Condition {
	t.Helper()
	sc := &edgev2alpha1.StatusCollector{}
	if err := c.Get(in(wds), client.ObjectKey{Name: name}, sc); err != nil {
		return &metav1.Condition{Message: err.Error()}
	}
	cond := meta.FindStatusCondition(sc.Status.Conditions, edgev2alpha1.StatusCollectorReady)
	if cond == nil || cond.ObservedGeneration != sc.Generation {
		return &metav1.Condition{Message: "not reported yet"}
	}
	return cond
}

// TestStatusCollectorCost: a tenant's StatusCollector whose CEL costs too
// much is refused with the estimate and the budget, one that does not
// compile with the compile error; a normal one is accepted; and what fits
// the estimate but not the runtime limit (inputs larger than the estimate
// assumes) is stopped, left out of the CombinedStatus and reported on the
// StatusCollector, while the other summaries still come.
func TestStatusCollectorCost(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")
	w := in("wds1")
	k := harness.Kubectl{Kubeconfig: s.Kubeconfig}
	server := fmt.Sprintf("https://127.0.0.1:%d%s", s.Port, spaces.URLPath("wds1"))
	dir := t.TempDir()

	// The attack of issue 13, applied with kubectl: refused, saying why.
	attack := countCollector("nested", nestedComprehension(10))
	errOut := k.MustFail(t, "--server", server, "apply", "-f", collectorFile(t, dir, attack))
	require.Contains(t, errOut, `The StatusCollector "nested" is invalid: spec.filter: Forbidden: estimated cost `)
	require.Contains(t, errOut, "exceeds budget 1000000 per expression by factor of more than 100x")
	require.True(t, apierrors.IsNotFound(c.Get(w, client.ObjectKey{Name: "nested"}, &edgev2alpha1.StatusCollector{})), "the attack is not stored")

	// Seven levels (8.5 s of CPU per evaluation before), through the API.
	err := c.Create(w, countCollector("nested7", nestedComprehension(7)))
	require.True(t, apierrors.IsInvalid(err), "refused as invalid: %v", err)
	causes := err.(apierrors.APIStatus).Status().Details.Causes
	require.Len(t, causes, 1)
	require.Equal(t, "spec.filter", causes[0].Field)
	require.Contains(t, causes[0].Message, "exceeds budget 1000000 per expression")

	// An expression that does not compile: refused with the compile error.
	errOut = k.MustFail(t, "--server", server, "apply", "-f", collectorFile(t, dir, countCollector("broken", "this is not CEL (")))
	require.Contains(t, errOut, `The StatusCollector "broken" is invalid: spec.filter: Invalid value: compilation failed: ERROR: <input>:1:6: Syntax error`)

	// A normal one is accepted and reported valid.
	k.MustRun(t, "--server", server, "apply", "-f", collectorFile(t, dir, countCollector("clusters", "inventory.name.startsWith('edge')")))
	eventually(t, 30*time.Second, func() (bool, error) {
		cond := readyCondition(t, c, "wds1", "clusters")
		return cond.Status == metav1.ConditionTrue && cond.Reason == "Valid", nil
	}, "the clusters StatusCollector to be reported valid")

	// Changing it into the attack is refused; it stays as it was.
	errOut = k.MustFail(t, "--server", server, "patch", "statuscollector", "clusters", "--type=merge",
		"-p", fmt.Sprintf(`{"spec":{"filter":%q}}`, nestedComprehension(10)))
	require.Contains(t, errOut, `The StatusCollector "clusters" is invalid: spec.filter: Forbidden: estimated cost `)
	kept := &edgev2alpha1.StatusCollector{}
	require.NoError(t, c.Get(w, client.ObjectKey{Name: "clusters"}, kept))
	require.Equal(t, "inventory.name.startsWith('edge')", string(*kept.Spec.Filter))

	// An expression within the estimate, over an object larger than the
	// estimate assumes: seven searches through 1.8 MB of data cost more
	// than one evaluation may.
	var searches []string
	for i := range 7 {
		searches = append(searches, fmt.Sprintf("obj.data[k].contains('needle%d')", i))
	}
	heavy := &edgev2alpha1.StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: "heavy"}, Spec: edgev2alpha1.StatusCollectorSpec{Limit: 10,
		Select: []edgev2alpha1.NamedExpression{{Name: "found", Def: edgev2alpha1.Expression("obj.data.exists(k, " + strings.Join(searches, " || ") + ")")}}}}
	require.NoError(t, c.Create(w, heavy))
	require.NoError(t, c.Create(w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	big := strings.Repeat("x", 900_000)
	require.NoError(t, c.Create(w, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "big"}, Data: map[string]string{"a": big, "b": big}}))
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Downsync: []edgev2alpha1.DownsyncClause{{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{"app"}, ObjectNames: []string{"big"},
			StatusCollectors: []string{"clusters", "heavy"}}},
	}}))

	results := func() string {
		cs := &edgev2alpha1.CombinedStatus{}
		if err := c.Get(w, client.ObjectKey{Namespace: "app", Name: "big.configmaps.big"}, cs); err != nil {
			return err.Error()
		}
		var out []string
		for _, r := range cs.Results {
			var rows []string
			for _, row := range r.Rows {
				for _, col := range row.Columns {
					rows = append(rows, string(col.Raw))
				}
			}
			out = append(out, r.Name+"="+strings.Join(rows, ","))
		}
		return strings.Join(out, " ")
	}
	const stopped = "such as configmaps app/big under placement big: spec.select[0].def: evaluation exceeded the cost limit of 1000000 per evaluation"
	eventually(t, 60*time.Second, func() (bool, error) {
		cond := readyCondition(t, c, "wds1", "heavy")
		ok := cond.Status == metav1.ConditionFalse && cond.Reason == "CostLimitExceeded" && strings.Contains(cond.Message, stopped)
		return ok, fmt.Errorf("condition %+v", cond)
	}, "the heavy StatusCollector to report the limit")
	eventually(t, 30*time.Second, func() (bool, error) {
		got := results()
		return got == "clusters=2", fmt.Errorf("results %s", got)
	}, "the CombinedStatus to hold the other summary")

	// Once the expression is fixed, the condition clears and its summary comes.
	update(t, c, w, heavy, func() {
		heavy.Spec.Select[0].Def = "obj.data.exists(k, k == 'a')"
	})
	eventually(t, 30*time.Second, func() (bool, error) {
		cond, got := readyCondition(t, c, "wds1", "heavy"), results()
		return cond.Status == metav1.ConditionTrue && got == "clusters=2 heavy=true,true", fmt.Errorf("condition %+v, results %s", cond, got)
	}, "the heavy StatusCollector to recover")
}
