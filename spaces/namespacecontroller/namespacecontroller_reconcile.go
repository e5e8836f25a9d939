// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package namespacecontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// reconciler is the logic of the controller; its dependencies are function
// fields so that tests can stub them.
type reconciler struct {
	getNamespace func(ctx context.Context, space, name string) (*corev1.Namespace, error)
	finalize     func(ctx context.Context, space string, ns *corev1.Namespace) error
	resources    func(space string) ([]*metav1.APIResourceList, error)
	dynamic      func(space string) (dynamic.Interface, error)
}

func (r *reconciler) reconcile(ctx context.Context, space, name string) error {
	ns, err := r.getNamespace(ctx, space, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	remaining, err := r.deleteContents(ctx, space, name)
	if err != nil {
		return err
	}
	if len(remaining) > 0 {
		return fmt.Errorf("waiting for %s to go", strings.Join(remaining, ", "))
	}
	ns = ns.DeepCopy()
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if err := r.finalize(ctx, space, ns); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	klog.FromContext(ctx).V(2).Info("namespace finalized")
	return nil
}

// deleteContents deletes every namespaced object in the namespace and
// returns the resources that still have objects there (held by finalizers,
// or being deleted).
func (r *reconciler) deleteContents(ctx context.Context, space, namespace string) ([]string, error) {
	lists, err := r.resources(space)
	if err != nil {
		return nil, fmt.Errorf("discovering resources: %w", err)
	}
	client, err := r.dynamic(space)
	if err != nil {
		return nil, err
	}
	var remaining []string
	var errs []error
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range list.APIResources {
			if strings.Contains(res.Name, "/") || !slices.Contains(res.Verbs, "deletecollection") || !slices.Contains(res.Verbs, "list") {
				continue
			}
			gvr := gv.WithResource(res.Name)
			rc := client.Resource(gvr).Namespace(namespace)
			if err := rc.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", gvr.Resource, err))
				continue
			}
			left, err := rc.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			if left != nil && len(left.Items) > 0 {
				remaining = append(remaining, gvr.GroupResource().String())
			}
		}
	}
	return remaining, errors.Join(errs...)
}
