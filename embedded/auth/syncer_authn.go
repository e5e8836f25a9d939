package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubestellar/kubestellar/embedded/auth/jointoken"
)

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
)

// SyncerUser returns the identity of the syncer of a SyncTarget.
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
// u is no syncer identity (as SyncerUser makes them).
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

// SyncerTokens authenticates syncer tokens (jointoken, in full or bare form)
// against the token Secrets of the root space (see CreateToken), read from
// a cache. Until the cache is set, no syncer token authenticates. A token
// whose Secret is gone or whose expiration has passed fails at once.
type SyncerTokens struct {
	caHash  string
	secrets atomic.Pointer[secretLister]
	// now is the clock expirations are checked against.
	now func() time.Time
}

type secretLister struct {
	corelisters.SecretNamespaceLister
}

var _ authenticator.Token = &SyncerTokens{}

// NewSyncerTokens returns an authenticator for the server whose CA
// certificate is caPEM: full-form tokens must pin it.
func NewSyncerTokens(caPEM []byte) *SyncerTokens {
	return &SyncerTokens{caHash: jointoken.CAHash(caPEM), now: time.Now}
}

// SetSecrets sets the cache of token Secrets (of TokenNamespace in the root
// space); tokens authenticate from then on.
func (t *SyncerTokens) SetSecrets(secrets corelisters.SecretNamespaceLister) {
	t.secrets.Store(&secretLister{secrets})
}

// AuthenticateToken implements authenticator.Token. A bearer token that is
// not shaped like a syncer token is none of its business (no error, so the
// next authenticator may take it); a syncer token that fails gets an error
// naming its id (never its secret), for the server log.
func (t *SyncerTokens) AuthenticateToken(_ context.Context, bearer string) (*authenticator.Response, bool, error) {
	tok, err := jointoken.Parse(bearer)
	if err != nil {
		return nil, false, nil
	}
	if tok.CAHash != "" && subtle.ConstantTimeCompare([]byte(tok.CAHash), []byte(t.caHash)) != 1 {
		return nil, false, fmt.Errorf("syncer token %s pins another CA than this server's", tok.ID)
	}
	lister := t.secrets.Load()
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
		return nil, false, fmt.Errorf("syncer token %s expired at %s", tok.ID, info.Expiration.Format(time.RFC3339))
	}
	return &authenticator.Response{User: SyncerUser(info.InventorySpace, info.SyncTarget)}, true, nil
}
