// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package admission holds the server's admission checks: the namespace
// lifecycle (content needs an existing, non-terminating namespace in its
// space) and the placement of Space and SpaceQuota objects (only in the
// root space).
package admission

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/registry/rest"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// Namespaces deleted a moment ago are read from the datastore, not the
// watch cache, for deletedWithin after their delete (kube-apiserver's
// NamespaceLifecycle does the same for its informer, for as long); at most
// deletedRemembered of them, across all spaces, are remembered.
const (
	deletedWithin     = 30 * time.Second
	deletedRemembered = 4096
)

// New returns the admission checks. namespaces reads Namespaces of the space
// in the request context.
func New(namespaces rest.Getter) admission.Interface {
	return &plugin{Handler: admission.NewHandler(admission.Create, admission.Delete), namespaces: namespaces,
		deleted: cache.NewLRUExpireCache(deletedRemembered)}
}

type plugin struct {
	*admission.Handler
	namespaces rest.Getter
	// deleted holds "SPACE/NAMESPACE" of the namespaces deleted within
	// deletedWithin.
	deleted *cache.LRUExpireCache
}

var _ admission.ValidationInterface = &plugin{}

func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	space := spaces.SpaceOrRoot(ctx)
	isNamespace := a.GetKind().GroupKind() == corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind()
	if a.GetOperation() == admission.Delete {
		if isNamespace && a.GetSubresource() == "" {
			p.deleted.Add(space+"/"+a.GetName(), struct{}{}, deletedWithin)
		}
		return nil
	}
	if gr := a.GetResource().GroupResource(); rootOnly[gr] != "" && a.GetSubresource() == "" && space != spaces.Root {
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf("%s are created in the root space, not in space %q", rootOnly[gr], space))
	}
	namespace := a.GetNamespace()
	if namespace == "" || isNamespace {
		return nil
	}
	// From the watch cache first, as kube-apiserver's NamespaceLifecycle
	// reads an informer: a read of the datastore was a noticeable share of
	// the server's CPU under creates in a namespace. A namespace the cache has not
	// seen yet (made a moment ago) is looked up in the datastore, and so
	// is one the cache says is active but was deleted a moment ago: the
	// cache may not have its Terminating phase yet, and content created in
	// it then would outlive the namespace's emptying.
	obj, err := p.namespaces.Get(ctx, namespace, &metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) || (err == nil && !terminating(obj) && p.deletedRecently(space, namespace)) {
		obj, err = p.namespaces.Get(ctx, namespace, &metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), namespace)
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if terminating(obj) {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(),
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	}
	return nil
}

// rootOnly are the kinds that live in the root space alone.
var rootOnly = map[schema.GroupResource]string{
	tenancyv1alpha1.Resource("spaces"):      "spaces",
	tenancyv1alpha1.Resource("spacequotas"): "SpaceQuotas",
}

func terminating(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && ns.Status.Phase == corev1.NamespaceTerminating
}

func (p *plugin) deletedRecently(space, namespace string) bool {
	_, ok := p.deleted.Get(space + "/" + namespace)
	return ok
}
