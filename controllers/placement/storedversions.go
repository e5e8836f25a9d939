// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// migrateStored writes every object of a CRD's resource, in the space the
// context names, again as it is: the server stores it in the CRD's
// storage version (as the storage-version migrator does in a WDS). An
// object written or deleted in between is stored in it already, or gone.
// Then the CRD's status says that only that version holds objects.
func (c *Controller) migrateStored(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, storage string) error {
	res := c.clients.Dynamic.Resource(schema.GroupVersionResource{Group: crd.Spec.Group, Version: storage, Resource: crd.Spec.Names.Plural})
	apiVersion := crd.Spec.Group + "/" + storage
	opts := metav1.ListOptions{Limit: 500}
	written := 0
	for {
		list, err := res.List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			item := &list.Items[i]
			// An apply that names the object alone: the server writes it
			// again (an update of the object as it is would be a no-op).
			patch, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": crd.Spec.Names.Kind,
				"metadata": map[string]any{"name": item.GetName(), "namespace": item.GetNamespace(), "resourceVersion": item.GetResourceVersion()}})
			if err != nil {
				return err
			}
			_, err = res.Namespace(item.GetNamespace()).Patch(ctx, item.GetName(), types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
			if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return fmt.Errorf("writing %s %s/%s again: %w", crd.Spec.Names.Kind, item.GetNamespace(), item.GetName(), err)
			}
			written++
		}
		if list.GetContinue() == "" {
			break
		}
		opts.Continue = list.GetContinue()
	}
	status := crd.DeepCopy()
	status.Status.StoredVersions = []string{storage}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	obj.SetKind("CustomResourceDefinition")
	if _, err := c.clients.Dynamic.Resource(crdGVR).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("saying in CRD %s's status that only %s holds objects: %w", crd.Name, storage, err)
	}
	klog.FromContext(ctx).V(2).Info("migrated a mailbox's objects to its CRD's storage version", "crd", crd.Name, "storage", storage, "objects", written)
	return nil
}
