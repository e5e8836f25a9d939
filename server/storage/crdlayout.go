// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CRDLayout tells how the datastore holds CRDs: once for every space they
// are bound to (<prefix>/<name>, split by SplitBoundCRDs), per space
// (<prefix>/<space>/<name>), or both, mid-split.
func CRDLayout(ctx context.Context, kv clientv3.KV) (once, perSpace bool, err error) {
	prefix := CRDPrefix() + "/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	list := WithoutRemainingCount(ctx)
	for from := prefix; ; {
		resp, err := kv.Get(list, from, clientv3.WithRange(end), clientv3.WithLimit(splitPage), clientv3.WithKeysOnly())
		if err != nil {
			return false, false, fmt.Errorf("listing %s: %w", prefix, err)
		}
		for _, item := range resp.Kvs {
			if name, ok := bytes.CutPrefix(item.Key, []byte(prefix)); ok && len(name) > 0 {
				if bytes.IndexByte(name, '/') >= 0 {
					perSpace = true
				} else {
					once = true
				}
			}
			if once && perSpace {
				return true, true, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return once, perSpace, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Values calls each with every key and value under prefix, a page at a
// time.
func Values(ctx context.Context, kv clientv3.KV, prefix string, each func(key string, value []byte) error) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	list := WithoutRemainingCount(ctx)
	for from := prefix; ; {
		resp, err := kv.Get(list, from, clientv3.WithRange(end), clientv3.WithLimit(splitPage))
		if err != nil {
			return fmt.Errorf("listing %s: %w", prefix, err)
		}
		for _, item := range resp.Kvs {
			if err := each(string(item.Key), item.Value); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
