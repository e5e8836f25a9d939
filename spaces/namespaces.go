// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NewNamespaceInformer lists and watches the namespaces of every space
// through wildcard (a client of the wildcard space), for the controllers
// that look after each namespace of each space. Its cache holds every
// namespace of every space, four in each mailbox, so it keeps of each
// only what SlimNamespace keeps; a reconciler reads the rest from the API.
// opts.Transform is replaced.
func NewNamespaceInformer(wildcard kubernetes.Interface, handler cache.ResourceEventHandler, opts InformerOptions) cache.Controller {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return wildcard.CoreV1().Namespaces().List(ctx, o)
		},
		WatchFuncWithContext: wildcard.CoreV1().Namespaces().Watch,
	}
	opts.Transform = SlimNamespace
	_, c := NewInformerWithOptions(lw, &corev1.Namespace{}, handler, opts)
	return c
}

// SlimNamespace keeps of a namespace its key (name and space), UID,
// resource version and deletion timestamp.
func SlimNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, DeletionTimestamp: ns.DeletionTimestamp,
		Annotations: map[string]string{Annotation: ns.Annotations[Annotation]},
	}}, nil
}
