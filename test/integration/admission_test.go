// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestPoliciesAndQuotasPerSpace drives each space's admission plug-ins (an
// admission policy, a ResourceQuota) from many writers at once in two
// spaces, one with them and one without, so that the race detector sees
// the plug-ins made and fed while requests arrive: the policy and the
// quota act in their space, and nothing of them reaches the other.
func TestPoliciesAndQuotasPerSpace(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "governed")
	createSpace(t, s, "free")
	governed, free := kube(t, s, "governed"), kube(t, s, "free")

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: `!object.metadata.name.startsWith("forbidden")`, Message: "no forbidden ConfigMaps here"}},
		},
	}
	_, err := governed.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = governed.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-forbidden",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	const limit = 10
	_, err = governed.CoreV1().ResourceQuotas("default").Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/secrets": resource.MustParse(fmt.Sprint(limit))}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, func() (bool, error) {
		_, err := governed.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "forbidden-probe", "x"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "no forbidden ConfigMaps here"), nil
	}, "the policy to act")
	eventually(t, time.Minute, func() (bool, error) {
		q, err := governed.CoreV1().ResourceQuotas("default").Get(ctx, "q", metav1.GetOptions{})
		return err == nil && q.Status.Used != nil, err
	}, "the quota's usage to be computed")

	// Many writers at once, in both spaces.
	const writers, each = 4, 6
	type result struct {
		space     string
		created   int
		forbidden int
		exceeded  int
		other     []error
	}
	results := make(chan result, 2*writers)
	var wg sync.WaitGroup
	for _, sp := range []struct {
		name string
		c    kubernetes.Interface
	}{{"governed", governed}, {"free", free}} {
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := result{space: sp.name}
				for i := range each {
					name := fmt.Sprintf("w%d-%d", w, i)
					_, err := sp.c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
					switch {
					case err == nil:
						r.created++
					case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: q"):
						r.exceeded++
					default:
						r.other = append(r.other, err)
					}
					_, err = sp.c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "forbidden-"+name, "x"), metav1.CreateOptions{})
					switch {
					case err == nil:
					case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "no forbidden ConfigMaps here"):
						r.forbidden++
					default:
						r.other = append(r.other, err)
					}
				}
				results <- r
			}()
		}
	}
	wg.Wait()
	close(results)
	totals := map[string]*result{"governed": {}, "free": {}}
	for r := range results {
		require.Empty(t, r.other, "unexpected errors in %s", r.space)
		tot := totals[r.space]
		tot.created += r.created
		tot.forbidden += r.forbidden
		tot.exceeded += r.exceeded
	}
	require.Equal(t, limit, totals["governed"].created, "the quota admits exactly its limit")
	require.Equal(t, writers*each-limit, totals["governed"].exceeded)
	require.Equal(t, writers*each, totals["governed"].forbidden, "the policy refuses every forbidden name")
	require.Equal(t, result{created: writers * each}, *totals["free"], "the other space is bound by neither")

	eventually(t, time.Minute, func() (bool, error) {
		q, err := governed.CoreV1().ResourceQuotas("default").Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used := q.Status.Used["count/secrets"]
		return used.Value() == limit, nil
	}, "the quota's usage to be its limit")
}
