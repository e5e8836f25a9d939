// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericregistry "k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// REST is the storage of one built-in kind.
type REST struct {
	*registry.Store
	kind Kind
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// ShortNames lists the kind's short names for kubectl.
func (r *REST) ShortNames() []string { return r.kind.ShortNames }

// Categories lists the kind's categories, such as "all".
func (r *REST) Categories() []string { return r.kind.Categories }

// StatusREST serves the status subresource of a kind.
type StatusREST struct {
	store *registry.Store
}

// New returns an empty object of the kind.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy releases nothing: the main resource owns the storage.
func (r *StatusREST) Destroy() {}

// Get returns an object, for reading its status.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes only the status of an object.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status updates never create.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields says which fields the status subresource does not write.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable renders the object as kubectl's table.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// newStore returns the storage of one kind and, when the kind has a status,
// of its status subresource.
func newStore(scheme *runtime.Scheme, kind Kind, optsGetter genericregistry.RESTOptionsGetter) (*REST, *StatusREST, error) {
	gvk := kind.GroupVersionKind()
	strat := newStrategy(scheme, kind)
	newFunc := func() runtime.Object {
		obj, _ := scheme.New(gvk)
		return obj
	}
	newListFunc := func() runtime.Object {
		obj, _ := scheme.New(gvk.GroupVersion().WithKind(kind.Kind + "List"))
		return obj
	}
	if newFunc() == nil || newListFunc() == nil {
		return nil, nil, fmt.Errorf("kind %s is not in the scheme", gvk)
	}
	store := &registry.Store{
		NewFunc:                   newFunc,
		NewListFunc:               newListFunc,
		DefaultQualifiedResource:  kind.GroupResource(),
		SingularQualifiedResource: kind.GroupVersion().WithResource(singular(kind)).GroupResource(),
		CreateStrategy:            strat,
		UpdateStrategy:            strat,
		DeleteStrategy:            strat,
		ResetFieldsStrategy:       strat,
		TableConvertor:            tableConvertor{columns: kind.Columns},
	}
	if err := store.CompleteWithOptions(&genericregistry.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, nil, fmt.Errorf("storage for %s: %w", kind.GroupResource(), err)
	}
	main := &REST{Store: store, kind: kind}
	if !hasStatus(kind) {
		return main, nil, nil
	}
	statusStore := *store
	statusStrategy := strat.statusStrategy()
	statusStore.UpdateStrategy = statusStrategy
	statusStore.ResetFieldsStrategy = statusStrategy
	return main, &StatusREST{store: &statusStore}, nil
}

func singular(kind Kind) string {
	out := []rune{}
	for _, r := range kind.Kind {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		out = append(out, r)
	}
	return string(out)
}

// APIGroups returns the API groups of every built-in kind, ready to install
// on a generic API server, and the storage of namespaces, which namespace
// admission reads.
func APIGroups(scheme *runtime.Scheme, codecs serializer.CodecFactory, optsGetter genericregistry.RESTOptionsGetter) (legacy *genericapiserver.APIGroupInfo, groups []*genericapiserver.APIGroupInfo, namespaces rest.Getter, err error) {
	infos := map[string]*genericapiserver.APIGroupInfo{}
	var order []string
	for _, kind := range Kinds() {
		info, ok := infos[kind.Group]
		if !ok {
			i := genericapiserver.NewDefaultAPIGroupInfo(kind.Group, scheme, metav1.ParameterCodec, codecs)
			info = &i
			infos[kind.Group] = info
			order = append(order, kind.Group)
		}
		main, status, err := newStore(scheme, kind, optsGetter)
		if err != nil {
			return nil, nil, nil, err
		}
		resources := info.VersionedResourcesStorageMap[kind.Version]
		if resources == nil {
			resources = map[string]rest.Storage{}
			info.VersionedResourcesStorageMap[kind.Version] = resources
			// Advertise only versions that serve something (autoscaling/v1
			// is in the scheme for Scale, but serves no resource here).
			if !ok {
				info.PrioritizedVersions = nil
			}
			info.PrioritizedVersions = append(info.PrioritizedVersions, kind.GroupVersion())
		}
		if kind.Resource == "namespaces" {
			ns := &NamespaceREST{REST: main}
			resources[kind.Resource] = ns
			resources[kind.Resource+"/finalize"] = &FinalizeREST{store: ns}
			namespaces = ns
		} else {
			resources[kind.Resource] = main
		}
		if status != nil {
			resources[kind.Resource+"/status"] = status
		}
		if kind.Scale {
			resources[kind.Resource+"/scale"] = &ScaleREST{store: main.Store, kind: kind}
		}
	}
	for _, group := range order {
		if group == corev1.GroupName {
			legacy = infos[group]
			continue
		}
		groups = append(groups, infos[group])
	}
	return legacy, groups, namespaces, nil
}
