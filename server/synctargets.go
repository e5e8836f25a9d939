// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestellar/kubestellar/spaces"
)

// syncTargetsNameTheirMailboxes wraps the storage of SyncTargets so that a
// SyncTarget is stored naming its mailbox space in status.mailboxSpace: a
// name the server alone gives, from the SyncTarget's space and UID
// (spaces.MailboxName), as Kubernetes gives a Service its cluster IP as it
// stores it. The mailbox controller then makes the space, and no longer
// writes the SyncTarget's status to name it: one write, and its event to
// every watcher of SyncTargets, less per SyncTarget.
//
// The name says nothing of whether the space is made yet: whoever hands a
// mailbox out (the syncer's identity, the placement translator's copies)
// checks that its space exists.
func syncTargetsNameTheirMailboxes(s storage.Interface) storage.Interface {
	return &mailboxNaming{Interface: s}
}

type mailboxNaming struct{ storage.Interface }

func (s *mailboxNaming) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	// The space is the one the storage under this one stores the
	// SyncTarget in (spaces.Decorate).
	if u, ok := obj.(*unstructured.Unstructured); ok && u.GetUID() != "" {
		name := spaces.MailboxName(spaces.SpaceOrRoot(ctx), string(u.GetUID()))
		if err := unstructured.SetNestedField(u.Object, name, "status", "mailboxSpace"); err != nil {
			return fmt.Errorf("naming the mailbox of SyncTarget %s: %w", u.GetName(), err)
		}
	}
	return s.Interface.Create(ctx, key, obj, out, ttl)
}
