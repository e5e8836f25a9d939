// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/internal/principal"
)

// UserTokenUser returns the identity a user token authenticates as: its
// user and groups, in system:authenticated, with the token's id.
func UserTokenUser(info TokenInfo) *user.DefaultInfo {
	groups := append(slices.Clone(info.Groups), user.AllAuthenticated)
	return &user.DefaultInfo{Name: info.User, Groups: groups, Extra: map[string][]string{principal.ExtraTokenID: {info.ID}}}
}

// SyncerTokens authenticates syncer tokens (jointoken, in full or bare form)
// against the token Secrets of the root space (see CreateToken), read from
// a cache. Until the cache is set, no syncer token authenticates. A token
// whose Secret is gone or whose expiration has passed fails at once, and so
// does one whose SyncTarget is gone or is another one now (another UID).
type SyncerTokens struct {
	caHash  string
	secrets atomic.Pointer[secretLister]
	// loaded is closed when secrets is first set.
	loaded     chan struct{}
	loadedOnce sync.Once
	// loadWait bounds how long a syncer token waits for the cache.
	loadWait time.Duration
	// syncTargets tells the UIDs of the SyncTargets there are now.
	syncTargets SyncTargetUIDs
	// now is the clock expirations are checked against.
	now func() time.Time
	// waiting, when set (by tests), is called as a token starts waiting
	// for the cache.
	waiting func()
}

// SyncTargetUIDs tells the UID of the SyncTarget of a name there is now.
type SyncTargetUIDs interface {
	UIDOf(inventorySpace, name string) (types.UID, bool)
}

// cacheLag is how long a token Secret counts as new: long enough for the
// SyncTarget cache to catch up with a SyncTarget made just before it.
const (
	cacheLag     = 10 * time.Second
	cacheLagWait = time.Second
)

// loadWait is how long a syncer token presented while the server starts
// waits for the token cache, rather than fail: after a restart every
// syncer is knocking, and its tunnel is back the moment the tokens are
// loaded instead of at its next retry.
const loadWait = 5 * time.Second

type secretLister struct {
	corelisters.SecretNamespaceLister
}

var _ authenticator.Token = &SyncerTokens{}

// NewSyncerTokens returns an authenticator for the server whose CA
// certificate is caPEM: full-form tokens must pin it.
// UIDs of SyncTargets come from syncTargets.
func NewSyncerTokens(caPEM []byte, syncTargets SyncTargetUIDs) *SyncerTokens {
	return &SyncerTokens{caHash: jointoken.CAHash(caPEM), syncTargets: syncTargets, now: time.Now,
		loaded: make(chan struct{}), loadWait: loadWait}
}

// SetSecrets sets the cache of token Secrets (of TokenNamespace in the root
// space); tokens authenticate from then on.
func (t *SyncerTokens) SetSecrets(secrets corelisters.SecretNamespaceLister) {
	t.secrets.Store(&secretLister{secrets})
	t.loadedOnce.Do(func() { close(t.loaded) })
}

// lister returns the cache of token Secrets, waiting up to loadWait for it
// to be set; nil if it is not.
func (t *SyncerTokens) lister(ctx context.Context) *secretLister {
	if lister := t.secrets.Load(); lister != nil {
		return lister
	}
	timer := time.NewTimer(t.loadWait)
	defer timer.Stop()
	if t.waiting != nil {
		t.waiting()
	}
	select {
	case <-t.loaded:
	case <-timer.C:
	case <-ctx.Done():
	}
	return t.secrets.Load()
}

// AuthenticateToken implements authenticator.Token. A bearer token that is
// not shaped like a syncer token is none of its business (no error, so the
// next authenticator may take it); a syncer token that fails gets an error
// naming its id (never its secret), for the server log.
func (t *SyncerTokens) AuthenticateToken(ctx context.Context, bearer string) (*authenticator.Response, bool, error) {
	tok, err := jointoken.Parse(bearer)
	if err != nil {
		return nil, false, nil
	}
	if tok.CAHash != "" && subtle.ConstantTimeCompare([]byte(tok.CAHash), []byte(t.caHash)) != 1 {
		return nil, false, fmt.Errorf("syncer token %s pins another CA than this server's", tok.ID)
	}
	lister := t.lister(ctx)
	if lister == nil {
		return nil, false, errors.New("syncer tokens are not loaded yet")
	}
	secret, err := lister.Get(TokenSecretName(tok.ID))
	if apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("unknown syncer token %s", tok.ID)
	}
	if err != nil {
		return nil, false, fmt.Errorf("looking up syncer token %s: %w", tok.ID, err)
	}
	info, err := TokenFromSecret(secret)
	if err != nil {
		return nil, false, fmt.Errorf("syncer token %s: %w", tok.ID, err)
	}
	if subtle.ConstantTimeCompare([]byte(jointoken.SecretHash(tok.Secret)), []byte(info.SecretSHA256)) != 1 {
		return nil, false, fmt.Errorf("wrong secret for syncer token %s", tok.ID)
	}
	if info.Expired(t.now()) {
		return nil, false, expiredError(info)
	}
	if info.User != "" {
		return &authenticator.Response{User: UserTokenUser(info)}, true, nil
	}
	if err := t.bound(info); err != nil {
		if !t.isNew(secret) {
			return nil, false, err
		}
		// A SyncTarget made a moment before its token may not be in the
		// cache yet.
		if err = t.waitBound(ctx, info); err != nil {
			return nil, false, err
		}
	}
	return &authenticator.Response{User: principal.SyncerTokenUser(info.InventorySpace, info.SyncTarget, info.ID, info.SyncTargetUID)}, true, nil
}

func expiredError(info TokenInfo) error {
	if info.User != "" {
		return fmt.Errorf("token %s of user %s expired at %s: ask an admin for a new one (kubestellar token create --user %s)",
			info.ID, info.User, info.Expiration.Format(time.RFC3339), info.User)
	}
	return fmt.Errorf("syncer token %s expired at %s: create a new one with `kubestellar token create --sync-target %s`",
		info.ID, info.Expiration.Format(time.RFC3339), info.SyncTargetRef())
}

// bound fails unless the token's SyncTarget is there, with the UID the
// token was made for.
func (t *SyncerTokens) bound(info TokenInfo) error {
	if info.SyncTargetUID == "" {
		return fmt.Errorf("syncer token %s was made by an older version of kubestellar and is not bound to the UID of its SyncTarget: "+
			"create a new one with `kubestellar token create --sync-target %s` and revoke this one", info.ID, info.SyncTargetRef())
	}
	var uid types.UID
	ok := false
	if t.syncTargets != nil {
		uid, ok = t.syncTargets.UIDOf(info.InventorySpace, info.SyncTarget)
	}
	if !ok {
		return fmt.Errorf("syncer token %s is for SyncTarget %s, which no longer exists: "+
			"create the SyncTarget and a new token with `kubestellar synctarget create %s --inventory-space %s`",
			info.ID, info.SyncTargetRef(), info.SyncTarget, info.InventorySpace)
	}
	if uid != info.SyncTargetUID {
		return fmt.Errorf("syncer token %s was made for an earlier SyncTarget %s (UID %s), which was deleted; the one of that name now (UID %s) is another: "+
			"create a new token with `kubestellar token create --sync-target %s`", info.ID, info.SyncTargetRef(), info.SyncTargetUID, uid, info.SyncTargetRef())
	}
	return nil
}

// isNew tells whether a token Secret was made within cacheLag.
func (t *SyncerTokens) isNew(secret *corev1.Secret) bool {
	created := secret.CreationTimestamp.Time
	return !created.IsZero() && t.now().Sub(created) < cacheLag
}

// waitBound gives the SyncTarget cache up to cacheLagWait to show the
// token's SyncTarget.
func (t *SyncerTokens) waitBound(ctx context.Context, info TokenInfo) error {
	var err error
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, cacheLagWait, true, func(context.Context) (bool, error) {
		err = t.bound(info)
		return err == nil, nil
	})
	return err
}

// StillValid tells whether token tokenID, which authenticated a syncer for
// the SyncTarget with UID uid, still would: nil if so, else why not. It
// also returns when the token expires (zero for never).
func (t *SyncerTokens) StillValid(tokenID string, uid types.UID) (time.Time, error) {
	lister := t.secrets.Load()
	if lister == nil {
		return time.Time{}, errors.New("syncer tokens are not loaded")
	}
	secret, err := lister.Get(TokenSecretName(tokenID))
	if apierrors.IsNotFound(err) {
		return time.Time{}, fmt.Errorf("syncer token %s was revoked", tokenID)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("looking up syncer token %s: %w", tokenID, err)
	}
	info, err := TokenFromSecret(secret)
	if err != nil {
		return time.Time{}, fmt.Errorf("syncer token %s: %w", tokenID, err)
	}
	if info.Expired(t.now()) {
		return info.Expiration, expiredError(info)
	}
	if info.SyncTargetUID != uid {
		return info.Expiration, fmt.Errorf("syncer token %s is no longer bound to the SyncTarget UID %s", tokenID, uid)
	}
	return info.Expiration, t.bound(info)
}
