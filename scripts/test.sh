#!/usr/bin/env bash
# `make test`: set up, then run the whole test suite on a private Redis (or REDIS_URL).
# Extra arguments go to pytest, e.g. `make test ARGS="-k store"` or `scripts/test.sh -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/python -m pytest "$@"
