#!/usr/bin/env bash
# Tests the Debian package that `make deb` built (make deb-test): installs
# it, checks the binary, the files and their modes, the units (with
# systemd-analyze verify) and that `kubestellar server install` writes the
# very unit the package ships; then purges it and checks that nothing is
# left. Prints each check; exits non-zero if any fails.
#
# Run as root, where installing and purging the package kubestellar is fine
# (CI, a throwaway machine). Safe to rerun: a package left installed by an
# earlier run is purged first.
#
#   hack/test-deb.sh [OUTDIR]
set -euo pipefail
out=${1:-_output}
[ "$(id -u)" = 0 ] || { echo "test-deb.sh: run as root (it installs and purges the package)" >&2; exit 1; }
arch=$(dpkg --print-architecture)
shopt -s nullglob
debs=("$out"/kubestellar_*_"$arch".deb)
shopt -u nullglob
[ "${#debs[@]}" = 1 ] || { echo "test-deb.sh: expected one $out/kubestellar_*_$arch.deb, found ${#debs[@]}: run 'make deb'" >&2; exit 1; }
deb=${debs[0]}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failures=0
# check DESCRIPTION COMMAND...: runs COMMAND and reports.
check() {
  local what=$1
  shift
  if "$@"; then
    echo "ok    $what"
  else
    echo "FAIL  $what"
    failures=$((failures + 1))
  fi
}
mode_is() { [ -e "$2" ] && [ "$(stat -c %a "$2")" = "$1" ]; }
absent() { [ ! -e "$1" ] && [ ! -L "$1" ]; }
# verify_unit FILE: systemd-analyze verify succeeds and has nothing to say
# about our units.
verify_unit() {
  local log="$tmp/verify.log"
  if ! systemd-analyze verify --man=no "$1" >"$log" 2>&1; then
    cat "$log"
    return 1
  fi
  if grep -q kubestellar "$log"; then
    cat "$log"
    return 1
  fi
}

echo "== $deb"
dpkg-deb --info "$deb" | sed 's/^/   /'
dpkg-deb --contents "$deb" | sed 's/^/   /'
check "Version starts with a digit" sh -c "dpkg-deb --field '$deb' Version | grep -q '^[0-9]'"
check "Architecture is $arch" sh -c "[ \"\$(dpkg-deb --field '$deb' Architecture)\" = '$arch' ]"
dpkg-deb --control "$deb" "$tmp/control"
for script in postinst prerm postrm; do
  check "$script passes sh -n" sh -n "$tmp/control/$script"
  check "$script is set -e" grep -qx 'set -e' "$tmp/control/$script"
done
check "server.env.example is a conffile" grep -qx /etc/kubestellar/server.env.example "$tmp/control/conffiles"

if dpkg -s kubestellar >/dev/null 2>&1; then
  echo "== purging the kubestellar package an earlier run left"
  dpkg --purge kubestellar
fi

echo "== dpkg -i"
dpkg -i "$deb"
check "dpkg knows kubestellar as installed" sh -c "dpkg-query -W -f='\${Status}' kubestellar | grep -qx 'install ok installed'"
check "/usr/bin/kubestellar is 0755" mode_is 755 /usr/bin/kubestellar
version=$(/usr/bin/kubestellar version) || version=""
echo "   $version"
check "kubestellar version runs" grep -q '^kubestellar ' <<<"$version"
check "/lib/systemd/system/kubestellar.service is 0644" mode_is 644 /lib/systemd/system/kubestellar.service
check "/lib/systemd/system/kubestellar-syncer@.service is 0644" mode_is 644 /lib/systemd/system/kubestellar-syncer@.service
check "/etc/kubestellar/server.env.example is 0644" mode_is 644 /etc/kubestellar/server.env.example
check "/var/lib/kubestellar is 0700" mode_is 700 /var/lib/kubestellar
check "the units run /usr/bin/kubestellar" grep -q '^ExecStart=/usr/bin/kubestellar ' \
  /lib/systemd/system/kubestellar.service /lib/systemd/system/kubestellar-syncer@.service

if ! command -v systemd-analyze >/dev/null; then
  echo "== installing systemd for systemd-analyze"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd
fi
cp /lib/systemd/system/kubestellar-syncer@.service "$tmp/kubestellar-syncer@edge1.service"
check "systemd-analyze verify kubestellar.service" verify_unit /lib/systemd/system/kubestellar.service
check "systemd-analyze verify kubestellar-syncer@.service" verify_unit /lib/systemd/system/kubestellar-syncer@.service
check "systemd-analyze verify kubestellar-syncer@edge1.service" verify_unit "$tmp/kubestellar-syncer@edge1.service"

# The units `server install` and `syncer install` write are the package's,
# and purge removes them with the rest; skipped if units of that name that
# are not ours are already there.
if absent /etc/systemd/system/kubestellar.service && absent /etc/systemd/system/kubestellar-syncer@.service; then
  echo "== kubestellar server install / syncer install (--no-start)"
  # The secrets come from the environment and a flag: both must land in
  # variables of the environment files, never in the flags ExecStart expands.
  KUBESTELLAR_DATASTORE_ENDPOINT='postgres://ks:s3cret@127.0.0.1:5432/kubestellar' \
    /usr/bin/kubestellar server install --no-start --port 7443
  /usr/bin/kubestellar syncer install --no-start --server https://127.0.0.1:7443 \
    --token "K10$(printf '%064d' 0)::abcdef.0123456789abcdef" --sync-target edge1 --kubeconfig /etc/kubestellar/edge1.kubeconfig
  check "server install writes the unit the package ships" cmp /lib/systemd/system/kubestellar.service /etc/systemd/system/kubestellar.service
  check "syncer install writes the unit the package ships" \
    cmp /lib/systemd/system/kubestellar-syncer@.service /etc/systemd/system/kubestellar-syncer@.service
  check "/etc/kubestellar/server.env is 0600" mode_is 600 /etc/kubestellar/server.env
  check "/etc/kubestellar/syncer-edge1.env is 0600" mode_is 600 /etc/kubestellar/syncer-edge1.env
  check "the datastore endpoint is a variable of server.env" grep -q '^KUBESTELLAR_DATASTORE_ENDPOINT=.*s3cret' /etc/kubestellar/server.env
  check "the datastore endpoint is no flag in server.env" sh -c "! grep '^KUBESTELLAR_ARGS=' /etc/kubestellar/server.env | grep -q s3cret"
  check "the join token is a variable of syncer-edge1.env" grep -q '^KUBESTELLAR_TOKEN=.*0123456789abcdef' /etc/kubestellar/syncer-edge1.env
  check "the join token is no flag in syncer-edge1.env" sh -c "! grep '^KUBESTELLAR_SYNCER_ARGS=' /etc/kubestellar/syncer-edge1.env | grep -q 0123456789abcdef"
else
  echo "== skipping server install / syncer install: /etc/systemd/system has kubestellar units already"
fi

echo "== dpkg --purge"
dpkg --purge kubestellar
check "dpkg no longer knows kubestellar" sh -c '! dpkg -s kubestellar >/dev/null 2>&1'
for p in /usr/bin/kubestellar /lib/systemd/system/kubestellar.service /lib/systemd/system/kubestellar-syncer@.service \
  /etc/systemd/system/kubestellar.service /etc/systemd/system/kubestellar-syncer@.service \
  /etc/kubestellar /var/lib/kubestellar /var/lib/kubestellar-syncer; do
  check "$p is gone" absent "$p"
done

if [ "$failures" -gt 0 ]; then
  echo "deb-test: $failures check(s) failed"
  exit 1
fi
echo "deb-test: all checks passed"
