// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package namespacedefaults gives every namespace of every space what a
// namespace of a cluster gets from Kubernetes itself: a ServiceAccount
// named default (the controller manager's serviceaccount controller), a
// ConfigMap kube-root-ca.crt holding the CA that signs the server's
// certificate (its root-ca-cert-publisher), and in default the kubernetes
// Service with its Endpoints and EndpointSlice pointing at the server (the
// API server's own), the space's URL on it. Tools wait for them: `kubectl
// create token default`, Helm hooks, operators that mount the CA, and
// Kubernetes' own e2e framework. Mailboxes get none: their namespaces hold
// copies for an edge, which has its own.
//
// It watches namespaces across all spaces through the wildcard space, and
// looks at each when it appears and again every resyncEvery (an object
// deleted or changed is made right then; watching those kinds across
// every space would decode every mailbox's copies).
package namespacedefaults

import (
	"context"
	"net"
	"reflect"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

const (
	// ControllerName names the controller in logs and its queue.
	ControllerName = "namespace-defaults"
	// DefaultServiceAccount is the ServiceAccount every namespace gets.
	DefaultServiceAccount = "default"
	// RootCAConfigMap is the ConfigMap every namespace gets, with the CA
	// under RootCAKey.
	RootCAConfigMap = "kube-root-ca.crt"
	RootCAKey       = "ca.crt"
	// KubernetesService is the Service (with its Endpoints and
	// EndpointSlice) in every space's default namespace that points at the
	// server, with the space's URL under URLAnnotation.
	KubernetesService = "kubernetes"
	URLAnnotation     = "kubestellar.io/url"
	// descriptionAnnotation says what the ConfigMap is, as Kubernetes'.
	descriptionAnnotation = "kubernetes.io/description"
	description           = "The CA that signs this kubestellar server's certificate: clients in this space verify the server with it."
)

// Owned reports whether an object is one a namespace gets from its
// cluster itself, at the center and at each edge alike: the default
// ServiceAccount, the root CA ConfigMap, and default's kubernetes Service
// with its endpoints. They are never placed: the center's would overwrite
// each edge's own, its CA and its API server's address above all.
func Owned(gr schema.GroupResource, namespace, name string) bool {
	switch gr {
	case schema.GroupResource{Resource: "serviceaccounts"}:
		return name == DefaultServiceAccount
	case schema.GroupResource{Resource: "configmaps"}:
		return name == RootCAConfigMap
	case schema.GroupResource{Resource: "services"}, schema.GroupResource{Resource: "endpoints"},
		schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}:
		return namespace == metav1.NamespaceDefault && name == KubernetesService
	}
	return false
}

// resyncEvery is how often every namespace is looked at again.
const resyncEvery = 10 * time.Minute

// Controller keeps what every namespace gets in every namespace of every
// space but mailboxes.
type Controller struct {
	queue      workqueue.TypedRateLimitingInterface[string]
	controller cache.Controller
	r          *reconciler
}

// Server is what the objects say of the server: the CA that verifies it
// and the address and port it is reached at.
type Server struct {
	CA      []byte
	Address string
	Port    int
}

// New returns a controller. wildcard lists and watches namespaces of all
// spaces; kube gives a client for one space.
func New(wildcard kubernetes.Interface, kube func(space string) (kubernetes.Interface, error), server Server) *Controller {
	c := &Controller{queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})}
	c.controller = spaces.NewNamespaceInformer(wildcard, cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	}, spaces.InformerOptions{Resync: resyncEvery, NoResync: inMailbox})
	c.r = &reconciler{kube: kube, ca: string(server.CA), address: server.Address, port: server.Port}
	return c
}

// inMailbox reports whether a cached namespace is a mailbox's.
func inMailbox(obj any) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && spaces.IsMailboxName(ns.Annotations[spaces.Annotation])
}

func (c *Controller) enqueue(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp != nil || inMailbox(obj) {
		return
	}
	spaces.Enqueue(c.queue, obj)
}

// Run processes namespaces until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "making what a namespace gets by default failed, will retry",
		Process: c.process}.Run(ctx, workers, func(ctx context.Context) { go c.controller.RunWithContext(ctx) }, c.controller.HasSynced)
}

func (c *Controller) process(ctx context.Context, key string) (bool, error) {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return false, nil
	}
	return false, c.r.reconcile(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("space", space, "namespace", name)), space, name)
}

// reconciler is the logic of the controller.
type reconciler struct {
	kube    func(space string) (kubernetes.Interface, error)
	ca      string
	address string
	port    int
}

// reconcile makes namespace's default ServiceAccount and root CA
// ConfigMap, and in default the kubernetes Service, or brings them up to
// date. A namespace being deleted, or gone, gets nothing (its creates are
// refused, as they should be).
func (r *reconciler) reconcile(ctx context.Context, space, namespace string) error {
	client, err := r.kube(space)
	if err != nil {
		return err
	}
	core := client.CoreV1()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceAccount, Namespace: namespace}}
	if err := ensure(ctx, core.ServiceAccounts(namespace), sa, nil); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Namespace: namespace,
			Annotations: map[string]string{descriptionAnnotation: description}},
		Data: map[string]string{RootCAKey: r.ca},
	}
	if err := ensure(ctx, core.ConfigMaps(namespace), cm, func(live *corev1.ConfigMap) *corev1.ConfigMap {
		if equality.Semantic.DeepEqual(live.Data, cm.Data) && len(live.BinaryData) == 0 {
			return nil
		}
		live = live.DeepCopy()
		live.Data, live.BinaryData = cm.Data, nil
		return live
	}); err != nil {
		return err
	}
	if namespace != metav1.NamespaceDefault {
		return nil
	}
	return r.kubernetesService(ctx, client, space)
}

// kubernetesService makes the kubernetes Service of a space's default
// namespace, as a cluster's API server does for itself: port 443 named
// https, its Endpoints and EndpointSlice at the server's address and
// port, and the space's own URL (a Service holds no path) in an
// annotation.
func (r *reconciler) kubernetesService(ctx context.Context, client kubernetes.Interface, space string) error {
	port := int32(r.port) //nolint:gosec // a TCP port
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: KubernetesService, Namespace: metav1.NamespaceDefault,
			Labels:      map[string]string{"component": "apiserver", "provider": "kubernetes"},
			Annotations: map[string]string{URLAnnotation: "https://" + net.JoinHostPort(r.address, strconv.Itoa(r.port)) + spaces.PathPrefix + space}},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports:           []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(port)}},
		},
	}
	err := ensure(ctx, client.CoreV1().Services(metav1.NamespaceDefault), svc, func(live *corev1.Service) *corev1.Service {
		if equality.Semantic.DeepEqual(live.Spec.Ports, svc.Spec.Ports) && live.Annotations[URLAnnotation] == svc.Annotations[URLAnnotation] {
			return nil
		}
		live = live.DeepCopy()
		live.Spec.Ports = svc.Spec.Ports
		metav1.SetMetaDataAnnotation(&live.ObjectMeta, URLAnnotation, svc.Annotations[URLAnnotation])
		return live
	})
	if err != nil {
		return err
	}
	if err := r.kubernetesEndpoints(ctx, client, port); err != nil {
		return err
	}
	addressType := discoveryv1.AddressTypeIPv4
	if ip := net.ParseIP(r.address); ip != nil && ip.To4() == nil {
		addressType = discoveryv1.AddressTypeIPv6
	}
	ready, https, tcp := true, "https", corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: KubernetesService, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: KubernetesService, discoveryv1.LabelManagedBy: ControllerName + ".kubestellar.io"}},
		AddressType: addressType,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{r.address}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &https, Port: &port, Protocol: &tcp}},
	}
	return ensure(ctx, client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault), slice, func(live *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		if live.AddressType == slice.AddressType && equality.Semantic.DeepEqual(live.Endpoints, slice.Endpoints) && equality.Semantic.DeepEqual(live.Ports, slice.Ports) {
			return nil
		}
		if live.AddressType != slice.AddressType {
			return nil // immutable: deleted by hand, it is made again
		}
		live = live.DeepCopy()
		live.Endpoints, live.Ports = slice.Endpoints, slice.Ports
		return live
	})
}

// client is what ensure needs of a typed client of one kind.
type client[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// ensure creates want if it is missing; else, when update is given and
// returns the live object changed, writes that. It reads first, so that a
// namespace that has everything costs no write.
func ensure[T metav1.Object](ctx context.Context, c client[T], want T, update func(live T) T) error {
	live, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, want, metav1.CreateOptions{})
		return ignorable(err)
	}
	if err != nil || update == nil {
		return err
	}
	if changed := update(live); !reflect.ValueOf(changed).IsNil() {
		_, err = c.Update(ctx, changed, metav1.UpdateOptions{})
		return ignorable(err)
	}
	return nil
}

// ignorable drops the errors that need no retry: another writer got there
// first (the next look sees what it wrote), or the namespace is going.
func ignorable(err error) error {
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil
	}
	return err
}
