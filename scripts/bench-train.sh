#!/usr/bin/env bash
# Training throughput of sdp-train vs PyTorch (Debian's python3-torch) in one run.
# Needs build/sdp-train and `scripts/install-deps.sh --bench`. Options: see bench_train.py.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sdp-train ] || { echo "bench-train: build first (cmake -S . -B build && cmake --build build)" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "bench-train: needs PyTorch: bash scripts/install-deps.sh --bench" >&2; exit 2; }
exec /usr/bin/python3 scripts/bench_train.py "$@"
