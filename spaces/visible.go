// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// FilterVisible wraps the storage of a resource so that lists and watches
// show each caller the objects it may see: visible(ctx) returns nil for a
// caller who sees everything, or else tells by name which objects it sees.
// Gets are left to the authorizer.
func FilterVisible(s storage.Interface, visible func(context.Context) func(name string) bool) storage.Interface {
	return &visibleStorage{Interface: s, visible: visible}
}

type visibleStorage struct {
	storage.Interface
	visible func(context.Context) func(name string) bool
}

func (s *visibleStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	sees := s.visible(ctx)
	if sees == nil {
		return nil
	}
	items, err := meta.ExtractList(listObj)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, item := range items {
		if m, err := meta.Accessor(item); err == nil && sees(m.GetName()) {
			kept = append(kept, item)
		}
	}
	return meta.SetList(listObj, kept)
}

func (s *visibleStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return w, err
	}
	sees := s.visible(ctx)
	if sees == nil {
		return w, nil
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Bookmark || e.Type == watch.Error {
			return e, true
		}
		m, err := meta.Accessor(e.Object)
		return e, err == nil && sees(m.GetName())
	}), nil
}
