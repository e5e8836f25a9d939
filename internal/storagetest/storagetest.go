// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package storagetest has fakes of the API server's storage, for tests of
// what wraps it.
package storagetest

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// CreateRecorder is a storage that keeps a copy of the last object it was
// asked to create, and stores nothing. Its other methods are those of the
// nil storage.Interface it embeds: a test that reaches them panics.
type CreateRecorder struct {
	storage.Interface
	Created *unstructured.Unstructured
}

// Create records obj, an *unstructured.Unstructured.
func (r *CreateRecorder) Create(_ context.Context, _ string, obj, _ runtime.Object, _ uint64) error {
	r.Created = obj.(*unstructured.Unstructured).DeepCopy()
	return nil
}
