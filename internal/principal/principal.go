// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package principal names the identities the server's authentication
// gives and its authorization reads: a syncer's user, group and extras,
// and a ServiceAccount's space. It is a leaf, so that the dashboard and the
// tunnel read an identity without importing the server's authentication.
// The names are reserved: only the server's admins may impersonate them
// (server/auth.ReservedImpersonation).
package principal

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
)

// ExtraSpace is the user extra naming a ServiceAccount's space.
const ExtraSpace = "kubestellar.io/space"

// Syncer identities.
const (
	// SyncersGroup is the group of every syncer identity.
	SyncersGroup = "kubestellar:syncers"
	// SyncerUserPrefix starts a syncer's user name, which goes on with
	// "<inventory-space>:<sync-target>".
	SyncerUserPrefix = "system:kubestellar:syncer:"
	// Keys of a syncer identity's extra attributes.
	ExtraInventorySpace = "kubestellar.io/inventory-space"
	ExtraSyncTarget     = "kubestellar.io/sync-target"
	// ExtraTokenID and ExtraSyncTargetUID say which token authenticated the
	// syncer, and the UID of the SyncTarget that token is bound to.
	ExtraTokenID       = "kubestellar.io/token-id"
	ExtraSyncTargetUID = "kubestellar.io/sync-target-uid"
)

// SyncerTokenUser returns the identity of the syncer of a SyncTarget
// authenticated by token tokenID, bound to the SyncTarget with UID uid.
func SyncerTokenUser(inventorySpace, syncTarget, tokenID string, uid types.UID) *user.DefaultInfo {
	u := SyncerUser(inventorySpace, syncTarget)
	u.Extra[ExtraTokenID] = []string{tokenID}
	u.Extra[ExtraSyncTargetUID] = []string{string(uid)}
	return u
}

// TokenOf returns the token a syncer identity authenticated with and the
// UID of the SyncTarget it is bound to; ok=false when u is no syncer
// identity or does not say (SyncerUser without a token).
func TokenOf(u user.Info) (tokenID string, uid types.UID, ok bool) {
	if _, _, isSyncer := SyncTargetOf(u); !isSyncer {
		return "", "", false
	}
	extra := u.GetExtra()
	ids, uids := extra[ExtraTokenID], extra[ExtraSyncTargetUID]
	if len(ids) != 1 || len(uids) != 1 || ids[0] == "" || uids[0] == "" {
		return "", "", false
	}
	return ids[0], types.UID(uids[0]), true
}

// TunnelOwner tells whose reverse tunnel u may open: only a syncer's
// token, bound to its SyncTarget's UID, opens one, and only its
// SyncTarget's. err says why u may open none.
func TunnelOwner(u user.Info) (inventorySpace, syncTarget string, uid types.UID, tokenID string, err error) {
	inv, st, ok := SyncTargetOf(u)
	if !ok {
		name := "<anonymous>"
		if u != nil {
			name = u.GetName()
		}
		return "", "", "", "", fmt.Errorf("user %q may not open a tunnel: only a syncer's token does", name)
	}
	tokenID, uid, ok = TokenOf(u)
	if !ok {
		return "", "", "", "", fmt.Errorf("the syncer of SyncTarget %s/%s authenticated without a token bound to the SyncTarget's UID: "+
			"create a new token with `kubestellar token create --sync-target %s/%s`", inv, st, inv, st)
	}
	return inv, st, uid, tokenID, nil
}

// SyncerUser returns the identity of the syncer of a SyncTarget, without
// the token it authenticated with (see SyncerTokenUser).
func SyncerUser(inventorySpace, syncTarget string) *user.DefaultInfo {
	return &user.DefaultInfo{
		Name:   SyncerUserPrefix + inventorySpace + ":" + syncTarget,
		Groups: []string{SyncersGroup, user.AllAuthenticated},
		Extra: map[string][]string{
			ExtraInventorySpace: {inventorySpace},
			ExtraSyncTarget:     {syncTarget},
		},
	}
}

// SyncTargetOf returns the SyncTarget whose syncer u is, and ok=false when
// u is no syncer identity (as SyncerUser makes them). Its user name, group
// and extras are reserved (ReservedImpersonation): a request cannot claim
// them; a SubjectAccessReview may name them, to ask what a syncer may do.
func SyncTargetOf(u user.Info) (inventorySpace, syncTarget string, ok bool) {
	if u == nil || !slices.Contains(u.GetGroups(), SyncersGroup) {
		return "", "", false
	}
	extra := u.GetExtra()
	invs, sts := extra[ExtraInventorySpace], extra[ExtraSyncTarget]
	if len(invs) != 1 || len(sts) != 1 || invs[0] == "" || sts[0] == "" {
		return "", "", false
	}
	if u.GetName() != SyncerUserPrefix+invs[0]+":"+sts[0] {
		return "", "", false
	}
	return invs[0], sts[0], true
}
