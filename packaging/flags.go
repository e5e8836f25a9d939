// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"
)

// ChangedFlags renders the flags of fs that were set as arguments,
// --name=value, in the order of their names; a list flag gives one
// argument per element. It reads each flag's Changed, so it works on a flag
// set whose flags were added to, and parsed by, a command's.
func ChangedFlags(fs *pflag.FlagSet) []string {
	var args []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Changed {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

// parseFlags parses args into a fresh flag set made by addFlags, as the
// command named cmd would: an unknown flag or a bad value is an error naming
// the flag, and so is an argument that is not a flag.
func parseFlags(cmd string, addFlags func(*pflag.FlagSet), args []string) (*pflag.FlagSet, error) {
	fs := pflag.NewFlagSet(cmd, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("flags of `kubestellar %s`: %w", cmd, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("flags of `kubestellar %s`: it takes no arguments, but %q was given", cmd, fs.Arg(0))
	}
	return fs, nil
}

// absPaths makes the file paths of the named flags absolute: the service
// does not run where install ran (systemd starts it in /).
func absPaths(fs *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if !f.Changed || f.Value.String() == "" || filepath.IsAbs(f.Value.String()) {
			continue
		}
		abs, err := filepath.Abs(f.Value.String())
		if err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		if err := fs.Set(name, abs); err != nil {
			return err
		}
	}
	return nil
}
