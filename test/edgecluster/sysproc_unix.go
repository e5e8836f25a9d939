// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build unix && !linux

package edgecluster

import "syscall"

// sysProcAttr puts a child in a process group of its own, so that it and any
// process it starts can be signalled together, and so that a Ctrl-C on the
// terminal reaches only this process, which then stops the cluster in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
