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
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
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

// TestQuotaComputeResourcesAndScopes: a space's ResourceQuotas bound what
// a cluster's bound (pods' compute requests, scopes, services' node
// ports), their status counts it and releases it on delete, across a
// restart; a second space with a namespace and a quota of the same names
// is bound by its own quota only.
func TestQuotaComputeResourcesAndScopes(t *testing.T) {
	dataDir := t.TempDir()
	s := harness.StartInProcess(t, dataDir)
	ctx := context.Background()
	createSpace(t, s, "tight")
	createSpace(t, s, "loose")
	quota := func(name string, hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}}
	}
	pod := func(name, cpu string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		}
		return p
	}
	nodePort := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	for space, cpu := range map[string]string{"tight": "1", "loose": "100"} {
		c := kube(t, s, space)
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.CoreV1().ResourceQuotas("app").Create(ctx, quota("compute", corev1.ResourceList{
			corev1.ResourceRequestsCPU: resource.MustParse(cpu), corev1.ResourceServicesNodePorts: resource.MustParse(cpu)}), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.CoreV1().ResourceQuotas("app").Create(ctx, quota("best-effort", corev1.ResourceList{corev1.ResourcePods: resource.MustParse(cpu)},
			corev1.ResourceQuotaScopeBestEffort), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	tight, loose := kube(t, s, "tight"), kube(t, s, "loose")
	used := func(c kubernetes.Interface, quota string, name corev1.ResourceName, want string) {
		t.Helper()
		eventually(t, time.Minute, func() (bool, error) {
			q, err := c.CoreV1().ResourceQuotas("app").Get(ctx, quota, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got, ok := q.Status.Used[name]
			return ok && got.Cmp(resource.MustParse(want)) == 0, nil
		}, fmt.Sprintf("quota %s to show %s used: %s", quota, name, want))
	}
	used(tight, "compute", corev1.ResourceRequestsCPU, "0")
	used(tight, "best-effort", corev1.ResourcePods, "0")

	// Each write past the quota waits until the quota's status counts
	// the one before: as in a cluster, the quota controller's first full
	// count, made from its caches while the space starts, may overwrite
	// the count admission just added, if the pod is not in its cache yet.
	_, err := tight.CoreV1().Pods("app").Create(ctx, pod("first", "600m"), metav1.CreateOptions{})
	require.NoError(t, err)
	used(tight, "compute", corev1.ResourceRequestsCPU, "600m")
	_, err = tight.CoreV1().Pods("app").Create(ctx, pod("second", "600m"), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: compute"), "a pod past requests.cpu: %v", err)
	_, err = tight.CoreV1().Pods("app").Create(ctx, pod("best-effort-1", ""), metav1.CreateOptions{})
	require.Error(t, err, "a pod without requests where requests.cpu is bounded")
	require.Contains(t, err.Error(), "must specify requests.cpu")
	_, err = tight.CoreV1().Services("app").Create(ctx, nodePort("np1"), metav1.CreateOptions{})
	require.NoError(t, err)
	used(tight, "compute", corev1.ResourceServicesNodePorts, "1")
	_, err = tight.CoreV1().Services("app").Create(ctx, nodePort("np2"), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err) && strings.Contains(err.Error(), "services.nodeports"), "a node port past the quota: %v", err)
	used(tight, "compute", corev1.ResourceRequestsCPU, "600m")
	used(tight, "compute", corev1.ResourceServicesNodePorts, "1")

	// The other space: the same names, its own (larger) quota.
	for _, name := range []string{"first", "second"} {
		_, err := loose.CoreV1().Pods("app").Create(ctx, pod(name, "600m"), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	used(loose, "compute", corev1.ResourceRequestsCPU, "1200m")
	used(tight, "compute", corev1.ResourceRequestsCPU, "600m")

	// Across a restart, a delete is counted and the freed room is usable.
	s.Stop()
	s = harness.StartInProcess(t, dataDir)
	tight = kube(t, s, "tight")
	require.NoError(t, tight.CoreV1().Pods("app").Delete(ctx, "first", metav1.DeleteOptions{}))
	used(tight, "compute", corev1.ResourceRequestsCPU, "0")
	// Admission reads the quota from its cache, a moment behind the
	// status (as in a cluster): only "exceeded" may be met meanwhile.
	eventually(t, time.Minute, func() (bool, error) {
		_, err := tight.CoreV1().Pods("app").Create(ctx, pod("second", "600m"), metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "exceeded quota: compute") {
			require.NoError(t, err)
		}
		return err == nil, err
	}, "the freed room to be usable")
	used(tight, "compute", corev1.ResourceRequestsCPU, "600m")
}

// TestPolicyTypeChecksAndFirstMutation: a space's ValidatingAdmissionPolicy
// gets its type checks written in its status, against that space's own
// kinds (a CRD of the space; a policy of the same name in another space
// is judged on its own), and a MutatingAdmissionPolicy acts on the very
// first write after its binding, in a space whose plug-ins that write
// makes.
func TestPolicyTypeChecksAndFirstMutation(t *testing.T) {
	dataDir := t.TempDir()
	s := harness.StartInProcess(t, dataDir)
	ctx := context.Background()
	createSpace(t, s, "checked")
	createSpace(t, s, "other")
	rule := func(group, resource string) *admissionregistrationv1.MatchResources {
		return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}}}
	}
	policy := func(match *admissionregistrationv1.MatchResources, expression string) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "typed"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: match,
				Validations: []admissionregistrationv1.Validation{{Expression: expression}}}}
	}
	// In "checked", the expression compares a Deployment's replicas (a
	// number) with a string: a type error. In "other", the same name holds a
	// well-typed expression.
	checked, other := kube(t, s, "checked"), kube(t, s, "other")
	_, err := checked.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx,
		policy(rule("apps", "deployments"), `object.spec.replicas > '1'`), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = other.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx,
		policy(rule("apps", "deployments"), `object.spec.replicas > 1`), metav1.CreateOptions{})
	require.NoError(t, err)
	typeChecking := func(c kubernetes.Interface) []admissionregistrationv1.ExpressionWarning {
		t.Helper()
		var warnings []admissionregistrationv1.ExpressionWarning
		eventually(t, time.Minute, func() (bool, error) {
			p, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "typed", metav1.GetOptions{})
			// Checked once the status observes the policy's generation
			// (a check that finds nothing may leave typeChecking empty,
			// as server-side apply of Kubernetes' controller leaves it).
			if err != nil || p.Status.ObservedGeneration != p.Generation {
				return false, err
			}
			warnings = nil
			if p.Status.TypeChecking != nil {
				warnings = p.Status.TypeChecking.ExpressionWarnings
			}
			return true, nil
		}, "the policy's type checks")
		return warnings
	}
	warnings := typeChecking(checked)
	require.Len(t, warnings, 1, "%v", warnings)
	require.Contains(t, warnings[0].Warning, "apps/v1, Kind=Deployment")
	require.Empty(t, typeChecking(other))

	// A kind of the space's own: its CRD's schema is the one checked.
	ext, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, "checked"))
	require.NoError(t, err)
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, func() (bool, error) {
		_, err := dyn(t, s, "checked").Resource(widgetsGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}, "the CRD to be served")
	p, err := checked.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "typed", metav1.GetOptions{})
	require.NoError(t, err)
	p.Spec.MatchConstraints = rule(widgetsGVR.Group, widgetsGVR.Resource)
	p.Spec.Validations = []admissionregistrationv1.Validation{{Expression: `object.spec.size == "big"`}}
	_, err = checked.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	warnings = typeChecking(checked)
	require.Len(t, warnings, 1, "%v", warnings)
	require.Contains(t, warnings[0].Warning, "Widget")

	// The first write after a mutating binding is mutated.
	mutating := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "replicas"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: rule("apps", "deployments"),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{spec: Object.spec{replicas: 7}}`}}}}}
	_, err = other.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, mutating, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = other.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas"}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "replicas"}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	created, err := other.AppsV1().Deployments("default").Create(ctx, deployment("first"), metav1.CreateOptions{})
	require.NoError(t, err, "the first write after the binding")
	require.Equal(t, int32(7), *created.Spec.Replicas, "the first write after the binding is mutated")

	// After a restart the plug-ins are made again by the first write, and
	// a changed policy is checked again.
	s.Stop()
	s = harness.StartInProcess(t, dataDir)
	other, checked = kube(t, s, "other"), kube(t, s, "checked")
	created, err = other.AppsV1().Deployments("default").Create(ctx, deployment("second"), metav1.CreateOptions{})
	require.NoError(t, err, "the first write after the restart")
	require.Equal(t, int32(7), *created.Spec.Replicas, "the first write after the restart is mutated")
	p, err = checked.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "typed", metav1.GetOptions{})
	require.NoError(t, err)
	p.Spec.Validations = []admissionregistrationv1.Validation{{Expression: `object.spec.size > 1`}}
	_, err = checked.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Empty(t, typeChecking(checked), "the well-typed policy after the restart")
}
