// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version is `kubestellar version`.
package version

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/internal/version"
)

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubestellar",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(streams.Out, version.Line())
			return err
		},
	}
}
