// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CRDsStoredPerSpace tells whether the datastore holds a CRD stored per
// space (<prefix>/<space>/<name>), which a server started without
// --crds-per-space would read as a CRD of every space: it refuses to
// start instead.
func CRDsStoredPerSpace(ctx context.Context, kv clientv3.KV) (bool, error) {
	prefix := CRDPrefix() + "/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	list := WithoutRemainingCount(ctx)
	for from := prefix; ; {
		resp, err := kv.Get(list, from, clientv3.WithRange(end), clientv3.WithLimit(splitPage), clientv3.WithKeysOnly())
		if err != nil {
			return false, fmt.Errorf("listing %s: %w", prefix, err)
		}
		for _, item := range resp.Kvs {
			if name, ok := bytes.CutPrefix(item.Key, []byte(prefix)); ok && bytes.IndexByte(name, '/') >= 0 {
				return true, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return false, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
