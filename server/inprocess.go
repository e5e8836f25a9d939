// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/kubestellar/kubestellar/controllers"
	"github.com/kubestellar/kubestellar/controllers/placement"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/spaces"
)

// storeWriter writes the placement translator's copies of built-in kinds
// straight to their registry, in the server's process.
//
// A copy in a mailbox is one object of a fan-out of thousands, each written
// by the same privileged controller. Through the API, every one of them
// was encoded to JSON, sent over the loopback connection, taken through
// the filters (authentication, APF, authorization, the space's), decoded,
// given managed fields, stored, and encoded and decoded again on its way
// back: the storage and SQLite were a small part of its cost. Here a write
// keeps what decides whether and how the object is stored: the space's
// admission (a space being deleted takes no new content), the admission
// chain (the namespace must exist and not be terminating), and the
// registry's defaults, validation and metadata; it drops the transport,
// the filters an in-process controller passes anyway, and the managed
// fields, which nobody reads on a copy (the syncer applies its own at the
// edge). Watches see the write as any other: it is the same storage.
//
// Custom resources (served by the apiextensions server, which builds its
// storage per CRD internally) and Namespaces (their own REST) still go
// through the API.
type storeWriter struct {
	stores  map[schema.GroupVersionResource]*builtin.REST
	kinds   map[schema.GroupVersionResource]schema.GroupVersionKind
	scheme  *runtime.Scheme
	admit   admission.Interface
	objects admission.ObjectInterfaces
	spaces  spaces.Lookup
	user    user.Info
	// timeout bounds a write, as the API server's request timeout bounds
	// one through the API.
	timeout time.Duration
}

// newStoreWriter indexes the built-in kinds' storage in the API groups.
func newStoreWriter(scheme *runtime.Scheme, admit admission.Interface, lookup spaces.Lookup, timeout time.Duration, groups ...*genericapiserver.APIGroupInfo) *storeWriter {
	w := &storeWriter{stores: map[schema.GroupVersionResource]*builtin.REST{}, kinds: map[schema.GroupVersionResource]schema.GroupVersionKind{},
		scheme: scheme, admit: admit, objects: admission.NewObjectInterfacesFromScheme(scheme), spaces: lookup, timeout: timeout,
		// The identity of the server's loopback client, which the
		// controllers' HTTP writes carry.
		user: provenance.Vouch(&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}})}
	for _, info := range groups {
		for version, resources := range info.VersionedResourcesStorageMap {
			for resource, storage := range resources {
				store, ok := storage.(*builtin.REST)
				if !ok { // subresources, Namespaces, reviews
					continue
				}
				gvks, _, err := scheme.ObjectKinds(store.New())
				if err != nil || len(gvks) == 0 || gvks[0].Version != version {
					continue
				}
				gvr := gvks[0].GroupVersion().WithResource(resource)
				w.stores[gvr], w.kinds[gvr] = store, gvks[0]
			}
		}
	}
	return w
}

// Writes reports whether objects of gvr are written in-process.
func (w *storeWriter) Writes(gvr schema.GroupVersionResource) bool {
	_, ok := w.stores[gvr]
	return ok
}

// Create creates obj in the space of ctx, as a POST would.
func (w *storeWriter) Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	store, typed, ctx, err := w.prepare(ctx, gvr, "create", obj)
	if err != nil {
		return err
	}
	options := &metav1.CreateOptions{}
	attrs := admission.NewAttributesRecord(typed, nil, w.kinds[gvr], obj.GetNamespace(), obj.GetName(), gvr, "", admission.Create, options, false, w.user)
	if mutating, ok := w.admit.(admission.MutationInterface); ok && mutating.Handles(admission.Create) {
		if err := mutating.Admit(ctx, attrs, w.objects); err != nil {
			return err
		}
	}
	_, err = store.Create(ctx, typed, rest.AdmissionToValidateObjectFunc(w.admit, attrs, w.objects), options)
	return err
}

// Update replaces obj (at its resourceVersion) in the space of ctx, as a
// PUT would; it does not create.
func (w *storeWriter) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	store, typed, ctx, err := w.prepare(ctx, gvr, "update", obj)
	if err != nil {
		return err
	}
	options := &metav1.UpdateOptions{}
	namespace, name, kind := obj.GetNamespace(), obj.GetName(), w.kinds[gvr]
	var transform []rest.TransformFunc
	if mutating, ok := w.admit.(admission.MutationInterface); ok && mutating.Handles(admission.Update) {
		transform = append(transform, func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
			return newObj, mutating.Admit(ctx, admission.NewAttributesRecord(newObj, oldObj, kind, namespace, name, gvr, "", admission.Update, options, false, w.user), w.objects)
		})
	}
	_, _, err = store.Update(ctx, name, rest.DefaultUpdatedObjectInfo(typed, transform...),
		rest.AdmissionToValidateObjectFunc(w.admit,
			admission.NewAttributesRecord(nil, nil, kind, namespace, name, gvr, "", admission.Create, &metav1.CreateOptions{}, false, w.user), w.objects),
		rest.AdmissionToValidateObjectUpdateFunc(w.admit,
			admission.NewAttributesRecord(nil, nil, kind, namespace, name, gvr, "", admission.Update, options, false, w.user), w.objects),
		false, options)
	return err
}

// prepare checks the space takes the write, converts obj to its kind's
// type with the scheme's defaults (as decoding a request body does), and
// gives ctx the request's namespace and user.
func (w *storeWriter) prepare(ctx context.Context, gvr schema.GroupVersionResource, verb string, obj *unstructured.Unstructured) (*builtin.REST, runtime.Object, context.Context, error) {
	store, ok := w.stores[gvr]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s is not written in-process", gvr)
	}
	if err := spaces.AdmitWrite(ctx, verb, w.spaces); err != nil {
		return nil, nil, nil, err
	}
	typed := store.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s/%s: %w", w.kinds[gvr].Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	w.scheme.Default(typed)
	ctx = request.WithNamespace(request.WithUser(ctx, w.user), obj.GetNamespace())
	return store, typed, ctx, nil
}

// CopyWriter is the writer the placement translator writes its copies of
// built-in kinds with, in-process (placement.StoreWriter).
func (c *Config) CopyWriter() placement.StoreWriter { return c.copies }

// CopyReader is what the controllers' caches and the dashboard list and
// watch built-in kinds with, in-process (storeWriter.ListerWatcher).
func (c *Config) CopyReader() controllers.LocalReader { return c.copies }
