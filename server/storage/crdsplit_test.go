// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/utils/ptr"

	"github.com/kubestellar/kubestellar/spaces"
)

// crdStorage is the API server's storage of CRDs on ds, with the codec the
// server stores them with (apiextensionsCodec in server/config.go), at the
// keys of the old layout: spaces.Decorate puts it in the new one.
func crdStorage(t *testing.T, ds *Datastore) apiserverstorage.Interface {
	t.Helper()
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeJSON,
		StorageSerializer: serializer.NewCodecFactory(scheme),
		StorageVersion:    apiextensionsv1.SchemeGroupVersion,
		MemoryVersion:     apiextensions.SchemeGroupVersion,
	})
	require.NoError(t, err)
	cfg := storagebackend.NewDefaultConfig(KeyPrefix, codec).ForResource(crdResource)
	store, destroy, err := ds.rawStorage(cfg, func() runtime.Object { return &apiextensions.CustomResourceDefinition{} },
		func() runtime.Object { return &apiextensions.CustomResourceDefinitionList{} }, ResourcePrefix(crdResource))
	require.NoError(t, err)
	t.Cleanup(destroy)
	return store
}

// crdKey is the key the storage is given for a CRD (without KeyPrefix).
func crdKey(name string) string { return ResourcePrefix(crdResource) + "/" + name }

// sharedCRD is a CRD as the old layout stored it, bound as bound says
// (no binding at all when bound is "-"), with everything a split keeps.
func sharedCRD(name, bound string) *apiextensions.CustomResourceDefinition {
	plural, group, _ := strings.Cut(name, ".")
	names := apiextensions.CustomResourceDefinitionNames{Plural: plural, Singular: plural + "-one", Kind: "Kind" + plural, ListKind: "Kind" + plural + "List"}
	created := metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	crd := &apiextensions.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			UID:               types.UID("uid-of-" + name),
			Generation:        3,
			CreationTimestamp: created,
			Labels:            map[string]string{"team": "blue"},
			Annotations:       map[string]string{"note": "kept", boundBeforeAnnotation: "x"},
			Finalizers:        []string{apiextensionsv1.CustomResourceCleanupFinalizer},
		},
		Spec: apiextensions.CustomResourceDefinitionSpec{
			Group: group,
			Names: names,
			Scope: apiextensions.NamespaceScoped,
			Versions: []apiextensions.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensions.CustomResourceValidation{OpenAPIV3Schema: &apiextensions.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}},
			}},
			Conversion:            &apiextensions.CustomResourceConversion{Strategy: apiextensions.NoneConverter},
			PreserveUnknownFields: ptr.To(false),
		},
		Status: apiextensions.CustomResourceDefinitionStatus{
			Conditions: []apiextensions.CustomResourceDefinitionCondition{
				{Type: apiextensions.NamesAccepted, Status: apiextensions.ConditionTrue, Reason: "NoConflicts", LastTransitionTime: created},
				{Type: apiextensions.Established, Status: apiextensions.ConditionTrue, Reason: "InitialNamesAccepted", LastTransitionTime: created},
			},
			AcceptedNames:  names,
			StoredVersions: []string{"v1"},
		},
	}
	if bound != "-" {
		crd.Annotations[spaces.BoundAnnotation] = bound
	}
	return crd
}

// storeShared stores crd in the old layout, as the server stored it, and
// returns it as read back.
func storeShared(ctx context.Context, t *testing.T, store apiserverstorage.Interface, crd *apiextensions.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	out := &apiextensions.CustomResourceDefinition{}
	require.NoError(t, store.Create(ctx, crdKey(crd.Name), crd, out, 0))
	return out
}

// modRevisions are the mod revisions of every key under CRDPrefix.
func modRevisions(ctx context.Context, t *testing.T, kv clientv3.KV) map[string]int64 {
	t.Helper()
	resp, err := kv.Get(ctx, CRDPrefix()+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	revs := map[string]int64{}
	for _, item := range resp.Kvs {
		revs[string(item.Key)] = item.ModRevision
	}
	return revs
}

// inSpace reads a space's CRD through the storage of the new layout.
func inSpace(ctx context.Context, t *testing.T, perSpace apiserverstorage.Interface, space, name string) *apiextensions.CustomResourceDefinition {
	t.Helper()
	got := &apiextensions.CustomResourceDefinition{}
	require.NoError(t, perSpace.Get(spaces.WithSpace(ctx, space), crdKey(name), apiserverstorage.GetOptions{}, got), "%s in space %s", name, space)
	return got
}

// requireCopy checks that got is space's copy of shared: the same object
// but for its UID (checked by the caller), its resource version and its
// annotations (the bindings gone, its space named, "*" kept when all).
func requireCopy(t *testing.T, shared, got *apiextensions.CustomResourceDefinition, space string, all bool) {
	t.Helper()
	want := shared.DeepCopy()
	want.UID, want.ResourceVersion = got.UID, got.ResourceVersion
	want.Annotations = map[string]string{"note": "kept", spaces.Annotation: space}
	if all {
		want.Annotations[spaces.BoundAnnotation] = spaces.AllSpaces
	}
	require.Equal(t, want, got, "%s in space %s", shared.Name, space)
}

// A CRD bound to some spaces becomes one CRD in each, each its own object;
// one served everywhere, or stored before bindings, becomes root's and
// stays served everywhere. What the new layout holds is left alone, and a
// second run finds nothing to do.
func TestSplitBoundCRDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)
	store := crdStorage(t, ds)
	perSpace := spaces.Decorate(store, ResourcePrefix(crdResource))

	widgets := storeShared(ctx, t, store, sharedCRD("widgets.example.com", "b,a"))
	gadgets := storeShared(ctx, t, store, sharedCRD("gadgets.example.com", spaces.AllSpaces))
	legacies := storeShared(ctx, t, store, sharedCRD("legacies.example.com", "-"))
	roots := storeShared(ctx, t, store, sharedCRD("roots.example.com", "b,root"))
	doomed := sharedCRD("doomed.example.com", "c")
	doomed.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)))
	doomed = storeShared(ctx, t, store, doomed)
	// Space c's own CRD, in the new layout already.
	owned := sharedCRD("owned.example.com", "-")
	delete(owned.Annotations, boundBeforeAnnotation)
	require.NoError(t, perSpace.Create(spaces.WithSpace(ctx, "c"), crdKey(owned.Name), owned, nil, 0))
	ownedKey := CRDPrefix() + "/c/owned.example.com"
	ownedRev := modRevisions(ctx, t, cli)[ownedKey]
	require.NotZero(t, ownedRev)

	n, err := SplitBoundCRDs(ctx, cli)
	require.NoError(t, err)
	require.Equal(t, 5, n)

	after := modRevisions(ctx, t, cli)
	for key := range after {
		rest := strings.TrimPrefix(key, CRDPrefix()+"/")
		require.Contains(t, rest, "/", "%s: no key of the old layout is left", key)
	}
	require.Equal(t, ownedRev, after[ownedKey], "the new layout's keys are left alone")
	require.Len(t, after, 8, "a and b's widgets, root and b's roots, root's gadgets and legacies, c's doomed and owned: %v", after)

	a, b := inSpace(ctx, t, perSpace, "a", widgets.Name), inSpace(ctx, t, perSpace, "b", widgets.Name)
	requireCopy(t, widgets, a, "a", false)
	requireCopy(t, widgets, b, "b", false)
	require.Equal(t, widgets.UID, a.UID, "the first space's copy keeps the UID")
	require.NotEqual(t, widgets.UID, b.UID, "each space's CRD is an object of its own")
	for _, space := range []string{spaces.Root, "c"} {
		err := perSpace.Get(spaces.WithSpace(ctx, space), crdKey(widgets.Name), apiserverstorage.GetOptions{}, &apiextensions.CustomResourceDefinition{})
		require.True(t, apiserverstorage.IsNotFound(err), "widgets in %s: %v", space, err)
	}

	for _, shared := range []*apiextensions.CustomResourceDefinition{gadgets, legacies} {
		got := inSpace(ctx, t, perSpace, spaces.Root, shared.Name)
		requireCopy(t, shared, got, spaces.Root, true)
		require.Equal(t, shared.UID, got.UID)
	}

	inRoot, inB := inSpace(ctx, t, perSpace, spaces.Root, roots.Name), inSpace(ctx, t, perSpace, "b", roots.Name)
	requireCopy(t, roots, inRoot, spaces.Root, false)
	requireCopy(t, roots, inB, "b", false)
	require.Equal(t, roots.UID, inRoot.UID, "root's copy keeps the UID")
	require.NotEqual(t, roots.UID, inB.UID)

	got := inSpace(ctx, t, perSpace, "c", doomed.Name)
	requireCopy(t, doomed, got, "c", false)
	require.NotNil(t, got.DeletionTimestamp, "a terminating CRD goes on terminating in its space")

	// Again, on the in-process client the API server's storage uses.
	n, err = SplitBoundCRDs(ctx, ds.local)
	require.NoError(t, err)
	require.Zero(t, n, "a second run has nothing to split")
	require.Equal(t, after, modRevisions(ctx, t, cli), "and writes nothing")
}

// hookedKV calls before ahead of each transaction it commits, with what
// the transaction does when its comparisons hold; an error from before is
// the transaction's, which then is not sent.
type hookedKV struct {
	clientv3.KV
	before func(then []clientv3.Op) error
}

func (h hookedKV) Txn(ctx context.Context) clientv3.Txn {
	return &hookedTxn{Txn: h.KV.Txn(ctx), before: h.before}
}

type hookedTxn struct {
	clientv3.Txn
	then   []clientv3.Op
	before func(then []clientv3.Op) error
}

func (t *hookedTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *hookedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.then, t.Txn = ops, t.Txn.Then(ops...)
	return t
}
func (t *hookedTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *hookedTxn) Commit() (*clientv3.TxnResponse, error) {
	if err := t.before(t.then); err != nil {
		return nil, err
	}
	return t.Txn.Commit()
}

// deletes tells whether ops delete key.
func deletes(ops []clientv3.Op, key string) bool {
	for _, op := range ops {
		if op.IsDelete() && bytes.Equal(op.KeyBytes(), []byte(key)) {
			return true
		}
	}
	return false
}

// A split stopped after it wrote some copies, or all of them, but before it
// deleted the shared CRD, is finished by the next run, which keeps every
// copy already written as it is.
func TestSplitBoundCRDsFinishesAnInterruptedSplit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)
	store := crdStorage(t, ds)
	perSpace := spaces.Decorate(store, ResourcePrefix(crdResource))
	shared := storeShared(ctx, t, store, sharedCRD("widgets.example.com", "a,b,c"))
	oldKey := CRDPrefix() + "/" + shared.Name

	// Space b's copy was written, differently (a later release's, say).
	early := sharedCRD(shared.Name, "-")
	early.UID = "uid-of-the-early-copy"
	early.Labels = map[string]string{"written": "early"}
	require.NoError(t, perSpace.Create(spaces.WithSpace(ctx, "b"), crdKey(shared.Name), early, nil, 0))

	// The process dies as it deletes the shared CRD.
	crash := errors.New("the process died")
	_, err := SplitBoundCRDs(ctx, hookedKV{KV: cli, before: func(then []clientv3.Op) error {
		if deletes(then, oldKey) {
			return crash
		}
		return nil
	}})
	require.ErrorIs(t, err, crash)
	interrupted := modRevisions(ctx, t, cli)
	require.Contains(t, interrupted, oldKey, "the shared CRD is deleted last")
	for _, space := range []string{"a", "b", "c"} {
		require.Contains(t, interrupted, CRDPrefix()+"/"+space+"/"+shared.Name)
	}
	a := inSpace(ctx, t, perSpace, "a", shared.Name)

	n, err := SplitBoundCRDs(ctx, cli)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	after := modRevisions(ctx, t, cli)
	require.NotContains(t, after, oldKey)
	for _, space := range []string{"a", "b", "c"} {
		key := CRDPrefix() + "/" + space + "/" + shared.Name
		require.Equal(t, interrupted[key], after[key], "%s is kept as the first run left it", key)
	}
	require.Equal(t, a, inSpace(ctx, t, perSpace, "a", shared.Name))
	require.Equal(t, shared.UID, a.UID)
	b := inSpace(ctx, t, perSpace, "b", shared.Name)
	require.Equal(t, early.UID, b.UID, "the copy written before is kept")
	require.Equal(t, map[string]string{"written": "early"}, b.Labels)
	requireCopy(t, shared, inSpace(ctx, t, perSpace, "c", shared.Name), "c", false)
}

// A shared CRD changed while it is split (by a server of the old release
// on the same datastore) is split again as it is now: the copies the split
// wrote are brought up to date, a space no longer bound loses the copy the
// split wrote, and a space bound since gets one.
func TestSplitBoundCRDsRedoesAChangedCRD(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)
	store := crdStorage(t, ds)
	perSpace := spaces.Decorate(store, ResourcePrefix(crdResource))
	shared := storeShared(ctx, t, store, sharedCRD("widgets.example.com", "a,b"))
	oldKey := CRDPrefix() + "/" + shared.Name

	changed := false
	n, err := SplitBoundCRDs(ctx, hookedKV{KV: cli, before: func(then []clientv3.Op) error {
		if changed || !deletes(then, oldKey) {
			return nil
		}
		changed = true
		return store.GuaranteedUpdate(ctx, crdKey(shared.Name), &apiextensions.CustomResourceDefinition{}, false, nil,
			apiserverstorage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
				crd := obj.(*apiextensions.CustomResourceDefinition)
				crd.Annotations[spaces.BoundAnnotation] = "a,c"
				crd.Labels["changed"] = "yes"
				return crd, nil
			}), nil)
	}})
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, 1, n)

	now := &apiextensions.CustomResourceDefinition{}
	require.True(t, apiserverstorage.IsNotFound(store.Get(ctx, crdKey(shared.Name), apiserverstorage.GetOptions{}, now)), "the shared CRD is gone")
	err = perSpace.Get(spaces.WithSpace(ctx, "b"), crdKey(shared.Name), apiserverstorage.GetOptions{}, now)
	require.True(t, apiserverstorage.IsNotFound(err), "b is no longer bound: %v", err)
	a, c := inSpace(ctx, t, perSpace, "a", shared.Name), inSpace(ctx, t, perSpace, "c", shared.Name)
	require.Equal(t, shared.UID, a.UID, "a's copy, rewritten, keeps its UID")
	require.NotEqual(t, shared.UID, c.UID)
	for _, got := range []*apiextensions.CustomResourceDefinition{a, c} {
		require.Equal(t, "yes", got.Labels["changed"], "the change is not lost")
		require.NotContains(t, got.Annotations, spaces.BoundAnnotation)
	}
}

// A stored CRD the split cannot read, or whose bindings name no space it
// can move to, stops it with an error naming its key, before anything is
// written or deleted.
func TestSplitBoundCRDsRefusesWhatItCannotRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)
	store := crdStorage(t, ds)
	storeShared(ctx, t, store, sharedCRD("aa.example.com", "a"))
	badKey := CRDPrefix() + "/zz.example.com"

	tests := []struct {
		name string
		raw  string                                  // stored as it is, or
		crd  *apiextensions.CustomResourceDefinition // stored as the server stores it
	}{
		{name: "not JSON", raw: "{not json"},
		{name: "not a CRD", raw: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"zz.example.com"}}`},
		{name: "another version", raw: `{"apiVersion":"apiextensions.k8s.io/v2","kind":"CustomResourceDefinition","metadata":{"name":"zz.example.com"}}`},
		{name: "another name", crd: sharedCRD("other.example.com", "a")},
		{name: "no space", crd: sharedCRD("zz.example.com", "")},
		{name: "invalid space", crd: sharedCRD("zz.example.com", "a,Not_A_Space")},
		{name: "wildcard among spaces", crd: sharedCRD("zz.example.com", "a,*")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.crd != nil {
				require.NoError(t, store.Create(ctx, crdKey("zz.example.com"), tc.crd, nil, 0))
			} else {
				_, err := cli.Put(ctx, badKey, tc.raw)
				require.NoError(t, err)
			}
			before := modRevisions(ctx, t, cli)
			n, err := SplitBoundCRDs(ctx, cli)
			require.ErrorContains(t, err, badKey)
			require.Zero(t, n)
			require.Equal(t, before, modRevisions(ctx, t, cli), "nothing is written or deleted")
			// kine deletes only in a transaction.
			del, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(badKey), "=", before[badKey])).
				Then(clientv3.OpDelete(badKey)).Else(clientv3.OpGet(badKey)).Commit()
			require.NoError(t, err)
			require.True(t, del.Succeeded)
		})
	}

	n, err := SplitBoundCRDs(ctx, cli)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the value gone, the rest is split")
}

// The keys are listed a page at a time: CRDs of the old layout before and
// after more than a page of the new layout's are all split.
func TestSplitBoundCRDsPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)
	store := crdStorage(t, ds)
	storeShared(ctx, t, store, sharedCRD("aa.example.com", "a"))
	storeShared(ctx, t, store, sharedCRD("zz.example.com", "b"))
	// Between them ("m" sorts after "aa." and before "zz."), listed only.
	for i := range splitPage + 10 {
		_, err := cli.Put(ctx, fmt.Sprintf("%s/m/x%04d.example.com", CRDPrefix(), i), "not read")
		require.NoError(t, err)
	}

	n, err := SplitBoundCRDs(ctx, cli)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	revs := modRevisions(ctx, t, cli)
	require.Contains(t, revs, CRDPrefix()+"/a/aa.example.com")
	require.Contains(t, revs, CRDPrefix()+"/b/zz.example.com")
	require.Len(t, revs, splitPage+12)
}
