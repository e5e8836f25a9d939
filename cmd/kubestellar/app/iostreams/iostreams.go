// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package iostreams holds the standard streams every command writes to.
package iostreams

import "io"

// IOStreams are the standard streams of a command.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}
