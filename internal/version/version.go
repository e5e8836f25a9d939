// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version holds the build's version and the Kubernetes version the
// server is built from: what the CLI, the server and the syncer all report,
// in a leaf package that imports nothing of theirs.
package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// Version is stamped at build time with -ldflags -X; unstamped builds
// report the VCS revision Go recorded, if any (see String).
var Version = "v0.0.0-dev"

// Commit is the commit the binary is built from, stamped with -ldflags -X
// by make build and make image (which need not let Go record the VCS
// state: $GOFLAGS may say -buildvcs=false); unstamped builds report the
// revision Go recorded, if any.
var Commit = ""

// Kubernetes is the Kubernetes API version the server emulates: the minor
// version of the libraries it is built from.
const Kubernetes = "1.37"

// kubernetesFallback is the Kubernetes release of the libraries in go.mod,
// for a binary whose build information lists no module (a test binary
// built in a way that records none).
const kubernetesFallback = "v1.37.0"

// String describes this build: Version, with the VCS revision appended to
// an unstamped build's.
func String() string {
	v := Version
	if rev, _, _ := vcs(); v == "v0.0.0-dev" && len(rev) >= 12 {
		v += "+" + rev[:12]
	}
	return v
}

// Line is what `kubestellar version` and `kubestellar --version` print:
// the version, the commit the binary is built from when Go recorded it
// (-dirty for a modified tree), the Kubernetes release of its libraries,
// the Go release and the platform.
func Line() string {
	rev, _, modified := vcs()
	if Commit != "" {
		rev, modified = Commit, strings.HasSuffix(Version, "-dirty")
	}
	commit := ""
	if len(rev) >= 12 {
		commit = "commit " + rev[:12]
		if modified {
			commit += "-dirty"
		}
		commit += ", "
	}
	return fmt.Sprintf("kubestellar %s (%sKubernetes %s, %s, %s/%s)",
		String(), commit, KubernetesRelease(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// KubernetesRelease returns the Kubernetes release whose libraries this
// binary is built with, from the build information Go records in every
// binary (k8s.io/apiserver v0.37.2 is Kubernetes v1.37.2), so that every
// build path reports it, go build and go run included.
func KubernetesRelease() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return kubernetesFallback
	}
	for _, m := range info.Deps {
		if m.Path != "k8s.io/apiserver" {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if rest, ok := strings.CutPrefix(m.Version, "v0."); ok {
			return "v1." + rest
		}
	}
	return kubernetesFallback
}

// vcs returns what Go recorded of the source tree: its revision, its
// commit time and whether it had uncommitted changes.
func vcs() (revision, time string, modified bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, time, modified
}

// notBuildMetadata is what SemVer build metadata may not hold.
var notBuildMetadata = regexp.MustCompile(`[^0-9A-Za-z.-]+`)

// Info is the version the server reports at /version: the Kubernetes
// release of its libraries, with this build in SemVer build metadata
// (v1.37.2+kubestellar.9fa5492), which clients that parse the server's
// version (kubectl, Helm's kubeVersion constraints, the e2e framework)
// read as v1.37.2.
func Info() apimachineryversion.Info {
	release := KubernetesRelease()
	major, minor, _ := strings.Cut(strings.TrimPrefix(release, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	rev, date, modified := vcs()
	if Commit != "" {
		rev = Commit
	}
	build := strings.Trim(notBuildMetadata.ReplaceAllString(strings.TrimPrefix(String(), "v"), "-"), ".-")
	if build == "" {
		build = "dev"
	}
	treeState := "clean"
	if modified || strings.HasSuffix(Version, "-dirty") {
		treeState = "dirty"
	}
	if date == "" {
		date = "1970-01-01T00:00:00Z"
	}
	return apimachineryversion.Info{
		Major: major, Minor: minor,
		GitVersion:   fmt.Sprintf("%s+kubestellar.%s", release, build),
		GitCommit:    rev,
		GitTreeState: treeState,
		BuildDate:    date,
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
}
