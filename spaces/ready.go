// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// SetReady marks a Space as serving requests: its phase, its URL and its
// Ready condition.
func SetReady(s *tenancyv1alpha1.Space) {
	s.Status.Phase = tenancyv1alpha1.SpacePhaseReady
	s.Status.URL = URLPath(s.Name)
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: tenancyv1alpha1.SpaceConditionReady, Status: metav1.ConditionTrue, Reason: "Initialized",
		Message: "the space serves requests", ObservedGeneration: s.Generation,
	})
}

// MailboxesBornReady wraps the storage of Spaces so that a mailbox space is
// stored ready: a mailbox has nothing to set up (no namespaces, no owner),
// so the space controller's status write that made it Ready was one write,
// and one event to every watcher of Spaces, of each SyncTarget's mailbox
// for nothing. As Kubernetes' namespaces are created Active. Only the
// server creates mailbox spaces (admission refuses anyone else).
func MailboxesBornReady(s storage.Interface) storage.Interface {
	return &mailboxesReady{Interface: s}
}

type mailboxesReady struct{ storage.Interface }

func (s *mailboxesReady) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if typ, _, _ := unstructured.NestedString(u.Object, "spec", "type"); typ == tenancyv1alpha1.SpaceTypeMailbox {
			if err := setReady(u); err != nil {
				return err
			}
		}
	}
	return s.Interface.Create(ctx, key, obj, out, ttl)
}

// setReady marks an unstructured Space ready (SetReady).
func setReady(u *unstructured.Unstructured) error {
	var sp tenancyv1alpha1.Space
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sp); err != nil {
		return fmt.Errorf("reading mailbox space %s: %w", u.GetName(), err)
	}
	SetReady(&sp)
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&sp.Status)
	if err != nil {
		return fmt.Errorf("marking mailbox space %s ready: %w", u.GetName(), err)
	}
	u.Object["status"] = status
	return nil
}
