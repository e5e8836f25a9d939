// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/spaces"
)

// Tokens, a syncer's or a user's, are kept as Secrets in the root space,
// one per token, each holding only the SHA-256 of the token's secret.
const (
	// TokenNamespace is the namespace of the root space holding them.
	TokenNamespace = "kube-system"
	// TokenSecretPrefix starts their names; the token id ends them.
	TokenSecretPrefix = "kubestellar-token-"
	// TokenSecretType is their type.
	TokenSecretType corev1.SecretType = "kubestellar.io/token"
	// TokenLabel is "true" on each of them.
	TokenLabel = "kubestellar.io/token"

	// Keys of their data.
	TokenIDKey           = "token-id"
	TokenSecretSHA256Key = "secret-sha256"
	TokenSyncTargetKey   = "sync-target"
	// TokenSyncTargetUIDKey holds the UID of the SyncTarget the token was
	// made for: a SyncTarget deleted and made again under the same name is
	// another one, which the token does not reach.
	TokenSyncTargetUIDKey = "sync-target-uid"
	TokenExpirationKey    = "expiration"
	TokenDescriptionKey   = "description"
	// TokenUserKey and TokenGroupsKey (one group a line) hold the identity
	// of a user token, which has no SyncTarget.
	TokenUserKey   = "user"
	TokenGroupsKey = "groups"
)

// TokenSelector selects the token Secrets.
var TokenSelector = labels.Set{TokenLabel: "true"}.AsSelector()

// TokenSecretName returns the name of the Secret of a token id.
func TokenSecretName(id string) string { return TokenSecretPrefix + id }

// TokenInfo is what the server knows of a token (never its secret): a
// syncer's, for a SyncTarget, or a user's, for a user name and groups.
type TokenInfo struct {
	ID string
	// User and Groups are the identity of a user token; User is empty for a
	// syncer token.
	User   string
	Groups []string
	// InventorySpace and SyncTarget name the SyncTarget the token is for.
	InventorySpace string
	SyncTarget     string
	// SyncTargetUID is the UID of that SyncTarget when the token was made;
	// empty for a token made by a version that did not record it.
	SyncTargetUID types.UID
	// Expiration is when the token stops working; zero for never.
	Expiration  time.Time
	Description string
	// SecretSHA256 is the hex SHA-256 of the token's secret.
	SecretSHA256 string
}

// SyncTargetRef returns "inventory-space/name" ("" for a user token).
func (i TokenInfo) SyncTargetRef() string {
	if i.User != "" {
		return ""
	}
	return i.InventorySpace + "/" + i.SyncTarget
}

// Holder says whom the token is for: "user NAME" or "SyncTarget INV/NAME".
func (i TokenInfo) Holder() string {
	if i.User != "" {
		return "user " + i.User
	}
	return "SyncTarget " + i.SyncTargetRef()
}

// Expired tells whether the token has expired at now.
func (i TokenInfo) Expired(now time.Time) bool {
	return !i.Expiration.IsZero() && !now.Before(i.Expiration)
}

// ParseSyncTargetRef splits "inventory-space/name" and checks both parts.
func ParseSyncTargetRef(ref string) (inventorySpace, name string, err error) {
	inventorySpace, name, ok := strings.Cut(ref, "/")
	if !ok || inventorySpace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q is not INVENTORY-SPACE/NAME", ref)
	}
	if err := spaces.ValidateName(inventorySpace); err != nil {
		return "", "", fmt.Errorf("%q: %w", ref, err)
	}
	if err := ValidateSyncTargetName(name); err != nil {
		return "", "", fmt.Errorf("%q: %w", ref, err)
	}
	return inventorySpace, name, nil
}

// ValidateSyncTargetName returns what is wrong with a SyncTarget name for a
// syncer identity: it is a DNS label, so that it also serves as the value
// of the SyncTarget's name label and as part of the syncer's user name.
func ValidateSyncTargetName(name string) error {
	if err := spaces.ValidateName(name); err != nil {
		return fmt.Errorf("invalid SyncTarget name %q: must be a DNS label (lower-case letters, digits and '-', at most 63 characters)", name)
	}
	return nil
}

// TokenFromSecret reads a token Secret; it fails for anything that is not
// a well-formed token Secret.
func TokenFromSecret(s *corev1.Secret) (TokenInfo, error) {
	if s.Type != TokenSecretType {
		return TokenInfo{}, fmt.Errorf("secret %s is of type %q, not %q", s.Name, s.Type, TokenSecretType)
	}
	id := string(s.Data[TokenIDKey])
	if !jointoken.ValidID(id) || s.Name != TokenSecretName(id) {
		return TokenInfo{}, fmt.Errorf("secret %s does not hold the token it is named after", s.Name)
	}
	hash := string(s.Data[TokenSecretSHA256Key])
	if len(hash) != 64 {
		return TokenInfo{}, fmt.Errorf("secret %s holds no valid %s", s.Name, TokenSecretSHA256Key)
	}
	info := TokenInfo{ID: id, SecretSHA256: hash, Description: string(s.Data[TokenDescriptionKey])}
	if name, isUser := s.Data[TokenUserKey]; isUser {
		info.User = string(name)
		if groups := strings.TrimSpace(string(s.Data[TokenGroupsKey])); groups != "" {
			info.Groups = strings.Split(groups, "\n")
		}
		if err := ValidateUserIdentity(info.User, info.Groups); err != nil {
			return TokenInfo{}, fmt.Errorf("secret %s: %w", s.Name, err)
		}
	} else {
		inv, st, err := ParseSyncTargetRef(string(s.Data[TokenSyncTargetKey]))
		if err != nil {
			return TokenInfo{}, fmt.Errorf("secret %s: %s: %w", s.Name, TokenSyncTargetKey, err)
		}
		info.InventorySpace, info.SyncTarget, info.SyncTargetUID = inv, st, types.UID(s.Data[TokenSyncTargetUIDKey])
	}
	if exp := string(s.Data[TokenExpirationKey]); exp != "" {
		var err error
		if info.Expiration, err = time.Parse(time.RFC3339, exp); err != nil {
			return TokenInfo{}, fmt.Errorf("secret %s: %s is not RFC 3339: %w", s.Name, TokenExpirationKey, err)
		}
	}
	return info, nil
}

// NewTokenOptions describe a new syncer token.
type NewTokenOptions struct {
	// InventorySpace and SyncTarget name the SyncTarget the token is for.
	InventorySpace string
	SyncTarget     string
	// SyncTargetUID is the UID of that SyncTarget (required): the token
	// works only while the SyncTarget with this UID exists.
	SyncTargetUID types.UID
	// TTL limits how long the token works; zero for ever.
	TTL         time.Duration
	Description string
	// CAPEM is the server's CA certificate, as served at /cacerts; the token
	// pins its hash.
	CAPEM []byte
	// Now is the time TTL counts from (default time.Now).
	Now func() time.Time
}

// CreateToken makes a new syncer token and stores it, through root (a
// client of the root space). The returned token is the only place its
// secret is ever kept.
func CreateToken(ctx context.Context, root kubernetes.Interface, o NewTokenOptions) (jointoken.Token, TokenInfo, error) {
	if err := spaces.ValidateName(o.InventorySpace); err != nil {
		return jointoken.Token{}, TokenInfo{}, fmt.Errorf("inventory space: %w", err)
	}
	if err := ValidateSyncTargetName(o.SyncTarget); err != nil {
		return jointoken.Token{}, TokenInfo{}, err
	}
	if o.SyncTargetUID == "" {
		return jointoken.Token{}, TokenInfo{}, fmt.Errorf("no UID given for SyncTarget %s/%s: a token is bound to one SyncTarget, read it first", o.InventorySpace, o.SyncTarget)
	}
	if o.TTL < 0 {
		return jointoken.Token{}, TokenInfo{}, fmt.Errorf("negative TTL %s", o.TTL)
	}
	info := TokenInfo{InventorySpace: o.InventorySpace, SyncTarget: o.SyncTarget, SyncTargetUID: o.SyncTargetUID, Description: o.Description}
	return storeToken(ctx, root, info, o.TTL, o.Now, o.CAPEM)
}

// NewUserTokenOptions describe a new user token.
type NewUserTokenOptions struct {
	// User and Groups are who the token authenticates as (every user is
	// in system:authenticated besides).
	User   string
	Groups []string
	// TTL limits how long the token works; zero for ever.
	TTL         time.Duration
	Description string
	// CAPEM is the server's CA certificate, as served at /cacerts.
	CAPEM []byte
	// Now is the time TTL counts from (default time.Now).
	Now func() time.Time
}

// CreateUserToken makes a new user token and stores it, through root (a
// client of the root space). What the user may do is what the RBAC of
// each space grants its name and groups.
func CreateUserToken(ctx context.Context, root kubernetes.Interface, o NewUserTokenOptions) (jointoken.Token, TokenInfo, error) {
	if err := ValidateUserIdentity(o.User, o.Groups); err != nil {
		return jointoken.Token{}, TokenInfo{}, err
	}
	if o.TTL < 0 {
		return jointoken.Token{}, TokenInfo{}, fmt.Errorf("negative TTL %s", o.TTL)
	}
	return storeToken(ctx, root, TokenInfo{User: o.User, Groups: o.Groups, Description: o.Description}, o.TTL, o.Now, o.CAPEM)
}

// reservedPrefixes start the names of identities the server makes itself.
var reservedPrefixes = []string{"system:", "kubestellar:", "kubestellar-"}

// ValidateUserIdentity returns what is wrong with a user token's user
// name and groups: names the server's own identities use (system:...,
// kubestellar...) are refused, so that no token poses as the admin, a
// syncer, a ServiceAccount or a node.
func ValidateUserIdentity(name string, groups []string) error {
	check := func(what, v string) error {
		switch {
		case v == "":
			return fmt.Errorf("the %s is empty", what)
		case len(v) > 253:
			return fmt.Errorf("the %s %q is longer than 253 characters", what, v)
		case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }):
			return fmt.Errorf("the %s %q holds control characters", what, v)
		case v != strings.TrimSpace(v):
			return fmt.Errorf("the %s %q starts or ends with white space", what, v)
		}
		for _, p := range reservedPrefixes {
			if strings.HasPrefix(v, p) {
				return fmt.Errorf("the %s %q starts with %q, which the server's own identities use", what, v, p)
			}
		}
		return nil
	}
	if err := check("user name", name); err != nil {
		return err
	}
	for _, g := range groups {
		if err := check("group", g); err != nil {
			return err
		}
	}
	return nil
}

// storeToken draws a token for info and stores its Secret.
func storeToken(ctx context.Context, root kubernetes.Interface, info TokenInfo, ttl time.Duration, clock func() time.Time, caPEM []byte) (jointoken.Token, TokenInfo, error) {
	now := time.Now
	if clock != nil {
		now = clock
	}
	if err := ensureTokenNamespace(ctx, root); err != nil {
		return jointoken.Token{}, TokenInfo{}, err
	}
	// Ids are random; a clash with an existing token just draws again.
	for range 5 {
		tok, err := jointoken.New(caPEM)
		if err != nil {
			return jointoken.Token{}, TokenInfo{}, err
		}
		info.ID, info.SecretSHA256 = tok.ID, jointoken.SecretHash(tok.Secret)
		if ttl > 0 {
			info.Expiration = now().Add(ttl).UTC().Truncate(time.Second)
		}
		_, err = root.CoreV1().Secrets(TokenNamespace).Create(ctx, tokenSecret(info), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return jointoken.Token{}, TokenInfo{}, fmt.Errorf("storing token %s: %w", tok.ID, err)
		}
		return tok, info, nil
	}
	return jointoken.Token{}, TokenInfo{}, errors.New("could not find a free token id")
}

func tokenSecret(info TokenInfo) *corev1.Secret {
	data := map[string][]byte{
		TokenIDKey:           []byte(info.ID),
		TokenSecretSHA256Key: []byte(info.SecretSHA256),
	}
	if info.User != "" {
		data[TokenUserKey] = []byte(info.User)
		data[TokenGroupsKey] = []byte(strings.Join(info.Groups, "\n"))
	} else {
		data[TokenSyncTargetKey] = []byte(info.SyncTargetRef())
	}
	if info.SyncTargetUID != "" {
		data[TokenSyncTargetUIDKey] = []byte(info.SyncTargetUID)
	}
	if !info.Expiration.IsZero() {
		data[TokenExpirationKey] = []byte(info.Expiration.UTC().Format(time.RFC3339))
	}
	if info.Description != "" {
		data[TokenDescriptionKey] = []byte(info.Description)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: TokenSecretName(info.ID), Namespace: TokenNamespace, Labels: map[string]string{TokenLabel: "true"}},
		Type:       TokenSecretType,
		Data:       data,
	}
}

func ensureTokenNamespace(ctx context.Context, root kubernetes.Interface) error {
	_, err := root.CoreV1().Namespaces().Get(ctx, TokenNamespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = root.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TokenNamespace}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s of the root space: %w", TokenNamespace, err)
	}
	return nil
}

// ListTokens returns the tokens (syncers' and users') stored in the root space, by id.
// Secrets that are not well-formed tokens are skipped.
func ListTokens(ctx context.Context, root kubernetes.Interface) ([]TokenInfo, error) {
	list, err := root.CoreV1().Secrets(TokenNamespace).List(ctx, metav1.ListOptions{LabelSelector: TokenSelector.String()})
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	var out []TokenInfo
	for i := range list.Items {
		if info, err := TokenFromSecret(&list.Items[i]); err == nil {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ErrTokenNotFound is returned for a token id the server does not know.
var ErrTokenNotFound = errors.New("no such token")

// RevokeToken deletes a token; it stops working at once.
func RevokeToken(ctx context.Context, root kubernetes.Interface, id string) error {
	if !jointoken.ValidID(id) {
		return fmt.Errorf("%q is not a token id (%d characters of [a-z0-9])", id, jointoken.IDLength)
	}
	err := root.CoreV1().Secrets(TokenNamespace).Delete(ctx, TokenSecretName(id), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("token %s: %w", id, ErrTokenNotFound)
	}
	if err != nil {
		return fmt.Errorf("revoking token %s: %w", id, err)
	}
	return nil
}

// RevokeSyncTargetTokens deletes every token of one SyncTarget and returns
// the ids it deleted.
func RevokeSyncTargetTokens(ctx context.Context, root kubernetes.Interface, inventorySpace, syncTarget string) ([]string, error) {
	all, err := ListTokens(ctx, root)
	if err != nil {
		return nil, err
	}
	var revoked []string
	for _, info := range all {
		if info.InventorySpace != inventorySpace || info.SyncTarget != syncTarget {
			continue
		}
		if err := RevokeToken(ctx, root, info.ID); err != nil && !errors.Is(err, ErrTokenNotFound) {
			return revoked, err
		}
		revoked = append(revoked, info.ID)
	}
	return revoked, nil
}
