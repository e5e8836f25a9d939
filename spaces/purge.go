// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// Purger removes stored objects wholesale, beneath the API: everything in a
// deleted space, or every instance of a deleted CRD in every space or in
// the one space whose CRD it was. Each
// delete is an ordinary datastore delete, so watchers see DELETED events.
type Purger struct {
	Client *clientv3.Client
	// KeyPrefix is the API server's key prefix ("/registry").
	KeyPrefix string
	// Global lists the resource prefixes (/<group>/<resource>) that are not
	// partitioned by space; they are never purged with a space.
	Global []string
	// BuiltIn tells whether a resource is one the server serves itself,
	// whose objects PurgeResource never deletes, whatever a CRD claimed.
	BuiltIn func(schema.GroupResource) bool
}

// pageSize bounds one datastore read.
const pageSize = 500

// PurgeSpace deletes every object stored in the named space and returns how many.
func (p *Purger) PurgeSpace(ctx context.Context, space string) (int, error) {
	if space == Root || space == Wildcard || space == "" {
		return 0, fmt.Errorf("space %q cannot be purged", space)
	}
	return p.purge(ctx, p.KeyPrefix+"/", func(key string) bool {
		// /<group>/<resource>/<space>/<name> or .../<space>/<namespace>/<name>
		parts := strings.Split(strings.TrimPrefix(key, p.KeyPrefix+"/"), "/")
		if len(parts) < 4 || parts[2] != space {
			return false
		}
		prefix := "/" + parts[0] + "/" + parts[1]
		for _, g := range p.Global {
			if g == prefix {
				return false
			}
		}
		return true
	})
}

// PurgeResource deletes every object of a resource in every space.
func (p *Purger) PurgeResource(ctx context.Context, gr schema.GroupResource) (int, error) {
	return p.PurgeResourceOutside(ctx, gr, func(string) bool { return false })
}

// PurgeResourceOutside deletes every object of a resource in the spaces
// keep refuses: a CRD's instances in the spaces that unbound it.
func (p *Purger) PurgeResourceOutside(ctx context.Context, gr schema.GroupResource, keep func(space string) bool) (int, error) {
	prefix, err := p.resourcePrefix(gr)
	if err != nil {
		return 0, err
	}
	return p.purge(ctx, prefix, func(key string) bool {
		space, _, _ := strings.Cut(strings.TrimPrefix(key, prefix), "/")
		return !keep(space)
	})
}

// PurgeResourceIn deletes every object of a resource in one space: the
// instances of a CRD of that space's own once it is deleted, where every
// other space's instances of the same resource belong to CRDs of their
// own. Only the space's keys are read.
func (p *Purger) PurgeResourceIn(ctx context.Context, gr schema.GroupResource, space string) (int, error) {
	if err := ValidateName(space); err != nil {
		// An empty name, the wildcard or a name with a slash would make
		// a prefix of more than one space's keys.
		return 0, fmt.Errorf("the objects of space %q cannot be purged: %w", space, err)
	}
	prefix, err := p.resourcePrefix(gr)
	if err != nil {
		return 0, err
	}
	return p.purge(ctx, prefix+space+"/", func(string) bool { return true })
}

// resourcePrefix is the prefix of every stored key of a resource, in
// every space (<KeyPrefix>/<group>/<resource>/), refusing the built-in
// resources, whose objects no CRD owns.
func (p *Purger) resourcePrefix(gr schema.GroupResource) (string, error) {
	if p.BuiltIn != nil && p.BuiltIn(gr) {
		return "", fmt.Errorf("%s is a built-in resource: its objects are never purged with a CRD", gr)
	}
	group := gr.Group
	if group == "" {
		group = "core"
	}
	return p.KeyPrefix + "/" + group + "/" + gr.Resource + "/", nil
}

func (p *Purger) purge(ctx context.Context, prefix string, match func(key string) bool) (int, error) {
	logger := klog.FromContext(ctx)
	end := clientv3.GetPrefixRangeEnd(prefix)
	deleted := 0
	from := prefix
	for {
		resp, err := p.Client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(pageSize), clientv3.WithKeysOnly())
		if err != nil {
			return deleted, fmt.Errorf("listing %s: %w", prefix, err)
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			if !match(key) {
				continue
			}
			txn, err := p.Client.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(key)).
				Else(clientv3.OpGet(key)). // the only delete transaction kine accepts has this shape
				Commit()
			if err != nil {
				return deleted, fmt.Errorf("deleting %s: %w", key, err)
			}
			if txn.Succeeded {
				deleted++
			}
			// A failed compare means the object changed meanwhile: the
			// caller purges again until nothing is left.
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	logger.V(2).Info("purged stored objects", "prefix", prefix, "deleted", deleted)
	return deleted, nil
}
