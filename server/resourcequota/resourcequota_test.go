// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package resourcequota

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// resettable is a fixed RESTMapper.
type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// TestStatus: a quota's status holds its hard limits and the usage of the
// names it counts, in its namespace only: core names, count/ names of any
// group, node ports; not compute resources; a scoped quota counts
// nothing. A status already right is not written again.
func TestStatus(t *testing.T) {
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "app"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			"configmaps": resource.MustParse("5"), "count/deployments.apps": resource.MustParse("1"), "count/widgets.example.com": resource.MustParse("1"),
			"services.nodeports": resource.MustParse("9"), "services.loadbalancers": resource.MustParse("9"), "requests.cpu": resource.MustParse("1"),
		}}}
	scoped := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "scoped", Namespace: "app"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("1")}, Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}}
	kube := fake.NewClientset(quota, scoped)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(quota))
	require.NoError(t, indexer.Add(scoped))

	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	require.NoError(t, appsv1.AddToScheme(scheme))
	service := func(name, typ string, ports int) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceType(typ)}}
		for i := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: int32(80 + i)})
		}
		return s
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		{Group: "example.com", Version: "v1", Resource: "widgets"}: "WidgetList"},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "app"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "app"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "other"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "app"}},
		service("np", "NodePort", 2), service("lb", "LoadBalancer", 1), service("ip", "ClusterIP", 3),
	)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Service"), meta.RESTScopeNamespace)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	l := &statusLoop{quotas: kube.CoreV1(), lister: corev1listers.NewResourceQuotaLister(indexer), dynamic: dyn,
		mapper: resettable{mapper}, lists: flowcontrol.NewFakeAlwaysRateLimiter()}

	require.NoError(t, l.reconcile(ctx, "app/q"))
	got, err := kube.CoreV1().ResourceQuotas("app").Get(ctx, "q", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, quota.Spec.Hard, got.Status.Hard)
	want := corev1.ResourceList{"configmaps": resource.MustParse("2"), "count/deployments.apps": resource.MustParse("1"),
		"count/widgets.example.com": resource.MustParse("0"), "services.nodeports": resource.MustParse("3"), "services.loadbalancers": resource.MustParse("1")}
	require.Len(t, got.Status.Used, len(want), "%v", got.Status.Used)
	for name, q := range want {
		used := got.Status.Used[name]
		require.Zero(t, q.Cmp(used), "%s: %s", name, used.String())
	}

	require.NoError(t, l.reconcile(ctx, "app/scoped"))
	got, err = kube.CoreV1().ResourceQuotas("app").Get(ctx, "scoped", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, got.Status.Used, "a scoped quota counts nothing")

	// Up to date: no write.
	require.NoError(t, indexer.Update(func() *corev1.ResourceQuota {
		q, err := kube.CoreV1().ResourceQuotas("app").Get(ctx, "q", metav1.GetOptions{})
		require.NoError(t, err)
		return q
	}()))
	kube.ClearActions()
	require.NoError(t, l.reconcile(ctx, "app/q"))
	for _, a := range kube.Actions() {
		require.NotEqual(t, "update", a.GetVerb(), "a status already right is written again")
	}
}
