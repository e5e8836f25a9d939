// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Specs interns the specs of CRDs, for a cache of every space's CRDs:
// 1,000 spaces with one CRD of 50 KiB hold one spec, not 1,000 (the cache
// of every space's CRDs transforms with it). A spec is kept while a CRD cached has it: Forget is called
// with a CRD leaving the cache.
type Specs struct {
	mu    sync.Mutex
	specs map[string]*interned
}

type interned struct {
	spec  *apiextensionsv1.CustomResourceDefinitionSpec
	users int
}

// NewSpecs returns an empty set of specs.
func NewSpecs() *Specs { return &Specs{specs: map[string]*interned{}} }

// specKey is what interning compares: the spec alone, by the identity
// function's hash (the name and accepted names left empty).
func specKey(crd *apiextensionsv1.CustomResourceDefinition) string {
	return Identity(&apiextensionsv1.CustomResourceDefinition{Spec: crd.Spec})
}

// Intern returns crd with its spec shared with every CRD interned whose
// spec is equal, or its own if none is. crd is a new copy, owned by the
// caller (an informer's transform).
func (s *Specs) Intern(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	key := specKey(crd)
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.specs[key]
	if in == nil {
		in = &interned{spec: &crd.Spec}
		s.specs[key] = in
	}
	in.users++
	crd.Spec = *in.spec // shallow: the schemas, the bulk, are shared
	return crd
}

// Forget says a CRD interned left the cache.
func (s *Specs) Forget(crd *apiextensionsv1.CustomResourceDefinition) {
	key := specKey(crd)
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.specs[key]; in != nil {
		if in.users--; in.users <= 0 {
			delete(s.specs, key)
		}
	}
}

// Len is how many distinct specs are interned.
func (s *Specs) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.specs)
}
