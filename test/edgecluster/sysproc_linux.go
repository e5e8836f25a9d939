// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import "syscall"

// sysProcAttr puts a child in a process group of its own, so that it and any
// process it starts can be signalled together, and so that a Ctrl-C on the
// terminal reaches only this process, which then stops the cluster in order.
// Pdeathsig kills the child if this process dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
