# Sourced by hack/test-deps.sh and hack/bench-deps.sh.
#
# ensure_packages WHAT CHECK:PACKAGE...
#   Installs the Debian packages whose CHECK fails, as root with apt-get;
#   otherwise prints the apt-get line and fails. CHECK is a command (looked
#   for on PATH and in /usr/sbin) or, when it starts with /, a path glob.
#   WHAT names who needs them, for the messages.
ensure_packages() {
  local what=$1
  shift
  local missing=() spec check pkg
  for spec in "$@"; do
    check=${spec%%:*}
    pkg=${spec##*:}
    if [[ $check == /* ]]; then
      compgen -G "$check" >/dev/null && continue
    else
      command -v "$check" >/dev/null && continue
      [ -x "/usr/sbin/$check" ] && continue
    fi
    [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "$what need these Debian packages: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "installing what $what need: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
