// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/spaces"
)

// The upgrade to CRDs per space (docs/design/crds.md, issue 52).
//
// Before it, a CRD was stored once for every space, at
// <CRDPrefix>/<name>, with the spaces that served it in
// spaces.BoundAnnotation (sorted and comma-separated, or spaces.AllSpaces;
// none at all meant every space too). Since, a CRD is an object of its
// space, stored like every cluster-scoped object at
// <CRDPrefix>/<space>/<name> with spaces.Annotation naming the space; a CRD
// served in every space is the root space's, still marked
// spaces.AllSpaces. SplitBoundCRDs moves the one to the other when the
// server starts.
//
// Downgrading to a release from before CRDs were per space is not
// supported once the split has run: that release reads CRDs at
// <CRDPrefix>/<name> only, so it would see none of the moved CRDs, and
// would neither serve them nor their instances. A first split that finds a
// value it cannot read stops before it moves anything (it reads every CRD
// before it writes any), so that release can still be run on the datastore
// then.

// CRDPrefix returns the prefix of every stored CRD's key, without the
// slash that follows it.
func CRDPrefix() string { return KeyPrefix + ResourcePrefix(crdResource) }

// boundBeforeAnnotation is what the old layout stored beside
// spaces.BoundAnnotation for its watches (the bindings before the write);
// nothing reads it now.
const boundBeforeAnnotation = "tenancy.kubestellar.io/bound-spaces-before"

// splitPage bounds the keys one read of SplitBoundCRDs lists. Values are
// read one CRD at a time: a CRD's schema may be a megabyte.
const splitPage = 500

// SplitBoundCRDs moves every CRD stored in the old layout, once for all the
// spaces bound to it, into the spaces that serve it, and returns how many
// it moved. A CRD bound to every space (or without bindings, as stored
// before they existed) goes to the root space, marked spaces.AllSpaces; any
// other gets one copy in each space bound, without the bindings (which are
// not a space's business). Each copy is the CRD it served there: its
// spec, status (conditions and accepted names), finalizers, labels, other
// annotations and timestamps are kept. Keys already in the new layout are
// left alone. It runs once at the server's start, before anything is
// served.
//
// It is safe to stop at any point and run again. Each copy is created only
// if its key is free, so a copy an interrupted run wrote (or a space wrote
// since) is kept as it is; the old key is deleted only once every copy
// exists, and only if unchanged since it was read: a crash in between
// leaves it, and the next start finishes it. A CRD changed meanwhile (by
// another server on the same datastore) is read again and split again, the
// copies this run wrote brought up to date. Every CRD is read, and its
// bindings checked, before anything is written: a value that cannot be read
// is an error naming its key, and nothing is moved or deleted.
func SplitBoundCRDs(ctx context.Context, kv clientv3.KV) (int, error) {
	logger := klog.FromContext(ctx)
	codec, err := newCRDCodec()
	if err != nil {
		return 0, err
	}
	prefix := CRDPrefix() + "/"
	var old []string
	err = oldLayoutKeys(ctx, kv, prefix, func(key string) error {
		resp, err := kv.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("reading the CRD at %s: %w", key, err)
		}
		if len(resp.Kvs) == 0 {
			return nil // deleted since listed
		}
		crd, err := codec.decode(key, resp.Kvs[0].Value)
		if err != nil {
			return err
		}
		if _, _, err := spacesOf(key, crd); err != nil {
			return err
		}
		old = append(old, key)
		return nil
	})
	if err != nil {
		return 0, err
	}
	split := 0
	for _, key := range old {
		moved, err := splitCRD(ctx, kv, codec, prefix, key)
		if err != nil {
			return split, err
		}
		if moved == nil {
			continue // gone meanwhile: another server split it
		}
		kvs := []any{"crd", strings.TrimPrefix(key, prefix), "spaces", moved.spaces}
		if len(moved.kept) > 0 {
			// Copies an interrupted split (or another server) wrote.
			kvs = append(kvs, "keptExisting", moved.kept)
		}
		logger.Info("moved a CRD into the spaces that serve it", kvs...)
		split++
	}
	return split, nil
}

// oldLayoutKeys calls each with every key under prefix that has one
// segment after it (<prefix><name>), a page at a time. Keys of the new
// layout (<prefix><space>/<name>) are skipped.
func oldLayoutKeys(ctx context.Context, kv clientv3.KV, prefix string, each func(key string) error) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	// The pages need to say whether more follows, not how much.
	list := WithoutRemainingCount(ctx)
	for from := prefix; ; {
		resp, err := kv.Get(list, from, clientv3.WithRange(end), clientv3.WithLimit(splitPage), clientv3.WithKeysOnly())
		if err != nil {
			return fmt.Errorf("listing %s: %w", prefix, err)
		}
		for _, item := range resp.Kvs {
			name, ok := bytes.CutPrefix(item.Key, []byte(prefix))
			if !ok || len(name) == 0 || bytes.IndexByte(name, '/') >= 0 {
				continue
			}
			if err := each(string(item.Key)); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// moved says where splitCRD put a CRD: the spaces serving it, and those of
// them whose copy existed already and was kept.
type moved struct {
	spaces, kept []string
}

// splitCRD writes the copies of the CRD stored at key, then deletes key. It
// returns nil if key is gone before it could delete it.
func splitCRD(ctx context.Context, kv clientv3.KV, codec *crdCodec, prefix, key string) (*moved, error) {
	resp, err := kv.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading the CRD at %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	cur := resp.Kvs[0]
	// uids gives each space's copy its UID once, kept when the CRD is
	// split again after a change.
	uids := map[string]types.UID{}
	// mine are the copies this call created, at their revisions: those it
	// may bring up to date, or delete, if the CRD changes under it.
	mine := map[string]int64{}
	for {
		crd, err := codec.decode(key, cur.Value)
		if err != nil {
			return nil, err
		}
		names, all, err := spacesOf(key, crd)
		if err != nil {
			return nil, err
		}
		result := &moved{spaces: names}
		for i, space := range names {
			uid, ok := uids[space]
			if !ok {
				// Each space's CRD is an object of its own, as if the
				// space had created it, and a UID names one object: the
				// copies get fresh ones, but for the first (root's, when
				// root is bound), which goes on as the shared object did.
				uid = crd.UID
				for _, other := range uids {
					if other == uid { // root bound only on a second read
						uid = ""
					}
				}
				if i > 0 || uid == "" {
					uid = uuid.NewUUID()
				}
				uids[space] = uid
			}
			copyKey := prefix + space + "/" + crd.Name
			value, err := codec.encodeCopy(crd, space, uid, all)
			if err != nil {
				return nil, fmt.Errorf("encoding the copy of %s for space %s: %w", key, space, err)
			}
			var txn clientv3.Txn
			if rev, ok := mine[space]; ok {
				// Written by this call from an older read of the CRD:
				// bring it up to date, unless it changed since. The
				// transactions are those kine accepts: an update compares
				// the mod revision and reads the key when that fails, a
				// create compares it to 0 and does nothing else.
				txn = kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(copyKey), "=", rev)).
					Then(clientv3.OpPut(copyKey, string(value))).
					Else(clientv3.OpGet(copyKey))
			} else {
				txn = kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(copyKey), "=", 0)).
					Then(clientv3.OpPut(copyKey, string(value)))
			}
			put, err := txn.Commit()
			if err != nil {
				return nil, fmt.Errorf("writing %s: %w", copyKey, err)
			}
			if put.Succeeded {
				mine[space] = put.Header.Revision
			} else {
				// A copy written before (by a run that stopped before it
				// deleted key) is kept as it is.
				delete(mine, space)
				result.kept = append(result.kept, space)
			}
		}
		for space, rev := range mine {
			if slices.Contains(names, space) {
				continue
			}
			// The CRD changed meanwhile and no longer serves space: the
			// copy this call wrote goes, if nothing changed it since.
			copyKey := prefix + space + "/" + crd.Name
			if _, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(copyKey), "=", rev)).
				Then(clientv3.OpDelete(copyKey)).
				Else(clientv3.OpGet(copyKey)).
				Commit(); err != nil {
				return nil, fmt.Errorf("deleting %s: %w", copyKey, err)
			}
			delete(mine, space)
		}
		// Last, the shared object, if unchanged since read.
		del, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)). // the only delete transaction kine accepts has this shape
			Commit()
		if err != nil {
			return nil, fmt.Errorf("deleting %s: %w", key, err)
		}
		if del.Succeeded {
			return result, nil
		}
		var now []*mvccpb.KeyValue
		if len(del.Responses) > 0 {
			if r := del.Responses[0].GetResponseRange(); r != nil {
				now = r.Kvs
			}
		}
		if len(now) == 0 {
			// Deleted meanwhile: by another server's split, which wrote
			// the same copies (or kept this call's).
			return nil, nil
		}
		cur = now[0]
	}
}

// spacesOf returns the spaces a CRD of the old layout moves to, and whether
// it is served in every space: then root alone, else the spaces bound, root
// first when bound (its copy keeps the CRD's UID).
func spacesOf(key string, crd *apiextensionsv1.CustomResourceDefinition) ([]string, bool, error) {
	b := spaces.BindingsOf(crd.Annotations)
	if b.All() {
		return []string{spaces.Root}, true, nil
	}
	names := b.Spaces()
	if len(names) == 0 {
		return nil, false, fmt.Errorf("the CRD at %s is bound to no space (%s=%q): set it to the spaces that should keep it, or delete the key",
			key, spaces.BoundAnnotation, crd.Annotations[spaces.BoundAnnotation])
	}
	for _, name := range names {
		if err := spaces.ValidateName(name); err != nil {
			return nil, false, fmt.Errorf("the CRD at %s is bound to a space that cannot be: %w", key, err)
		}
	}
	if i := slices.Index(names, spaces.Root); i > 0 {
		names = append([]string{spaces.Root}, slices.Delete(names, i, i+1)...)
	}
	return names, false, nil
}

// crdCodec reads and writes stored CRDs as the server's storage of them
// does (apiextensionsCodec in server/config.go). It writes JSON of
// apiextensions.k8s.io/v1, with its apiVersion and kind, nothing before it
// (protobuf would start with "k8s\x00") and no resource version (the
// storage takes it from the datastore), as the storage writes CRDs; it
// reads JSON or protobuf, as the storage reads them.
type crdCodec struct {
	decoder runtime.Decoder
	json    *serializerjson.Serializer
}

func newCRDCodec() (*crdCodec, error) {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return &crdCodec{
		decoder: serializer.NewCodecFactory(scheme).UniversalDeserializer(),
		json:    serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme, scheme, serializerjson.SerializerOptions{}),
	}, nil
}

// decode reads the CRD stored at key.
func (c *crdCodec) decode(key string, value []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	obj, _, err := c.decoder.Decode(value, nil, &apiextensionsv1.CustomResourceDefinition{})
	if err != nil {
		return nil, fmt.Errorf("the CRD at %s cannot be read: %w", key, err)
	}
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil, fmt.Errorf("the value at %s is a %T, not a CRD", key, obj)
	}
	if name := key[strings.LastIndexByte(key, '/')+1:]; crd.Name != name {
		return nil, fmt.Errorf("the CRD at %s is named %q", key, crd.Name)
	}
	return crd, nil
}

// encodeCopy encodes space's copy of crd, with uid, marked served in every
// space when all is set.
func (c *crdCodec) encodeCopy(crd *apiextensionsv1.CustomResourceDefinition, space string, uid types.UID, all bool) ([]byte, error) {
	cp := crd.DeepCopy()
	cp.APIVersion, cp.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	cp.ResourceVersion = ""
	cp.UID = uid
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	delete(cp.Annotations, spaces.BoundAnnotation)
	delete(cp.Annotations, boundBeforeAnnotation)
	if all {
		cp.Annotations[spaces.BoundAnnotation] = spaces.AllSpaces
	}
	cp.Annotations[spaces.Annotation] = space
	var buf bytes.Buffer
	if err := c.json.Encode(cp, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
