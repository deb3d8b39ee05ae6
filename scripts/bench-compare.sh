#!/usr/bin/env bash
# Two builds of sdp-train side by side (the "no speed lost" check). Options: see bench_compare.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec /usr/bin/python3 scripts/bench_compare.py "$@"
