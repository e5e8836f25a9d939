#!/usr/bin/env bash
# Builds the Debian package OUTDIR/kubestellar_<version>_<arch>.deb (make deb)
# from a built binary: /usr/bin/kubestellar, the systemd units (rendered by
# the Go code that `kubestellar server install` uses, through
# hack/gen-units, so they never drift), an example environment file
# (a conffile), and maintainer scripts that make the data dir and reload
# systemd but start nothing. dpkg-deb --root-owner-group: no fakeroot.
#
#   hack/build-deb.sh BINARY GIT_VERSION [OUTDIR]     (DEB_MAINTAINER overrides Maintainer:)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: build-deb.sh BINARY GIT_VERSION [OUTDIR]}
git_version=${2:?usage: build-deb.sh BINARY GIT_VERSION [OUTDIR]}
out=${3:-$root/_output}

# deb_version turns `git describe --tags --always --dirty` into a Debian
# version, which must start with a digit and sort as releases do:
#   v1.2.3 -> 1.2.3, v1.2.3-rc.1 -> 1.2.3~rc.1 (before 1.2.3),
#   v1.2.3-4-gabc1234 -> 1.2.3+4.gabc1234 (after it), abc1234 (no tag) ->
#   0.0.0~gitabc1234, and -dirty -> +dirty.
deb_version() {
  local v=${1#v}
  # A tag looks like 1.2 or 1.2.3; anything else is an abbreviated commit
  # hash (which may well start with a digit).
  if ! printf '%s\n' "$v" | grep -Eq '^[0-9]+\.[0-9]+'; then
    v="0.0.0~git$v"
  fi
  printf '%s\n' "$v" | sed -e 's/-dirty$/+dirty/' \
    -e 's/-\([0-9][0-9]*\)-g\([0-9a-f][0-9a-f]*\)/+\1.g\2/' \
    -e 's/-/~/g' -e 's/[^A-Za-z0-9.+~]/./g'
}

command -v dpkg-deb >/dev/null || { echo "build-deb.sh: dpkg-deb is needed (apt-get install dpkg)" >&2; exit 1; }
[ -x "$bin" ] || { echo "build-deb.sh: $bin is not an executable: run 'make build'" >&2; exit 1; }
version=$(deb_version "$git_version")
arch=$(dpkg --print-architecture)
deb="$out/kubestellar_${version}_${arch}.deb"
staging="$out/deb-staging"

# A cgo binary needs the glibc it was linked against, or newer.
depends=""
if ! command -v readelf >/dev/null || readelf -d "$bin" | grep -q 'NEEDED.*libc\.so'; then
  glibc=""
  if command -v objdump >/dev/null; then
    glibc=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 1 || true)
  fi
  depends="libc6${glibc:+ (>= $glibc)}"
fi

echo "staging kubestellar $version ($arch) in $staging"
rm -rf "$staging"
mkdir -p "$staging/DEBIAN" "$staging/usr/bin"
install -m 0755 "$bin" "$staging/usr/bin/kubestellar"
(cd "$root" && go run ./hack/gen-units -binary /usr/bin/kubestellar -root "$staging")

cat >"$staging/DEBIAN/control" <<EOF
Package: kubestellar
Version: $version
Architecture: $arch
Maintainer: ${DEB_MAINTAINER:-KubeStellar maintainers <kubestellar-dev@googlegroups.com>}
Installed-Size: $(du -sk --exclude=DEBIAN "$staging" | cut -f1)
${depends:+Depends: $depends
}Section: admin
Priority: optional
Homepage: https://github.com/kubestellar/kubestellar
Description: edge and multi-cluster workload management in one binary
 kubestellar runs a multi-cluster workload-management control plane
 (kubestellar.service: kubestellar server start) and, at the edge, the
 syncer of each edge cluster (kubestellar-syncer@NAME.service). Nothing
 starts on install: run 'kubestellar server install [flags]' or
 'kubestellar syncer install ...', or enable the units yourself.
EOF

echo /etc/kubestellar/server.env.example >"$staging/DEBIAN/conffiles"

cat >"$staging/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# kubestellar postinst: makes the server's data dir and tells systemd about
# the units. It starts nothing; on upgrade it restarts what was running.
set -e
case "$1" in
configure)
	mkdir -p /var/lib/kubestellar
	chmod 0700 /var/lib/kubestellar
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
		if [ -n "$2" ]; then
			systemctl --no-block try-restart kubestellar.service 'kubestellar-syncer@*.service' || true
		fi
	fi
	if [ -z "$2" ]; then
		echo "kubestellar: to run the server as a service: kubestellar server install [server start flags]"
	fi
	;;
esac
exit 0
EOF

cat >"$staging/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# kubestellar prerm: on removal, stops and disables the server and every
# syncer instance (where systemd runs); an upgrade leaves them running.
set -e
case "$1" in
remove|deconfigure)
	if [ -d /run/systemd/system ]; then
		systemctl stop kubestellar.service 'kubestellar-syncer@*.service' || true
		units=kubestellar.service
		for link in /etc/systemd/system/*.wants/kubestellar-syncer@*.service; do
			if [ -L "$link" ]; then
				units="$units ${link##*/}"
			fi
		done
		systemctl disable $units || true
	fi
	;;
esac
exit 0
EOF

cat >"$staging/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# kubestellar postrm: on purge, removes the state and configuration of the
# server and the syncers, and the units `kubestellar server install` and
# `kubestellar syncer install` wrote for /usr/bin/kubestellar.
set -e
case "$1" in
purge)
	rm -rf /var/lib/kubestellar /var/lib/kubestellar-syncer /etc/kubestellar
	for unit in /etc/systemd/system/kubestellar.service /etc/systemd/system/kubestellar-syncer@.service; do
		if [ -f "$unit" ] && grep -q '^ExecStart=/usr/bin/kubestellar ' "$unit"; then
			rm -f "$unit"
		fi
	done
	for link in /etc/systemd/system/*.wants/kubestellar.service /etc/systemd/system/*.wants/kubestellar-syncer@*.service; do
		if [ -L "$link" ] && [ ! -e "$link" ]; then
			rm -f "$link"
		fi
	done
	;;
esac
case "$1" in
remove|purge)
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
	fi
	;;
esac
exit 0
EOF

for script in postinst prerm postrm; do
  sh -n "$staging/DEBIAN/$script"
  chmod 0755 "$staging/DEBIAN/$script"
done
chmod 0644 "$staging/DEBIAN/control" "$staging/DEBIAN/conffiles"
find "$staging" -type d -exec chmod 0755 {} +

rm -f "$out"/kubestellar_*.deb
dpkg-deb --root-owner-group --build "$staging" "$deb"
rm -rf "$staging"
echo "built $deb"
