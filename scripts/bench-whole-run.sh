#!/usr/bin/env bash
# Whole-run speed of the shipped recipes on their real data, per epoch, with and without
# flushing denormals (see bench_whole_run.py). Needs build/sdp-train and the data sets.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sdp-train ] || { echo "bench-whole-run: build first (cmake -S . -B build && cmake --build build)" >&2; exit 2; }
exec python3 scripts/bench_whole_run.py "$@"
