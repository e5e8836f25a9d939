// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubestellar/kubestellar/spaces"
)

// BenchmarkAuthorizeDecision times one authorization decision for a user
// in one of 1,000 spaces, each with its own RoleBindings (edit in one
// namespace for a group, admin in another for a user, view for everyone)
// and an aggregated ClusterRole of its own: allowed requests (through
// the aggregated default edit role) and denied ones (every rule of the
// space tried), alternately. It reports the p50 and p99 of the decisions
// besides the mean; make bench prints them.
func BenchmarkAuthorizeDecision(b *testing.B) {
	const nSpaces = 1000
	var objs []metav1.Object
	for i := range nSpaces {
		space := fmt.Sprintf("team-%04d", i)
		objs = append(objs,
			in(space, roleBinding("default", "team-edit", "edit", rbacv1.GroupKind, "team")),
			in(space, roleBinding("ops", "owner-admin", "admin", rbacv1.UserKind, fmt.Sprintf("owner-%d", i))),
			in(space, roleBinding("default", "all-view", "view", rbacv1.GroupKind, user.AllAuthenticated)),
			in(space, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gadgets-edit", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"gadgets"}, Verbs: []string{"*"}}}}),
		)
	}
	store := storeWith(b, objs...)
	a := NewAuthorizer(store, func(string) string { return "" })
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"team", user.AllAuthenticated}}
	allowed := authorizer.AttributesRecord{User: alice, Verb: "create", APIGroup: "example.com", Resource: "gadgets", Namespace: "default", ResourceRequest: true}
	denied := authorizer.AttributesRecord{User: alice, Verb: "delete", Resource: "secrets", Namespace: "ops", ResourceRequest: true}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		ctx := spaces.WithSpace(context.Background(), fmt.Sprintf("team-%04d", i%nSpaces))
		attrs, want := allowed, authorizer.DecisionAllow
		if i%2 == 1 {
			attrs, want = denied, authorizer.DecisionDeny
		}
		began := time.Now()
		got, reason, err := a.Authorize(ctx, attrs)
		times = append(times, time.Since(began))
		if got != want || err != nil {
			b.Fatalf("decision %v (%s, %v), want %v", got, reason, err, want)
		}
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(times[(len(times)*99)/100].Nanoseconds()), "p99-ns")
}
