#!/usr/bin/env bash
# Builds the kubestellar OCI image (make image) without Docker: the binary
# for each platform, static (CGO_ENABLED=0: kine then uses its pure-Go
# SQLite), with -trimpath, then packaging/image assembles the layers and
# writes an OCI image layout. Every input is fixed by the commit (the
# binaries, and SOURCE_DATE_EPOCH, the commit's time), so one commit gives
# one digest.
#
#   hack/build-image.sh [OUTDIR]     (default _output/image)
#   IMAGE_PLATFORMS='linux/amd64 linux/arm64'   platforms to build
#   IMAGE_PUSH=REGISTRY/REPO:TAG                push the index there too
#   VERSION, SOURCE_DATE_EPOCH                  override the commit's
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(realpath -m "${1:-_output/image}")
platforms=${IMAGE_PLATFORMS:-linux/amd64 linux/arm64}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}
revision=$(git rev-parse HEAD)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
GO=${GO:-go}

args=()
for platform in $platforms; do
  os=${platform%/*} arch=${platform#*/}
  bin=$root/_output/image-bin/$os-$arch/kubestellar
  echo "building kubestellar $version for $platform" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch $GO build -trimpath \
    -ldflags "-s -w -X github.com/kubestellar/kubestellar/internal/version.Version=$version -X github.com/kubestellar/kubestellar/internal/version.Commit=$revision" \
    -o "$bin" ./cmd/kubestellar
  args+=(-binary "$platform=$bin")
done
echo "assembling the image" >&2
$GO -C packaging/image run . -out "$out" -version "$version" -revision "$revision" \
  ${IMAGE_PUSH:+-push "$IMAGE_PUSH"} "${args[@]}"
