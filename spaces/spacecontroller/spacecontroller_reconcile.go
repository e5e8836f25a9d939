// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spacecontroller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// InitialNamespaces exist in every new space but mailboxes, as in a new
// Kubernetes cluster.
var InitialNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

var updateOptions = metav1.UpdateOptions{FieldManager: "kubestellar-space-controller"}

// reconciler is the logic of the controller; its dependencies are function
// fields so that tests can stub them.
type reconciler struct {
	updateSpace     func(ctx context.Context, s *tenancyv1alpha1.Space) error
	updateStatus    func(ctx context.Context, s *tenancyv1alpha1.Space) error
	ensureNamespace func(ctx context.Context, space, namespace string) error
	// ensureOwner binds the space's owner to cluster-admin in it.
	ensureOwner func(ctx context.Context, space, owner string) error
	purge       func(ctx context.Context, space string) (int, error)
}

func (r *reconciler) reconcile(ctx context.Context, s *tenancyv1alpha1.Space) error {
	if spaces.ValidateName(s.Name) != nil || s.Name == spaces.Root {
		// Admission refuses such a Space; one stored anyway (by an
		// earlier release) would make its owner the root space's admin,
		// and deleting it would purge the root space. Nothing is done.
		klog.FromContext(ctx).Info("ignoring a Space whose name is no space's", "name", s.Name)
		return nil
	}
	if s.DeletionTimestamp != nil {
		return r.terminate(ctx, s)
	}
	if !slices.Contains(s.Finalizers, tenancyv1alpha1.SpaceFinalizer) {
		s = s.DeepCopy()
		s.Finalizers = append(s.Finalizers, tenancyv1alpha1.SpaceFinalizer)
		return r.updateSpace(ctx, s)
	}
	if s.Status.Phase == tenancyv1alpha1.SpacePhaseReady {
		return nil
	}
	// A mailbox holds copies, in the namespaces the translator makes for
	// them: at thousands of edges, four namespaces nobody uses were four
	// writes per mailbox. (A mailbox is stored ready:
	// spaces.MailboxesBornReady; one stored by an earlier release is
	// made ready here.)
	if s.Spec.Type != tenancyv1alpha1.SpaceTypeMailbox {
		for _, ns := range InitialNamespaces {
			if err := r.ensureNamespace(ctx, s.Name, ns); err != nil {
				return fmt.Errorf("creating namespace %s: %w", ns, err)
			}
		}
	}
	if owner := s.Annotations[tenancyv1alpha1.SpaceOwnerAnnotation]; owner != "" {
		if err := r.ensureOwner(ctx, s.Name, owner); err != nil {
			return fmt.Errorf("making %s the space's admin: %w", owner, err)
		}
	}
	s = s.DeepCopy()
	spaces.SetReady(s)
	if err := r.updateStatus(ctx, s); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("space is ready")
	return nil
}

// terminate removes everything stored in a deleted space, then its finalizer.
func (r *reconciler) terminate(ctx context.Context, s *tenancyv1alpha1.Space) error {
	if !slices.Contains(s.Finalizers, tenancyv1alpha1.SpaceFinalizer) {
		return nil
	}
	if s.Status.Phase != tenancyv1alpha1.SpacePhaseTerminating {
		s = s.DeepCopy()
		s.Status.Phase = tenancyv1alpha1.SpacePhaseTerminating
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
			Type: tenancyv1alpha1.SpaceConditionReady, Status: metav1.ConditionFalse, Reason: "Terminating",
			Message: "the space is being deleted", ObservedGeneration: s.Generation,
		})
		// The phase closes the space to new content before it is emptied.
		return r.updateStatus(ctx, s)
	}
	total := 0
	for {
		n, err := r.purge(ctx, s.Name)
		if err != nil {
			return err
		}
		total += n
		if n == 0 {
			break
		}
	}
	s = s.DeepCopy()
	s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == tenancyv1alpha1.SpaceFinalizer })
	if err := r.updateSpace(ctx, s); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("space deleted", "objectsRemoved", total)
	return nil
}

func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ensureOwnerBinding binds owner to cluster-admin in the space of client.
// A binding of that name made before (by an earlier attempt, or by an
// admin since) is left as it is.
func ensureOwnerBinding(ctx context.Context, client kubernetes.Interface, owner string) error {
	_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tenancyv1alpha1.SpaceOwnerBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: owner}},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func toUnstructured(s *tenancyv1alpha1.Space) *unstructured.Unstructured {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		panic(fmt.Sprintf("converting a Space to unstructured cannot fail: %v", err))
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(tenancyv1alpha1.SchemeGroupVersion.String())
	u.SetKind("Space")
	return u
}
