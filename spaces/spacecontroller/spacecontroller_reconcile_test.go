// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spacecontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// fakeDeps stubs the reconciler's dependencies and records every call, in order.
type fakeDeps struct {
	calls []string
	// Written objects, as the stubs received them.
	updatedSpaces []*tenancyv1alpha1.Space
	statuses      []*tenancyv1alpha1.Space
	// purgeCounts are returned by successive purges; purges after the last return 0.
	purgeCounts []int
	// Errors returned by the stubs.
	updateSpaceErr, updateStatusErr, purgeErr error
	// ensureErr fails ensureNamespace for that namespace.
	ensureErr map[string]error
}

func (f *fakeDeps) reconciler() *reconciler {
	return &reconciler{
		updateSpace: func(_ context.Context, s *tenancyv1alpha1.Space) error {
			f.calls = append(f.calls, "updateSpace")
			f.updatedSpaces = append(f.updatedSpaces, s.DeepCopy())
			return f.updateSpaceErr
		},
		updateStatus: func(_ context.Context, s *tenancyv1alpha1.Space) error {
			f.calls = append(f.calls, "updateStatus")
			f.statuses = append(f.statuses, s.DeepCopy())
			return f.updateStatusErr
		},
		ensureNamespace: func(_ context.Context, space, namespace string) error {
			f.calls = append(f.calls, "ensureNamespace "+space+"/"+namespace)
			return f.ensureErr[namespace]
		},
		ensureOwner: func(_ context.Context, space, owner string) error {
			f.calls = append(f.calls, "ensureOwner "+space+"/"+owner)
			return f.ensureErr["owner"]
		},
		purge: func(_ context.Context, space string) (int, error) {
			f.calls = append(f.calls, "purge "+space)
			if f.purgeErr != nil {
				return 0, f.purgeErr
			}
			if len(f.purgeCounts) == 0 {
				return 0, nil
			}
			n := f.purgeCounts[0]
			f.purgeCounts = f.purgeCounts[1:]
			return n, nil
		},
	}
}

func newSpace(name string, finalizers []string, phase tenancyv1alpha1.SpacePhase, deleting bool) *tenancyv1alpha1.Space {
	s := &tenancyv1alpha1.Space{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3, ResourceVersion: "7", Finalizers: finalizers},
		Status:     tenancyv1alpha1.SpaceStatus{Phase: phase},
	}
	if deleting {
		now := metav1.Now()
		s.DeletionTimestamp = &now
	}
	return s
}

var ensureAll = []string{
	"ensureNamespace team-a/default", "ensureNamespace team-a/kube-system",
	"ensureNamespace team-a/kube-public", "ensureNamespace team-a/kube-node-lease",
}

func TestReconcileLifecycle(t *testing.T) {
	fin := tenancyv1alpha1.SpaceFinalizer
	errBoom := errors.New("boom")
	tests := []struct {
		desc      string
		space     *tenancyv1alpha1.Space
		deps      fakeDeps
		wantCalls []string
		wantErr   error
		// check inspects what was written.
		check func(t *testing.T, f *fakeDeps)
	}{
		{
			desc:      "new space gets the finalizer first",
			space:     newSpace("team-a", []string{"other"}, "", false),
			wantCalls: []string{"updateSpace"},
			check: func(t *testing.T, f *fakeDeps) {
				require.Equal(t, []string{"other", fin}, f.updatedSpaces[0].Finalizers)
				require.Empty(t, f.updatedSpaces[0].Status.Phase)
			},
		},
		{
			desc:      "finalizer update error",
			space:     newSpace("team-a", nil, "", false),
			deps:      fakeDeps{updateSpaceErr: errBoom},
			wantCalls: []string{"updateSpace"},
			wantErr:   errBoom,
		},
		{
			desc:      "initializes the namespaces then is ready",
			space:     newSpace("team-a", []string{fin}, tenancyv1alpha1.SpacePhaseInitializing, false),
			wantCalls: append(append([]string{}, ensureAll...), "updateStatus"),
			check: func(t *testing.T, f *fakeDeps) {
				s := f.statuses[0]
				require.Equal(t, tenancyv1alpha1.SpacePhaseReady, s.Status.Phase)
				require.Equal(t, "/spaces/team-a", s.Status.URL)
				require.Equal(t, []string{fin}, s.Finalizers)
				require.Len(t, s.Status.Conditions, 1)
				c := meta.FindStatusCondition(s.Status.Conditions, tenancyv1alpha1.SpaceConditionReady)
				require.NotNil(t, c)
				require.Equal(t, metav1.ConditionTrue, c.Status)
				require.Equal(t, "Initialized", c.Reason)
				require.Equal(t, int64(3), c.ObservedGeneration)
				require.False(t, c.LastTransitionTime.IsZero())
			},
		},
		{
			desc: "a mailbox is ready without namespaces (its copies bring theirs)",
			space: func() *tenancyv1alpha1.Space {
				s := newSpace("team-a", []string{fin}, "", false)
				s.Spec.Type = tenancyv1alpha1.SpaceTypeMailbox
				return s
			}(),
			wantCalls: []string{"updateStatus"},
			check: func(t *testing.T, f *fakeDeps) {
				require.Equal(t, tenancyv1alpha1.SpacePhaseReady, f.statuses[0].Status.Phase)
			},
		},
		{
			desc:      "no phase yet is initialized too",
			space:     newSpace("team-a", []string{fin}, "", false),
			wantCalls: append(append([]string{}, ensureAll...), "updateStatus"),
		},
		{
			desc:      "ready space is left alone",
			space:     newSpace("team-a", []string{fin}, tenancyv1alpha1.SpacePhaseReady, false),
			wantCalls: nil,
		},
		{
			desc:      "namespace error stops initialization",
			space:     newSpace("team-a", []string{fin}, "", false),
			deps:      fakeDeps{ensureErr: map[string]error{"kube-public": errBoom}},
			wantCalls: ensureAll[:3],
			wantErr:   errBoom,
		},
		{
			desc:      "status error is returned",
			space:     newSpace("team-a", []string{fin}, "", false),
			deps:      fakeDeps{updateStatusErr: errBoom},
			wantCalls: append(append([]string{}, ensureAll...), "updateStatus"),
			wantErr:   errBoom,
		},
		{
			desc:      "deleted space is marked terminating first",
			space:     newSpace("team-a", []string{fin}, tenancyv1alpha1.SpacePhaseReady, true),
			wantCalls: []string{"updateStatus"},
			check: func(t *testing.T, f *fakeDeps) {
				s := f.statuses[0]
				require.Equal(t, tenancyv1alpha1.SpacePhaseTerminating, s.Status.Phase)
				require.Equal(t, []string{fin}, s.Finalizers, "the finalizer stays until the space is empty")
				c := meta.FindStatusCondition(s.Status.Conditions, tenancyv1alpha1.SpaceConditionReady)
				require.NotNil(t, c)
				require.Equal(t, metav1.ConditionFalse, c.Status)
				require.Equal(t, "Terminating", c.Reason)
			},
		},
		{
			desc:      "terminating status error",
			space:     newSpace("team-a", []string{fin}, tenancyv1alpha1.SpacePhaseReady, true),
			deps:      fakeDeps{updateStatusErr: errBoom},
			wantCalls: []string{"updateStatus"},
			wantErr:   errBoom,
		},
		{
			desc:      "terminating space is purged until nothing is left, then released",
			space:     newSpace("team-a", []string{"a", fin, "b"}, tenancyv1alpha1.SpacePhaseTerminating, true),
			deps:      fakeDeps{purgeCounts: []int{5, 2}},
			wantCalls: []string{"purge team-a", "purge team-a", "purge team-a", "updateSpace"},
			check: func(t *testing.T, f *fakeDeps) {
				require.Equal(t, []string{"a", "b"}, f.updatedSpaces[0].Finalizers)
			},
		},
		{
			desc:      "empty terminating space is released at once",
			space:     newSpace("team-a", []string{fin}, tenancyv1alpha1.SpacePhaseTerminating, true),
			wantCalls: []string{"purge team-a", "updateSpace"},
			check: func(t *testing.T, f *fakeDeps) {
				require.Empty(t, f.updatedSpaces[0].Finalizers)
			},
		},
		{
			desc:      "purge error keeps the finalizer",
			space:     newSpace("team-a", []string{fin}, tenancyv1alpha1.SpacePhaseTerminating, true),
			deps:      fakeDeps{purgeErr: errBoom},
			wantCalls: []string{"purge team-a"},
			wantErr:   errBoom,
		},
		{
			desc:      "finalizer removal error",
			space:     newSpace("team-a", []string{fin}, tenancyv1alpha1.SpacePhaseTerminating, true),
			deps:      fakeDeps{updateSpaceErr: errBoom},
			wantCalls: []string{"purge team-a", "updateSpace"},
			wantErr:   errBoom,
		},
		{
			desc:      "deleted space without our finalizer is left alone",
			space:     newSpace("team-a", []string{"other"}, tenancyv1alpha1.SpacePhaseReady, true),
			wantCalls: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := tc.deps
			before := tc.space.DeepCopy()
			err := f.reconciler().reconcile(context.Background(), tc.space)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantCalls, f.calls)
			require.Equal(t, before, tc.space, "the informer's object is never modified")
			if tc.check != nil {
				tc.check(t, &f)
			}
		})
	}
}

func TestReconcileNamespaceErrorNamesNamespace(t *testing.T) {
	f := fakeDeps{ensureErr: map[string]error{"default": errors.New("boom")}}
	err := f.reconciler().reconcile(context.Background(), newSpace("team-a", []string{tenancyv1alpha1.SpaceFinalizer}, "", false))
	require.EqualError(t, err, "creating namespace default: boom")
}

// TestReconcileRunsToReady drives a new space through its life as the
// informer would, feeding each written object back in.
func TestReconcileRunsToReady(t *testing.T) {
	var current *tenancyv1alpha1.Space
	purged := 0
	r := &reconciler{
		updateSpace:     func(_ context.Context, s *tenancyv1alpha1.Space) error { current = s.DeepCopy(); return nil },
		updateStatus:    func(_ context.Context, s *tenancyv1alpha1.Space) error { current = s.DeepCopy(); return nil },
		ensureNamespace: func(context.Context, string, string) error { return nil },
		purge: func(context.Context, string) (int, error) {
			purged++
			if purged == 1 {
				return 3, nil
			}
			return 0, nil
		},
	}
	current = newSpace("s", nil, "", false)
	for range 3 {
		require.NoError(t, r.reconcile(context.Background(), current))
	}
	require.Equal(t, tenancyv1alpha1.SpacePhaseReady, current.Status.Phase)
	require.Equal(t, []string{tenancyv1alpha1.SpaceFinalizer}, current.Finalizers)

	now := metav1.Now()
	current.DeletionTimestamp = &now
	for range 3 {
		require.NoError(t, r.reconcile(context.Background(), current))
	}
	require.Equal(t, tenancyv1alpha1.SpacePhaseTerminating, current.Status.Phase)
	require.Empty(t, current.Finalizers)
	require.Equal(t, 2, purged)
}

func TestEnsureNamespace(t *testing.T) {
	tests := []struct {
		desc     string
		existing []runtime.Object
		reactErr error
		wantErr  bool
	}{
		{desc: "creates"},
		{desc: "already exists", existing: []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"keep": "me"}}}}},
		{desc: "other error", reactErr: apierrors.NewForbidden(corev1.Resource("namespaces"), "default", errors.New("no")), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			client := fake.NewClientset(tc.existing...)
			if tc.reactErr != nil {
				client.PrependReactor("create", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.reactErr
				})
			}
			err := ensureNamespace(context.Background(), client, "default")
			if tc.wantErr {
				require.True(t, apierrors.IsForbidden(err), "%v", err)
				return
			}
			require.NoError(t, err)
			ns, err := client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
			require.NoError(t, err)
			if len(tc.existing) > 0 {
				require.Equal(t, "me", ns.Labels["keep"], "an existing namespace is not replaced")
			}
			var creates int
			for _, a := range client.Actions() {
				if a.GetVerb() == "create" {
					creates++
				}
			}
			require.Equal(t, 1, creates)
		})
	}
}

func TestToUnstructured(t *testing.T) {
	s := newSpace("team-a", []string{tenancyv1alpha1.SpaceFinalizer}, tenancyv1alpha1.SpacePhaseReady, false)
	s.Status.URL = "/spaces/team-a"
	u := toUnstructured(s)
	require.Equal(t, "tenancy.kubestellar.io/v1alpha1", u.GetAPIVersion())
	require.Equal(t, tenancyv1alpha1.SchemeGroupVersion.String(), u.GetAPIVersion())
	require.Equal(t, "Space", u.GetKind())
	require.Equal(t, "team-a", u.GetName())
	require.Equal(t, "7", u.GetResourceVersion())
	require.Equal(t, []string{tenancyv1alpha1.SpaceFinalizer}, u.GetFinalizers())
	require.Equal(t, "Ready", fmt.Sprint(u.Object["status"].(map[string]any)["phase"]))

	back := &tenancyv1alpha1.Space{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, back))
	back.TypeMeta = metav1.TypeMeta{}
	require.Equal(t, s, back)
}

func TestInitialNamespaces(t *testing.T) {
	require.Equal(t, "default,kube-system,kube-public,kube-node-lease", strings.Join(InitialNamespaces, ","))
}

// TestOwnerBecomesAdmin: a space whose Space names an owner binds that
// user to cluster-admin before the space is Ready; a failure leaves it not
// Ready, to be retried.
func TestOwnerBecomesAdmin(t *testing.T) {
	s := newSpace("team-a", []string{tenancyv1alpha1.SpaceFinalizer}, "", false)
	s.Annotations = map[string]string{tenancyv1alpha1.SpaceOwnerAnnotation: "alice"}
	f := &fakeDeps{}
	require.NoError(t, f.reconciler().reconcile(context.Background(), s))
	require.Equal(t, append(append([]string{}, ensureAll...), "ensureOwner team-a/alice", "updateStatus"), f.calls)

	f = &fakeDeps{ensureErr: map[string]error{"owner": errors.New("boom")}}
	err := f.reconciler().reconcile(context.Background(), s)
	require.EqualError(t, err, "making alice the space's admin: boom")
	require.NotContains(t, f.calls, "updateStatus")
}

func TestEnsureOwnerBinding(t *testing.T) {
	client := fake.NewSimpleClientset()
	require.NoError(t, ensureOwnerBinding(context.Background(), client, "alice"))
	require.NoError(t, ensureOwnerBinding(context.Background(), client, "alice"), "again: already there")
	b, err := client.RbacV1().ClusterRoleBindings().Get(context.Background(), tenancyv1alpha1.SpaceOwnerBinding, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "cluster-admin", b.RoleRef.Name)
	require.Equal(t, "alice", b.Subjects[0].Name)
	require.Equal(t, "User", b.Subjects[0].Kind)
}
