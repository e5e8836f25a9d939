//go:build !unix

package edgecluster

import (
	"context"
	"syscall"
)

func lockFile(context.Context, string, Logf) (func(), error) { return nil, errUnsupported }

func signalGroup(int, syscall.Signal) error { return errUnsupported }

func processExists(int) bool { return false }

func sysProcAttr() *syscall.SysProcAttr { return nil }
