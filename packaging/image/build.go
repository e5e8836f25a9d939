// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's fixed facts, which the manifest (packaging/chart) relies on.
const (
	// Entrypoint is the binary's path in the image.
	Entrypoint = "/usr/bin/kubestellar"
	// UID and GID run the image: distroless's "nonroot", numeric so that
	// the kubelet can check runAsNonRoot without an /etc/passwd lookup.
	UID, GID = 65532, 65532
	// CAFile is where Go (and most TLS stacks) look for the system's roots.
	CAFile = "/etc/ssl/certs/ca-certificates.crt"
)

// Binary is a static kubestellar binary for one platform.
type Binary struct {
	OS, Arch, Path string
}

// Options describe the image.
type Options struct {
	Binaries []Binary
	// Created is the image's creation time and every file's mtime.
	Created time.Time
	// Version, Revision and Source become OCI labels.
	Version, Revision, Source string
	// Tag names the index in the layout.
	Tag string
}

// elfMachines are the ELF machines of the platforms Go builds for here.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV,
}

// Build returns the multi-platform index of the binaries' images.
func Build(o Options) (v1.ImageIndex, error) {
	roots, err := caBundle()
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range o.Binaries {
		img, err := buildImage(o, b, roots)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", b.OS, b.Arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.OS, Architecture: b.Arch}},
		})
	}
	return mutate.Annotations(idx, labels(o)).(v1.ImageIndex), nil
}

func labels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    "kubestellar",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
	}
	if o.Version != "" {
		l["org.opencontainers.image.version"] = o.Version
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

func buildImage(o Options, b Binary, roots []byte) (v1.Image, error) {
	binary, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(binary, b.Arch); err != nil {
		return nil, fmt.Errorf("%s: %w", b.Path, err)
	}
	fsTar, err := filesystem(o.Created, binary, roots)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(fsTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "packaging/image: kubestellar " + o.Version, Comment: "the static binary, CA roots, /etc/passwd"},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = b.OS, b.Arch
	cfg.Created = created
	cfg.Author = "The KubeStellar Authors"
	cfg.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		User:       fmt.Sprintf("%d:%d", UID, GID),
		WorkingDir: "/home/nonroot",
		Env:        []string{"PATH=/usr/bin", "HOME=/home/nonroot", "SSL_CERT_FILE=" + CAFile},
		Labels:     labels(o),
	}
	return mutate.ConfigFile(img, cfg)
}

// checkStatic refuses a binary for another architecture, or one that
// needs a dynamic loader the image does not have (a cgo build).
func checkStatic(binary []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	want, known := elfMachines[arch]
	if !known {
		return fmt.Errorf("no image for architecture %q (known: amd64, arm64, arm, ppc64le, s390x, riscv64)", arch)
	}
	if f.Machine != want {
		return fmt.Errorf("built for %s, not %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked: the image has no C library; build with CGO_ENABLED=0")
		}
	}
	return nil
}

// caBundle is the Mozilla roots that golang.org/x/crypto/x509roots/fallback
// carries, as PEM, without those distrusted after a date (a PEM file cannot
// say so): the module's version pins them, so the layer does not depend on
// the build machine's ca-certificates.
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("the CA bundle is empty")
	}
	return buf.Bytes(), nil
}

// filesystem is the image's one layer: a tar whose every header is fixed
// by the inputs (owner, mode, mtime), in a fixed order.
func filesystem(mtime time.Time, binary, roots []byte) ([]byte, error) {
	const passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	const group = "root:x:0:\nnonroot:x:65532:\n"
	// Go's resolver reads it to look in /etc/hosts before DNS.
	const nsswitch = "hosts: files dns\n"
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o444, data: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o444, data: []byte(nsswitch)},
		{name: "etc/passwd", mode: 0o444, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CAFile[1:], mode: 0o444, data: roots},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: GID},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/bin/", mode: 0o755},
		{name: Entrypoint[1:], mode: 0o555, data: binary},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout replaces dir with an OCI image layout holding idx under tag,
// and returns the index's digest.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) (v1.Hash, error) {
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// Push writes idx to the registry reference ref and returns the reference
// by digest. Registries on localhost are spoken to over plain HTTP.
func Push(ctx context.Context, ref string, idx v1.ImageIndex) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("-push %q: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("pushing to %s: %w", r, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return r.Context().Digest(digest.String()).String(), nil
}
