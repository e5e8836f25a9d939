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
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
)

// resettable is a fixed RESTMapper.
type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// TestUsage: Kubernetes' usage calculation, fed by the space's registry
// and the datastore lister, counts what a cluster counts in the quota's
// namespace only: core names, count/ names of any group the space serves
// (not of one it does not), node ports and load balancers, pods' compute
// requests, and a scoped quota only what is in its scope.
func TestUsage(t *testing.T) {
	ctx := context.Background()
	hard := corev1.ResourceList{
		"configmaps": resource.MustParse("5"), "count/deployments.apps": resource.MustParse("1"), "count/widgets.example.com": resource.MustParse("1"),
		"count/gadgets.example.com": resource.MustParse("1"), "services.nodeports": resource.MustParse("9"), "services.loadbalancers": resource.MustParse("9"),
		"requests.cpu": resource.MustParse("1"), "pods": resource.MustParse("9"),
	}
	quotas := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, quotas.Add(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "app"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}))

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
	pod := func(name, namespace, cpu string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"cpu": resource.MustParse(cpu)}
		}
		return p
	}
	// Whole objects for the kinds evaluated whole, metadata for those
	// counted.
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		{Group: "example.com", Version: "v1", Resource: "widgets"}: "WidgetList"},
		service("np", "NodePort", 2), service("lb", "LoadBalancer", 1), service("ip", "ClusterIP", 3),
		pod("small", "app", "100m"), pod("big", "app", "300m"), pod("none", "app", ""), pod("elsewhere", "other", "2"),
	)
	counted := func(apiVersion, kind, namespace, name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	}
	metaScheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(metaScheme))
	md := metadatafake.NewSimpleMetadataClient(metaScheme,
		counted("v1", "ConfigMap", "app", "a"), counted("v1", "ConfigMap", "app", "kube-root-ca.crt"), counted("v1", "ConfigMap", "other", "a"),
		counted("apps/v1", "Deployment", "app", "d"))
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("ConfigMap"), corev1.SchemeGroupVersion.WithKind("Service"),
		corev1.SchemeGroupVersion.WithKind("Pod"), appsv1.SchemeGroupVersion.WithKind("Deployment"), {Group: "example.com", Version: "v1", Kind: "Widget"}} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	lister := func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		return &storeLister{ctx: ctx, dynamic: dyn, metadata: md, gvr: gvr, lists: flowcontrol.NewFakeAlwaysRateLimiter()}, nil
	}
	counting, err := core.NewEvaluators(lister, nil, served)
	require.NoError(t, err)
	reg := &registry{Registry: generic.NewRegistry(counting), quotas: corev1listers.NewResourceQuotaLister(quotas), listerFor: lister,
		mapper: resettable{mapper}, counts: map[schema.GroupResource]quota.Evaluator{}}

	used, err := quota.CalculateUsage("app", nil, hard, reg, nil)
	require.NoError(t, err)
	want := corev1.ResourceList{"configmaps": resource.MustParse("2"), "count/deployments.apps": resource.MustParse("1"),
		"count/widgets.example.com": resource.MustParse("0"), "services.nodeports": resource.MustParse("3"), "services.loadbalancers": resource.MustParse("1"),
		"requests.cpu": resource.MustParse("400m"), "pods": resource.MustParse("3")}
	require.Len(t, used, len(want), "%v (count/gadgets.example.com is not served: not counted)", used)
	for name, q := range want {
		got := used[name]
		require.Zero(t, q.Cmp(got), "%s: %s", name, got.String())
	}

	used, err = quota.CalculateUsage("app", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, corev1.ResourceList{"pods": resource.MustParse("9")}, reg, nil)
	require.NoError(t, err)
	got, one := used["pods"], resource.MustParse("1")
	require.Zero(t, one.Cmp(got), "a BestEffort quota counts the pod without requests only: %s", got.String())
}
