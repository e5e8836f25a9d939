// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package resourcequota makes the ResourceQuotas of a space count and
// bound what each of its namespaces holds, as in a cluster, and nothing in
// any other space.
//
// Each space that holds a ResourceQuota (server/perspace) gets its own
// instance of Kubernetes' quota admission (k8s.io/apiserver's
// resourcequota plug-in), which refuses a create that would pass a quota's
// hard limit and records the new usage, and its own status loop, which
// computes every quota's status.used from the space's objects when the
// quota changes and every recountEvery (so that deletes are counted). Both
// read the space through a client of that space alone.
//
// What is counted: object counts, count/<resource>[.<group>] for any kind
// the space serves (its CRDs' too), and the core names pods, services,
// replicationcontrollers, resourcequotas, secrets, configmaps and
// persistentvolumeclaims; services.loadbalancers and services.nodeports
// are computed for status. Compute resources (cpu, memory, storage) are
// neither computed nor enforced: nothing runs at the center. Quotas with
// scopes are stored and do not act.
package resourcequota

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quotaadmission "k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	resourcequotaapi "k8s.io/apiserver/pkg/admission/plugin/resourcequota/apis/resourcequota"
	"k8s.io/apiserver/pkg/authentication/user"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/server/perspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// recountEvery is how often each quota's usage is counted again, which is
// how soon a delete shows in it.
const recountEvery = 10 * time.Second

// listsPerSecond bounds the lists every space's status loops make
// together, with the server's identity (which fair shares do not bound):
// a tenant with a thousand quotas makes its own usage show later, not the
// server slower. At 20 a second, 200 quotas of one name each are counted
// every 10 s.
const listsPerSecond, listsBurst = 20, 40

// counted are the core resources quotas count by their own names (as
// well as count/NAME).
var counted = []string{"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims"}

// Admission is the admission plug-in, and the status loops behind it.
type Admission struct {
	*admission.Handler
	isServer func(user.Info) bool
	clients  perspace.Clients
	set      *perspace.Set[*quotaadmission.QuotaAdmission]
	// lists is the status loops' shared budget of lists.
	lists flowcontrol.RateLimiter
}

var _ admission.ValidationInterface = &Admission{}

// New returns the plug-in; isServer tells the server's own requests, which
// quotas count but never refuse.
func New(types perspace.SpaceTypes, isServer func(user.Info) bool) *Admission {
	a := &Admission{Handler: admission.NewHandler(admission.Create, admission.Update), isServer: isServer,
		lists: flowcontrol.NewTokenBucketRateLimiter(listsPerSecond, listsBurst)}
	a.set = perspace.New("ResourceQuotas", types, a.newSpaceQuota)
	a.set.Eager = true // a quota's status is computed whether or not anyone writes
	return a
}

// Start watches the ResourceQuotas of every space through the wildcard
// space. It returns at once; what it starts stops with ctx.
func (a *Admission) Start(ctx context.Context, clients perspace.Clients) error {
	wildcard, err := clients.Kube(spaces.Wildcard)
	if err != nil {
		return err
	}
	a.clients = clients
	quotas := wildcard.CoreV1().ResourceQuotas("")
	a.set.Start(ctx, perspace.Triggers(a.set, &corev1.ResourceQuota{}, quotas.List, quotas.Watch))
	return nil
}

// Validate enforces the ResourceQuotas of the request's space.
func (a *Admission) Validate(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	if attrs.GetNamespace() == "" {
		return nil
	}
	p, ok, err := a.set.ForRequest(ctx, a.isServer(attrs.GetUserInfo()))
	if err != nil || !ok {
		return err
	}
	return p.Validate(ctx, attrs, o)
}

// newSpaceQuota makes and starts the quota admission and status loop of a
// space, to run until ctx ends.
func (a *Admission) newSpaceQuota(ctx context.Context, space string) (*quotaadmission.QuotaAdmission, error) {
	kube, err := a.clients.Kube(space)
	if err != nil {
		return nil, err
	}
	dyn, err := a.clients.Dynamic(space)
	if err != nil {
		return nil, err
	}
	plugin, err := quotaadmission.NewResourceQuota(&resourcequotaapi.Configuration{}, 2)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	plugin.SetDrainedNotification(ctx.Done())
	plugin.SetExternalKubeClientSet(kube)
	plugin.SetExternalKubeInformerFactory(factory)
	var evaluators []quota.Evaluator
	for _, name := range counted {
		evaluators = append(evaluators, generic.NewObjectCountEvaluator(corev1.Resource(name), nil, corev1.ResourceName(name)))
	}
	plugin.SetQuotaConfiguration(generic.NewConfiguration(evaluators, nil))
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, err
	}
	l := &statusLoop{
		quotas:  kube.CoreV1(),
		dynamic: dyn,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
		lists:   a.lists,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "resourcequota-status"}),
	}
	informer := factory.Core().V1().ResourceQuotas().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: l.enqueue,
		UpdateFunc: func(_, obj any) {
			// Not on every status write: admission writes each create's
			// usage there, and a count racing it would undo it.
			if q, ok := obj.(*corev1.ResourceQuota); ok && !equality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard) {
				l.enqueue(obj)
			}
		},
	}); err != nil {
		return nil, err
	}
	l.lister = factory.Core().V1().ResourceQuotas().Lister()
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
		factory.Shutdown()
	}()
	go l.run(ctx, informer.HasSynced)
	klog.FromContext(ctx).V(2).Info("started a space's ResourceQuotas")
	return plugin, nil
}

// statusLoop computes the status of a space's quotas.
type statusLoop struct {
	quotas  corev1client.ResourceQuotasGetter
	lister  corev1listers.ResourceQuotaLister
	dynamic dynamic.Interface
	mapper  meta.ResettableRESTMapper
	lists   flowcontrol.RateLimiter
	queue   workqueue.TypedRateLimitingInterface[string]
}

func (l *statusLoop) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err == nil {
		l.queue.Add(key)
	}
}

// run works the queue, and queues every quota every recountEvery.
func (l *statusLoop) run(ctx context.Context, synced cache.InformerSynced) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	worker.Loop[string]{Name: "resourcequota-status", Queue: l.queue, Failure: "counting a ResourceQuota's usage failed, will retry",
		Process: func(ctx context.Context, key string) (bool, error) { return false, l.reconcile(ctx, key) }}.Start(ctx, 1)
	ticker := time.NewTicker(recountEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			all, err := l.lister.List(labels.Everything())
			if err != nil {
				continue
			}
			for _, q := range all {
				l.enqueue(q)
			}
		}
	}
}

// reconcile writes a quota's status: its hard limits, and the usage of
// each it can count.
func (l *statusLoop) reconcile(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	q, err := l.lister.ResourceQuotas(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	used := corev1.ResourceList{}
	if len(q.Spec.Scopes) == 0 && q.Spec.ScopeSelector == nil {
		for resourceName := range q.Spec.Hard {
			n, ok, err := l.usage(ctx, namespace, resourceName)
			if err != nil {
				return err
			}
			if ok {
				used[resourceName] = *resource.NewQuantity(n, resource.DecimalSI)
			}
		}
	}
	if equality.Semantic.DeepEqual(q.Status.Hard, q.Spec.Hard) && equality.Semantic.DeepEqual(q.Status.Used, used) {
		return nil
	}
	q = q.DeepCopy()
	q.Status.Hard, q.Status.Used = q.Spec.Hard, used
	_, err = l.quotas.ResourceQuotas(namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the quota's next event brings it back
	}
	return err
}

// usage counts one resource name of a quota in a namespace; ok is false
// for a name it does not count (compute resources, storage).
func (l *statusLoop) usage(ctx context.Context, namespace string, name corev1.ResourceName) (int64, bool, error) {
	var gr schema.GroupResource
	switch {
	case strings.HasPrefix(string(name), "count/"):
		gr = schema.ParseGroupResource(strings.TrimPrefix(string(name), "count/"))
	case name == corev1.ResourceServicesLoadBalancers || name == corev1.ResourceServicesNodePorts:
		return l.servicePorts(ctx, namespace, name)
	default:
		for _, c := range counted {
			if string(name) == c {
				gr = corev1.Resource(c)
			}
		}
		if gr.Resource == "" {
			return 0, false, nil
		}
	}
	items, _, err := l.list(ctx, namespace, gr)
	if err != nil {
		return 0, false, err
	}
	return int64(len(items)), true, nil
}

// servicePorts counts the LoadBalancer Services of a namespace, or the
// node ports its NodePort and LoadBalancer Services take.
func (l *statusLoop) servicePorts(ctx context.Context, namespace string, name corev1.ResourceName) (int64, bool, error) {
	items, _, err := l.list(ctx, namespace, corev1.Resource("services"))
	if err != nil {
		return 0, false, err
	}
	var n int64
	for _, item := range items {
		typ, _, _ := unstructured.NestedString(item.Object, "spec", "type")
		switch {
		case name == corev1.ResourceServicesLoadBalancers && typ == string(corev1.ServiceTypeLoadBalancer):
			n++
		case name == corev1.ResourceServicesNodePorts && (typ == string(corev1.ServiceTypeNodePort) || typ == string(corev1.ServiceTypeLoadBalancer)):
			ports, _, _ := unstructured.NestedSlice(item.Object, "spec", "ports")
			n += int64(len(ports))
		}
	}
	return n, true, nil
}

// list lists a resource in a namespace, from the datastore (a count from
// a cache a moment behind would undo the usage admission just wrote); ok is false when the space serves no such resource (nothing of
// it to count).
func (l *statusLoop) list(ctx context.Context, namespace string, gr schema.GroupResource) ([]unstructured.Unstructured, bool, error) {
	gvr, err := l.mapper.ResourceFor(gr.WithVersion(""))
	if meta.IsNoMatchError(err) {
		l.mapper.Reset() // a CRD made since the last look
		gvr, err = l.mapper.ResourceFor(gr.WithVersion(""))
	}
	if meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := l.lists.Wait(ctx); err != nil {
		return nil, false, err
	}
	list, err := l.dynamic.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, false, err
	}
	return list.Items, true, nil
}
