#!/usr/bin/env bash
# `make run`: set up, then serve the demo on http://127.0.0.1:8000 with uvicorn (ASGI) on a
# private Redis (or REDIS_URL).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/python scripts/demo.py "$@"
