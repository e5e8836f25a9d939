// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command image assembles the kubestellar OCI image from binaries already
// built for each platform, without Docker or any daemon, as ko does: one
// layer holding the static binary, the CA roots and the files a non-root
// process expects, on an empty base, with a config whose every field
// comes from the inputs. The same binaries and the same epoch give the
// same digest. It writes an OCI image layout and, when asked, pushes the
// multi-platform index to a registry. hack/build-image.sh (make image)
// builds the binaries and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var (
		binaries platformFlag
		o        Options
		out      = fs.String("out", "", "directory to write the OCI image layout to (replaced)")
		push     = fs.String("push", "", "registry reference to push the index to as well (REGISTRY/REPO:TAG); credentials from ~/.docker/config.json")
		epoch    = fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the image's creation time, in seconds since 1970 (default $SOURCE_DATE_EPOCH): the commit's time keeps the digest the commit's")
	)
	fs.Var(&binaries, "binary", "OS/ARCH=PATH of a static kubestellar binary for that platform; repeat for each platform")
	fs.StringVar(&o.Version, "version", "", "the version the binaries report (a label)")
	fs.StringVar(&o.Revision, "revision", "", "the commit the binaries are built from (a label)")
	fs.StringVar(&o.Source, "source", "https://github.com/kubestellar/kubestellar", "the source repository (a label)")
	fs.StringVar(&o.Tag, "tag", "latest", "the name the index has in the layout (org.opencontainers.image.ref.name)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required: the directory to write the image layout to")
	}
	if len(binaries) == 0 {
		return fmt.Errorf("-binary OS/ARCH=PATH is required, once per platform")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if *epoch == "" || err != nil || secs < 0 {
		return fmt.Errorf("-epoch (or $SOURCE_DATE_EPOCH) must be seconds since 1970, such as the commit's time (git log -1 --format=%%ct); got %q", *epoch)
	}
	o.Created = time.Unix(secs, 0).UTC()
	o.Binaries = binaries
	idx, err := Build(o)
	if err != nil {
		return err
	}
	digest, err := WriteLayout(*out, idx, o.Tag)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s\n", *out, digest)
	if *push != "" {
		pushed, err := Push(ctx, *push, idx)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s\n", pushed)
	}
	return nil
}

// platformFlag collects -binary OS/ARCH=PATH.
type platformFlag []Binary

func (p *platformFlag) String() string {
	var parts []string
	for _, b := range *p {
		parts = append(parts, b.OS+"/"+b.Arch+"="+b.Path)
	}
	return strings.Join(parts, ",")
}

func (p *platformFlag) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	goos, arch, ok2 := strings.Cut(platform, "/")
	if !ok || !ok2 || goos == "" || arch == "" || path == "" {
		return fmt.Errorf("want OS/ARCH=PATH, such as linux/arm64=_output/image-bin/linux-arm64/kubestellar")
	}
	for _, b := range *p {
		if b.OS == goos && b.Arch == arch {
			return fmt.Errorf("%s/%s is given twice", goos, arch)
		}
	}
	*p = append(*p, Binary{OS: goos, Arch: arch, Path: path})
	return nil
}
