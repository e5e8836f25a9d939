// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
)

// layoutEnv names the OCI layout `make image` wrote; make test-image sets
// it, and the second one, built again from the same commit, for the
// reproducibility check.
const (
	layoutEnv      = "KUBESTELLAR_IMAGE_LAYOUT"
	againEnv       = "KUBESTELLAR_IMAGE_LAYOUT_AGAIN"
	platformsEnv   = "KUBESTELLAR_IMAGE_PLATFORMS"
	defaultWanted  = "linux/amd64 linux/arm64"
	nonRootUser    = "65532:65532"
	binaryInLayout = "usr/bin/kubestellar"
)

// wantFiles is everything the image holds: no shell, no package manager,
// nothing executable but the binary.
var wantFiles = []string{
	"etc", "etc/group", "etc/nsswitch.conf", "etc/passwd", "etc/ssl", "etc/ssl/certs",
	"etc/ssl/certs/ca-certificates.crt", "home", "home/nonroot", "tmp", "usr", "usr/bin", binaryInLayout,
}

func madeLayout(t *testing.T, env string) layout.Path {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		t.Skipf("$%s is not set: make test-image builds the image and runs this test", env)
	}
	p, err := layout.FromPath(dir)
	require.NoError(t, err, "reading the OCI layout make image wrote")
	return p
}

// TestImage reads the layout make image wrote: one image per platform,
// each running the static binary as a non-root user, with nothing else
// executable in it, and the host's binary runs and names its commit.
func TestImage(t *testing.T) {
	p := madeLayout(t, layoutEnv)
	idx, err := p.ImageIndex()
	require.NoError(t, err)
	outer, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, outer.Manifests, 1, "the layout holds one index, the multi-platform one")
	require.Equal(t, "latest", outer.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	multi, err := idx.ImageIndex(outer.Manifests[0].Digest)
	require.NoError(t, err)
	m, err := multi.IndexManifest()
	require.NoError(t, err)
	revision := m.Annotations["org.opencontainers.image.revision"]
	require.Len(t, revision, 40, "the index names the commit it is built from")

	want := strings.Fields(os.Getenv(platformsEnv))
	if len(want) == 0 {
		want = strings.Fields(defaultWanted)
	}
	var got []string
	for _, desc := range m.Manifests {
		require.NotNil(t, desc.Platform)
		platform := desc.Platform.OS + "/" + desc.Platform.Architecture
		got = append(got, platform)
		t.Run(platform, func(t *testing.T) {
			img, err := multi.Image(desc.Digest)
			require.NoError(t, err)
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			require.Equal(t, desc.Platform.OS, cfg.OS)
			require.Equal(t, desc.Platform.Architecture, cfg.Architecture)
			require.Equal(t, []string{Entrypoint}, cfg.Config.Entrypoint, "the entrypoint is the kubestellar binary")
			require.Empty(t, cfg.Config.Cmd)
			require.Equal(t, nonRootUser, cfg.Config.User, "a numeric non-root user, so that runAsNonRoot can be checked")
			require.Equal(t, revision, cfg.Config.Labels["org.opencontainers.image.revision"])

			files, binary := contents(t, img)
			require.Equal(t, wantFiles, names(files), "the image holds the binary and what a non-root process expects, nothing else")
			require.Equal(t, []int{UID, GID}, []int{files["home/nonroot"].Uid, files["home/nonroot"].Gid}, "nonroot owns its home")
			require.EqualValues(t, 0o1777, files["tmp"].Mode)
			for name, h := range files {
				if name != "home/nonroot" {
					require.Equal(t, []int{0, 0}, []int{h.Uid, h.Gid}, "%s belongs to root: the process cannot change it", name)
				}
				if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
					require.Equal(t, binaryInLayout, name, "the only executable is the binary: no shell")
				}
			}
			require.EqualValues(t, 0o555, files[binaryInLayout].Mode)
			f, err := elf.NewFile(bytes.NewReader(binary))
			require.NoError(t, err)
			require.Equal(t, elfMachines[desc.Platform.Architecture], f.Machine)
			for _, prog := range f.Progs {
				require.NotEqual(t, elf.PT_INTERP, prog.Type, "the binary is static")
			}
			require.Contains(t, string(files["etc/passwd"].data), "nonroot:x:65532:65532:")
			require.Greater(t, strings.Count(string(files["etc/ssl/certs/ca-certificates.crt"].data), "BEGIN CERTIFICATE"), 100)

			if platform != runtime.GOOS+"/"+runtime.GOARCH {
				return
			}
			exe := filepath.Join(t.TempDir(), "kubestellar")
			require.NoError(t, os.WriteFile(exe, binary, 0o755))
			out, err := exec.Command(exe, "--version").CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "commit "+revision[:12], "the binary in the image names its commit")
		})
	}
	sort.Strings(got)
	sort.Strings(want)
	require.Equal(t, want, got, "one image per platform")
}

// TestImageIsReproducible: make test-image builds the image twice from
// the commit, into two layouts, and they are one digest; and the builder
// alone, given the binaries back, makes that digest again.
func TestImageIsReproducible(t *testing.T) {
	p := madeLayout(t, layoutEnv)
	again := madeLayout(t, againEnv)
	first, err := p.ImageIndex()
	require.NoError(t, err)
	second, err := again.ImageIndex()
	require.NoError(t, err)
	a, err := first.IndexManifest()
	require.NoError(t, err)
	b, err := second.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, a.Manifests[0].Digest, b.Manifests[0].Digest, "two builds of one commit are one image")

	multi, err := first.ImageIndex(a.Manifests[0].Digest)
	require.NoError(t, err)
	m, err := multi.IndexManifest()
	require.NoError(t, err)
	o := Options{
		Version:  m.Annotations["org.opencontainers.image.version"],
		Revision: m.Annotations["org.opencontainers.image.revision"],
		Source:   m.Annotations["org.opencontainers.image.source"],
	}
	o.Created, err = time.Parse(time.RFC3339, m.Annotations["org.opencontainers.image.created"])
	require.NoError(t, err)
	dir := t.TempDir()
	for _, desc := range m.Manifests {
		img, err := multi.Image(desc.Digest)
		require.NoError(t, err)
		_, binary := contents(t, img)
		path := filepath.Join(dir, desc.Platform.Architecture)
		require.NoError(t, os.WriteFile(path, binary, 0o755))
		o.Binaries = append(o.Binaries, Binary{OS: desc.Platform.OS, Arch: desc.Platform.Architecture, Path: path})
	}
	rebuilt, err := Build(o)
	require.NoError(t, err)
	digest, err := rebuilt.Digest()
	require.NoError(t, err)
	require.Equal(t, a.Manifests[0].Digest, digest, "the builder makes the same image of the same binaries")
}

type file struct {
	*tar.Header
	data []byte
}

func contents(t *testing.T, img v1.Image) (map[string]file, []byte) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = file{Header: h, data: data}
	}
	return files, files[binaryInLayout].data
}

func names(files map[string]file) []string {
	var n []string
	for name := range files {
		n = append(n, name)
	}
	sort.Strings(n)
	return n
}

// fakeBinary is a tiny static ELF for arch: this test's own binary is
// neither tiny nor, under -race, static, so a Go program is built.
func fakeBinary(t *testing.T, arch string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() { println(\"kubestellar\") }\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fake\ngo 1.26\n"), 0o644))
	cmd := exec.Command("go", "build", "-trimpath", "-o", "kubestellar", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "kubestellar")
}

// TestBuildRefuses: a binary the image could not run is refused by name.
func TestBuildRefuses(t *testing.T) {
	amd64 := fakeBinary(t, "amd64")
	created := time.Unix(1700000000, 0).UTC()
	dynamic, err := exec.LookPath("sh")
	require.NoError(t, err)
	text := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755))
	for _, tc := range []struct {
		name string
		b    Binary
		err  string
	}{
		{"another architecture", Binary{OS: "linux", Arch: "arm64", Path: amd64}, "built for EM_X86_64, not arm64"},
		{"dynamically linked", Binary{OS: "linux", Arch: runtime.GOARCH, Path: dynamic}, "dynamically linked: the image has no C library; build with CGO_ENABLED=0"},
		{"not a binary", Binary{OS: "linux", Arch: "amd64", Path: text}, "not an ELF binary"},
		{"missing", Binary{OS: "linux", Arch: "amd64", Path: text + ".missing"}, "no such file"},
		{"unknown architecture", Binary{OS: "linux", Arch: "mips", Path: amd64}, `no image for architecture "mips"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(Options{Binaries: []Binary{tc.b}, Created: created})
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestBuildIsDeterministic: the builder's own output depends on its inputs
// only, and the epoch is what the image says it was created.
func TestBuildIsDeterministic(t *testing.T) {
	o := Options{Binaries: []Binary{{OS: "linux", Arch: "amd64", Path: fakeBinary(t, "amd64")}}, Created: time.Unix(1700000000, 0).UTC(), Revision: strings.Repeat("a", 40)}
	first, err := Build(o)
	require.NoError(t, err)
	second, err := Build(o)
	require.NoError(t, err)
	d1, err := first.Digest()
	require.NoError(t, err)
	d2, err := second.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2)

	o.Created = o.Created.Add(time.Second)
	later, err := Build(o)
	require.NoError(t, err)
	d3, err := later.Digest()
	require.NoError(t, err)
	require.NotEqual(t, d1, d3, "the epoch is part of the image")
	m, err := later.IndexManifest()
	require.NoError(t, err)
	img, err := later.Image(m.Manifests[0].Digest)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, o.Created, cfg.Created.UTC())
	files, _ := contents(t, img)
	for name, f := range files {
		require.Equal(t, o.Created, f.ModTime.UTC(), name)
	}
}

// TestPush pushes to a registry on loopback (go-containerregistry's, in
// memory) and pulls the same index back by tag.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	idx, err := Build(Options{Binaries: []Binary{
		{OS: "linux", Arch: "amd64", Path: fakeBinary(t, "amd64")},
		{OS: "linux", Arch: "arm64", Path: fakeBinary(t, "arm64")},
	}, Created: time.Unix(1700000000, 0).UTC()})
	require.NoError(t, err)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/kubestellar/kubestellar:test"
	pushed, err := Push(context.Background(), ref, idx)
	require.NoError(t, err)
	digest, err := idx.Digest()
	require.NoError(t, err)
	require.Equal(t, strings.TrimSuffix(ref, ":test")+"@"+digest.String(), pushed)

	r, err := name.ParseReference(ref)
	require.NoError(t, err)
	pulled, err := remote.Index(r)
	require.NoError(t, err)
	got, err := pulled.Digest()
	require.NoError(t, err)
	require.Equal(t, digest, got)

	_, err = Push(context.Background(), "Not A Reference", idx)
	require.ErrorContains(t, err, `-push "Not A Reference"`)
}

// TestRunFlags: the command's mistakes name the flag.
func TestRunFlags(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-binary", "linux/amd64=x"}, "-out is required"},
		{[]string{"-out", "x"}, "-binary OS/ARCH=PATH is required"},
		{[]string{"-out", "x", "-binary", "linux/amd64=x"}, "-epoch (or $SOURCE_DATE_EPOCH) must be seconds since 1970"},
		{[]string{"-out", "x", "-binary", "linux/amd64=x", "-epoch", "yesterday"}, `got "yesterday"`},
		{[]string{"-out", "x", "-binary", "amd64=x"}, "want OS/ARCH=PATH"},
		{[]string{"-out", "x", "-binary", "linux/amd64=x", "-binary", "linux/amd64=y"}, "linux/amd64 is given twice"},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			require.ErrorContains(t, run(context.Background(), tc.args), tc.err)
		})
	}
}
