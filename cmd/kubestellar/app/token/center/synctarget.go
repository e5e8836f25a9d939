// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package center

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/syncer"
)

// SyncTarget reads the SyncTarget of a --sync-target INVENTORY-SPACE/NAME
// flag, saying what to do when it is not there or on its way out.
func (c *Center) SyncTarget(ctx context.Context, flag, inv, name string) (*unstructured.Unstructured, error) {
	if err := c.RequireSpace(ctx, flag, inv); err != nil {
		return nil, err
	}
	st, err := c.Dynamic.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")).Get(spaces.WithSpace(ctx, inv), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: there is no SyncTarget %q in space %q (create it with: kubestellar synctarget create %s --inventory-space %s)", flag, name, inv, name, inv)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading SyncTarget %q: %w", flag, name, err)
	}
	if st.GetDeletionTimestamp() != nil {
		return nil, fmt.Errorf("%s: SyncTarget %q is being deleted: a token for it would stop working with it", flag, name)
	}
	return st, nil
}

// SyncerToken creates a syncer token for the SyncTarget st of inventory
// space inv, bound to it by UID (it stops working if the SyncTarget is
// deleted, even if one of the same name is made again), and returns it and
// what to tell the user about it.
func (c *Center) SyncerToken(ctx context.Context, inv string, st *unstructured.Unstructured, ttl time.Duration, description string) (token, note string, err error) {
	caPEM, err := c.CACerts(ctx)
	if err != nil {
		return "", "", err
	}
	tok, info, err := auth.CreateToken(ctx, c.Root, auth.NewTokenOptions{InventorySpace: inv, SyncTarget: st.GetName(), SyncTargetUID: st.GetUID(),
		TTL: ttl, Description: description, CAPEM: caPEM})
	if err != nil {
		return "", "", err
	}
	return tok.String(), fmt.Sprintf("token %s created for %s (expires: %s)", info.ID, info.SyncTargetRef(), DescribeExpiration(info, time.Now())), nil
}

// PlacedRules returns the RBAC rules the syncer of st needs at the edge
// for what is placed on it now (its mailbox's SyncerConfig), and whether
// the mailbox has a SyncerConfig yet (a SyncTarget just made has none:
// nothing is placed on it).
func (c *Center) PlacedRules(ctx context.Context, inv string, st *unstructured.Unstructured) ([]rbacv1.PolicyRule, bool, error) {
	mailbox := spaces.MailboxName(inv, string(st.GetUID()))
	u, err := c.Dynamic.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("syncerconfigs")).
		Get(spaces.WithSpace(ctx, mailbox), edgev2alpha1.SyncerConfigName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading what is placed on SyncTarget %q (the SyncerConfig of mailbox %s): %w", st.GetName(), mailbox, err)
	}
	var cfg edgev2alpha1.SyncerConfig
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cfg); err != nil {
		return nil, false, fmt.Errorf("the SyncerConfig of mailbox %s: %w", mailbox, err)
	}
	return syncer.PlacedRules(cfg.Spec), true, nil
}
