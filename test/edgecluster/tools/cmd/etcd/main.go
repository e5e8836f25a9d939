// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command etcd is etcd's server (go.etcd.io/etcd/server/v3/etcdmain), built
// from the version pinned in this module's go.mod. It is the storage of the
// edgecluster test control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
