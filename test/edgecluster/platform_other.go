// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package edgecluster

import (
	"context"
	"errors"
	"syscall"
)

// LockFile takes an exclusive lock on path (Unix only).
func LockFile(context.Context, string, string, Logf) (func(), error) { return nil, errUnsupported }

func signalGroup(int, syscall.Signal) error { return errUnsupported }

func processExists(int) bool { return false }

func sysProcAttr() *syscall.SysProcAttr { return nil }

var errUnsupported = errors.New("edgecluster runs on Unix-like systems only")
