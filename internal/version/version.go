// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version holds the build's version and the Kubernetes API version
// the server emulates: what the CLI, the server and the syncer all report,
// in a leaf package that imports nothing of theirs.
package version

import "runtime/debug"

// Version is stamped at build time with -ldflags -X; unstamped builds
// report the VCS revision Go recorded, if any (see String).
var Version = "v0.0.0-dev"

// Kubernetes is the Kubernetes API version the server emulates.
const Kubernetes = "1.37"

// String describes this build: Version, with the VCS revision appended to
// an unstamped build's.
func String() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 && v == "v0.0.0-dev" {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}
