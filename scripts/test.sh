#!/usr/bin/env bash
# `make test`: set up, then run the whole test suite on a private Redis (or REDIS_URL).
# Extra arguments go to pytest, e.g. `make test ARGS="-k store"` or `scripts/test.sh -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
. scripts/lib.sh

# The end-to-end tests drive Debian's Chromium (headless) through Playwright.
if [ -z "${PRESENCE_SKIP_BROWSER:-}" ] && [ -z "$(browser_path)" ]; then
  echo "Installing chromium for the browser tests ..."
  apt_install chromium || die "no Chromium for the browser tests. Install it (Debian: apt-get install chromium; elsewhere set PRESENCE_CHROMIUM=/path/to/chrome), or set PRESENCE_SKIP_BROWSER=1 to leave those tests out"
fi
# Several test processes at once (pytest-xdist; most tests wait on timers, not the CPU), each
# with a private Redis of its own. Serial when REDIS_URL names a Redis: the workers would share
# it and empty it under each other. PRESENCE_TEST_WORKERS=0 runs serially too.
workers=()
if [ -z "${REDIS_URL:-}" ] && [ "${PRESENCE_TEST_WORKERS:-2}" != 0 ]; then
  workers=(-n "${PRESENCE_TEST_WORKERS:-2}" --dist worksteal)
fi
exec .venv/bin/python -m pytest "${workers[@]}" "$@"
