// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package resourcequota makes the ResourceQuotas of a space count and
// bound what each of its namespaces holds, as in a cluster, and nothing in
// any other space.
//
// Each space that holds a ResourceQuota (server/perspace) gets its own
// instance of Kubernetes' quota admission (k8s.io/apiserver's
// resourcequota plug-in), which refuses a create that would pass a quota's
// hard limit and records the new usage, and its own instance of
// Kubernetes' quota controller (k8s.io/kubernetes/pkg/controller/
// resourcequota), which computes every quota's status.used from the
// space's objects when the quota changes and every recountEvery (so that
// deletes are counted). Both use Kubernetes' evaluators and read the space
// through a client of that space alone.
//
// What is counted is what a cluster counts: object counts,
// count/<resource>[.<group>] for any kind the space serves (its CRDs'
// too); pods' compute resources and scopes (Terminating, BestEffort,
// PriorityClass, CrossNamespacePodAffinity), services' load balancers and
// node ports, claims' storage per storage class. Nothing runs at the
// center, so a pod's requests count as long as the pod is stored.
package resourcequota

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	resourcequotacontroller "k8s.io/kubernetes/pkg/controller/resourcequota"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/kubernetes/pkg/quota/v1/install"

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

// rediscoverEvery is how often a quota naming a kind the space does not
// serve has the space's discovery read again.
const rediscoverEvery = 5 * time.Second

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
	// Admission judges each object by itself: its evaluators list nothing.
	admitting, err := core.NewEvaluators(nil, nil, served)
	if err != nil {
		return nil, err
	}
	plugin.SetQuotaConfiguration(generic.NewConfiguration(admitting, install.DefaultIgnoredResources()))
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, err
	}

	// The status is Kubernetes' own quota controller's, counting from the
	// datastore through the shared budget of lists.
	md, err := a.clients.Metadata(space)
	if err != nil {
		return nil, err
	}
	lister := func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		return &storeLister{ctx: ctx, dynamic: dyn, metadata: md, gvr: gvr, lists: a.lists}, nil
	}
	counting, err := core.NewEvaluators(lister, nil, served)
	if err != nil {
		return nil, err
	}
	quotas := factory.Core().V1().ResourceQuotas()
	reg := &registry{Registry: generic.NewRegistry(counting), quotas: quotas.Lister(), listerFor: lister,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
		counts: map[schema.GroupResource]quota.Evaluator{}}
	controller, err := resourcequotacontroller.NewController(ctx, &resourcequotacontroller.ControllerOptions{
		QuotaClient:           kube.CoreV1(),
		ResourceQuotaInformer: quotas,
		ResyncPeriod:          func() time.Duration { return recountEvery },
		Registry:              reg,
		// No DiscoveryFunc: Kubernetes would watch every kind of the space
		// to see deletes at once; here each quota is counted again every
		// recountEvery instead.
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	go controller.Run(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("space", space)), 1)
	return plugin, nil
}

// served tells the core evaluators a space serves: those of the core
// group (pods, services, persistent volume claims), not resource claims.
func served(gvr schema.GroupVersionResource) bool { return gvr.Group == "" }

// registry is Kubernetes' evaluators for the core kinds, and an object
// count evaluator for every other count/<resource>.<group> a quota of the
// space names that the space serves (in a cluster, the quota monitor adds
// those from discovery, with a watch of each).
type registry struct {
	quota.Registry
	quotas    corev1listers.ResourceQuotaLister
	listerFor quota.ListerForResourceFunc
	mapper    meta.ResettableRESTMapper

	mu        sync.Mutex
	counts    map[schema.GroupResource]quota.Evaluator
	lastReset time.Time
}

// List adds the count evaluators of what the quotas name now.
func (r *registry) List() []quota.Evaluator {
	all := r.Registry.List()
	qs, err := r.quotas.List(labels.Everything())
	if err != nil {
		return all
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	added := map[schema.GroupResource]bool{}
	for _, q := range qs {
		for name := range q.Spec.Hard {
			rest, ok := strings.CutPrefix(string(name), "count/")
			if !ok {
				continue
			}
			gr := schema.ParseGroupResource(rest)
			if added[gr] || r.Get(gr) != nil {
				continue
			}
			if e := r.count(gr); e != nil {
				all = append(all, e)
				added[gr] = true
			}
		}
	}
	return all
}

// count is the object count evaluator of a resource, or nil if the space
// serves none of that name. A name not found has the space's discovery
// read again, at most every few seconds (a CRD made since).
func (r *registry) count(gr schema.GroupResource) quota.Evaluator {
	if e, ok := r.counts[gr]; ok {
		return e
	}
	gvr, err := r.mapper.ResourceFor(gr.WithVersion(""))
	if meta.IsNoMatchError(err) && time.Since(r.lastReset) > rediscoverEvery {
		r.lastReset = time.Now()
		r.mapper.Reset()
		gvr, err = r.mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		return nil
	}
	e := generic.NewObjectCountEvaluator(gr, generic.ListResourceUsingListerFunc(r.listerFor, gvr), "")
	r.counts[gr] = e
	return e
}

// storeLister lists a resource of a space from the datastore (a count
// from a cache a moment behind would undo the usage admission just
// wrote), waiting its turn in the shared budget. The kinds whose usage is
// more than a count (pods, services, claims) come back whole and typed,
// as Kubernetes' evaluators expect; the others as metadata only, which is
// all a count needs (a space's ConfigMaps may hold megabytes).
type storeLister struct {
	ctx       context.Context
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	gvr       schema.GroupVersionResource
	lists     flowcontrol.RateLimiter
	namespace string
}

// evaluatedWhole are the resources Kubernetes' evaluators read more of
// than their count.
var evaluatedWhole = map[schema.GroupVersionResource]bool{
	corev1.SchemeGroupVersion.WithResource("pods"):                   true,
	corev1.SchemeGroupVersion.WithResource("services"):               true,
	corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"): true,
}

var _ cache.GenericLister = &storeLister{}

func (l *storeLister) List(selector labels.Selector) ([]runtime.Object, error) {
	if err := l.lists.Wait(l.ctx); err != nil {
		return nil, err
	}
	if !evaluatedWhole[l.gvr] {
		list, err := l.metadata.Resource(l.gvr).Namespace(l.namespace).List(l.ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return nil, err
		}
		objs := make([]runtime.Object, len(list.Items))
		for i := range list.Items {
			objs[i] = &list.Items[i]
		}
		return objs, nil
	}
	list, err := l.dynamic.Resource(l.gvr).Namespace(l.namespace).List(l.ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	// Items carry their kind; if one does not, it is the list's.
	listKind := schema.FromAPIVersionAndKind(list.GetAPIVersion(), strings.TrimSuffix(list.GetKind(), "List"))
	objs := make([]runtime.Object, 0, len(list.Items))
	for i := range list.Items {
		item := &list.Items[i]
		gvk := item.GroupVersionKind()
		if gvk.Kind == "" {
			gvk = listKind
		}
		typed, err := clientgoscheme.Scheme.New(gvk)
		if err != nil {
			objs = append(objs, item)
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, typed); err != nil {
			return nil, err
		}
		objs = append(objs, typed)
	}
	return objs, nil
}

func (l *storeLister) Get(name string) (runtime.Object, error) {
	return nil, fmt.Errorf("a quota's usage is listed, not got: %s %q", l.gvr, name)
}

func (l *storeLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	n := *l
	n.namespace = namespace
	return &n
}
