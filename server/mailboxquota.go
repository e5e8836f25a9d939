// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestellar/kubestellar/server/admission"
	"github.com/kubestellar/kubestellar/server/storage"
)

// MailboxObjectLimitFlag sets Options.MailboxObjectLimit.
const MailboxObjectLimitFlag = "--mailbox-object-limit"

// objectCounter counts a resource's objects in a space where they are
// stored: in the datastore, so that every server of a cluster counts the
// same. It counts once the kubestellar-spaces hook has connected it,
// which is before any syncer token authenticates.
type objectCounter struct {
	client atomic.Pointer[clientv3.Client]
}

// Count returns how many objects of gr space holds.
func (c *objectCounter) Count(ctx context.Context, gr schema.GroupResource, space string) (int64, error) {
	cli := c.client.Load()
	if cli == nil {
		return 0, errors.New("the datastore is not connected yet")
	}
	resp, err := cli.Get(ctx, storage.KeyPrefix+storage.ResourcePrefix(gr)+"/"+space+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// mailboxQuota is the bound on what syncers create in their mailboxes.
func (c *Config) mailboxQuota() admission.MailboxQuota {
	return admission.MailboxQuota{Max: int64(c.Options.MailboxObjectLimit), Count: c.objects.Count, Flag: MailboxObjectLimitFlag}
}
