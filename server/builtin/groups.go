// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// reservedGroups are served by the server but store nothing of their own
// here (or, for CRDs, are the means of defining resources).
var reservedGroups = []string{"authorization.k8s.io", "authentication.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io"}

// IsBuiltInGroup reports whether an API group is the server's own: one
// of the built-in kinds' groups (the core group included) or one it
// reserves. No CRD may define a resource in it, since a CRD's objects share
// the storage layout of built-in objects (/<group>/<resource>/...). It is
// asked at every custom resource request.
func IsBuiltInGroup(group string) bool { return builtInGroups()[group] }

// builtInGroups is the set IsBuiltInGroup answers from, made once: Kinds
// builds every kind, columns included, at each call.
var builtInGroups = sync.OnceValue(func() map[string]bool {
	groups := map[string]bool{}
	for _, g := range reservedGroups {
		groups[g] = true
	}
	for _, k := range Kinds() {
		groups[k.Group] = true
	}
	return groups
})

// IsBuiltIn reports whether a resource is one of the built-in kinds'.
func IsBuiltIn(gr schema.GroupResource) bool {
	for _, k := range Kinds() {
		if k.GroupResource() == gr {
			return true
		}
	}
	return false
}
