// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package policies

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConsistentLists: the plug-ins' informers list the latest bindings
// (a new binding is in the first list, though the cache may not hold it
// yet), and watch from where their list was.
func TestConsistentLists(t *testing.T) {
	for _, tc := range []struct {
		desc string
		in   metav1.ListOptions
		want string
	}{
		{desc: "the reflector's first list", in: metav1.ListOptions{ResourceVersion: "0"}, want: ""},
		{desc: "a list at a version", in: metav1.ListOptions{ResourceVersion: "42"}, want: "42"},
		{desc: "a watch from the cache's start", in: metav1.ListOptions{Watch: true, ResourceVersion: "0"}, want: "0"},
		{desc: "a watch from its list", in: metav1.ListOptions{Watch: true, ResourceVersion: "42"}, want: "42"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := tc.in
			consistentLists(&o)
			if o.ResourceVersion != tc.want {
				t.Errorf("resourceVersion %q, want %q", o.ResourceVersion, tc.want)
			}
		})
	}
}
