# Shared by the setup scripts (sourced, not run).
die() { echo "presence_app setup: $*" >&2; exit 1; }

# apt-get install as root on Debian/Ubuntu; refreshes the package lists once if needed.
apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || return 1
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq "$@" >/dev/null; }
}

# The Chromium the browser tests use: PRESENCE_CHROMIUM, else Debian's.
browser_path() {
  for candidate in "${PRESENCE_CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
    [ -n "$candidate" ] && [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
}
