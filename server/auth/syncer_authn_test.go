// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/internal/principal"
)

// fakeUIDs is a SyncTarget cache: "inventory/name" -> UID.
type fakeUIDs struct {
	mu   sync.Mutex
	uids map[string]types.UID
	// missed, when set, is closed at the first look-up of a SyncTarget
	// the cache does not have.
	missed chan struct{}
}

func (f *fakeUIDs) UIDOf(inv, name string) (types.UID, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	uid, ok := f.uids[inv+"/"+name]
	if !ok && f.missed != nil {
		close(f.missed)
		f.missed = nil
	}
	return uid, ok
}

// missNext returns a channel closed at the next look-up that misses.
func (f *fakeUIDs) missNext() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.missed = make(chan struct{})
	return f.missed
}

func (f *fakeUIDs) set(ref string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if uid == "" {
		delete(f.uids, ref)
		return
	}
	f.uids[ref] = uid
}

// fixtureUID is the UID tokenFixture binds a token to.
func fixtureUID(inv, st string) types.UID { return types.UID("uid-" + inv + "-" + st) }

// fixtureUIDs has the SyncTargets refs ("inventory/name") with their
// fixture UIDs.
func fixtureUIDs(refs ...string) *fakeUIDs {
	f := &fakeUIDs{uids: map[string]types.UID{}}
	for _, ref := range refs {
		inv, st, _ := ParseSyncTargetRef(ref)
		f.uids[ref] = fixtureUID(inv, st)
	}
	return f
}

// setSecret changes a token Secret in the fake cache.
func setSecret(t *testing.T, indexer cache.Indexer, id string, change func(*corev1.Secret)) {
	t.Helper()
	obj, ok, err := indexer.GetByKey(TokenNamespace + "/" + TokenSecretName(id))
	require.NoError(t, err)
	require.True(t, ok)
	s := obj.(*corev1.Secret).DeepCopy()
	change(s)
	require.NoError(t, indexer.Update(s))
}

// TestSyncerTokenBinding: a token works only while the SyncTarget it was
// made for (by UID) exists, and the identity names the token and the UID.
func TestSyncerTokenBinding(t *testing.T) {
	indexer := newSecretIndexer()
	bound := tokenFixture(t, indexer, "aaaaaa", "inv1/edge1", "")
	old := tokenFixture(t, indexer, "bbbbbb", "inv1/edge1", "")
	setSecret(t, indexer, "bbbbbb", func(s *corev1.Secret) { delete(s.Data, TokenSyncTargetUIDKey) })
	gone := tokenFixture(t, indexer, "cccccc", "inv1/edge2", "")
	earlier := tokenFixture(t, indexer, "dddddd", "inv1/edge3", "")
	uids := fixtureUIDs("inv1/edge1")
	uids.set("inv1/edge3", "uid-of-a-new-edge3")
	tokens := NewSyncerTokens(testCA, uids)
	tokens.now = func() time.Time { return testNow }
	tokens.SetSecrets(corelisters.NewSecretLister(indexer).Secrets(TokenNamespace))

	for _, tc := range []struct {
		desc    string
		bearer  string
		wantErr []string
	}{
		{desc: "bound to the SyncTarget there is", bearer: bound.String()},
		{desc: "made by an older version", bearer: old.String(),
			wantErr: []string{"syncer token bbbbbb was made by an older version", "create a new one with `kubestellar token create --sync-target inv1/edge1`"}},
		{desc: "SyncTarget deleted", bearer: gone.String(),
			wantErr: []string{"syncer token cccccc is for SyncTarget inv1/edge2, which no longer exists", "kubestellar synctarget create edge2 --inventory-space inv1"}},
		{desc: "SyncTarget made again", bearer: earlier.String(),
			wantErr: []string{"syncer token dddddd was made for an earlier SyncTarget inv1/edge3 (UID uid-inv1-edge3)", "now (UID uid-of-a-new-edge3)", "create a new token"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, ok, err := tokens.AuthenticateToken(t.Context(), tc.bearer)
			if tc.wantErr == nil {
				require.NoError(t, err)
				require.True(t, ok)
				inv, st, isSyncer := principal.SyncTargetOf(resp.User)
				require.True(t, isSyncer, "principal.SyncTargetOf still knows the identity")
				require.Equal(t, "inv1/edge1", inv+"/"+st)
				id, uid, hasToken := principal.TokenOf(resp.User)
				require.True(t, hasToken)
				require.Equal(t, "aaaaaa", id)
				require.Equal(t, fixtureUID("inv1", "edge1"), uid)
				return
			}
			require.False(t, ok)
			require.Nil(t, resp)
			for _, want := range tc.wantErr {
				require.ErrorContains(t, err, want)
			}
			require.NotContains(t, err.Error(), testSecrets)
		})
	}

	t.Run("principal.TokenOf", func(t *testing.T) {
		_, _, ok := principal.TokenOf(principal.SyncerUser("inv1", "edge1"))
		require.False(t, ok, "a syncer identity without a token")
		_, _, ok = principal.TokenOf(AdminInfo())
		require.False(t, ok, "not a syncer")
		forged := principal.SyncerTokenUser("inv1", "edge1", "aaaaaa", "u")
		forged.Groups = nil
		_, _, ok = principal.TokenOf(forged)
		require.False(t, ok, "not in the syncers group")
	})

	t.Run("a new token waits a moment for the SyncTarget cache", func(t *testing.T) {
		fresh := tokenFixture(t, indexer, "eeeeee", "inv1/edge5", "")
		setSecret(t, indexer, "eeeeee", func(s *corev1.Secret) { s.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Second)) })
		// The cache is late: the SyncTarget shows only once the token has
		// looked for it and not found it.
		missed := uids.missNext()
		added := make(chan struct{})
		go func() {
			defer close(added)
			<-missed
			uids.set("inv1/edge5", fixtureUID("inv1", "edge5"))
		}()
		_, ok, err := tokens.AuthenticateToken(t.Context(), fresh.String())
		<-added
		require.NoError(t, err)
		require.True(t, ok)
	})
	t.Run("an old token does not wait", func(t *testing.T) {
		setSecret(t, indexer, "cccccc", func(s *corev1.Secret) { s.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Hour)) })
		_, ok, err := tokens.AuthenticateToken(context.Background(), gone.String())
		require.False(t, ok)
		require.ErrorContains(t, err, "no longer exists")
	})
}

func TestStillValid(t *testing.T) {
	indexer := newSecretIndexer()
	tokenFixture(t, indexer, "aaaaaa", "inv1/edge1", testNow.Add(time.Hour).Format(time.RFC3339))
	tokenFixture(t, indexer, "bbbbbb", "inv1/edge2", "")
	uids := fixtureUIDs("inv1/edge1", "inv1/edge2")
	tokens := NewSyncerTokens(testCA, uids)
	now := testNow
	tokens.now = func() time.Time { return now }
	_, err := tokens.StillValid("aaaaaa", fixtureUID("inv1", "edge1"))
	require.ErrorContains(t, err, "not loaded")
	tokens.SetSecrets(corelisters.NewSecretLister(indexer).Secrets(TokenNamespace))

	exp, err := tokens.StillValid("aaaaaa", fixtureUID("inv1", "edge1"))
	require.NoError(t, err)
	require.Equal(t, testNow.Add(time.Hour), exp)
	_, err = tokens.StillValid("aaaaaa", "another-uid")
	require.ErrorContains(t, err, "no longer bound to the SyncTarget UID another-uid")
	exp, err = tokens.StillValid("bbbbbb", fixtureUID("inv1", "edge2"))
	require.NoError(t, err)
	require.True(t, exp.IsZero())

	now = testNow.Add(time.Hour)
	_, err = tokens.StillValid("aaaaaa", fixtureUID("inv1", "edge1"))
	require.ErrorContains(t, err, "syncer token aaaaaa expired at")

	uids.set("inv1/edge2", "")
	_, err = tokens.StillValid("bbbbbb", fixtureUID("inv1", "edge2"))
	require.ErrorContains(t, err, "no longer exists")
	uids.set("inv1/edge2", "new")
	_, err = tokens.StillValid("bbbbbb", fixtureUID("inv1", "edge2"))
	require.ErrorContains(t, err, "earlier SyncTarget")

	obj, _, _ := indexer.GetByKey(TokenNamespace + "/" + TokenSecretName("bbbbbb"))
	require.NoError(t, indexer.Delete(obj))
	_, err = tokens.StillValid("bbbbbb", fixtureUID("inv1", "edge2"))
	require.ErrorContains(t, err, "syncer token bbbbbb was revoked")
}
