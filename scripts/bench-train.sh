#!/usr/bin/env bash
# Training throughput of sdp-train vs PyTorch (Debian's python3-torch) in one run.
# Needs build/sdp-train and `scripts/install-deps.sh --bench`. Options: see bench_train.py.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sdp-train ] || { echo "bench-train: build first (cmake -S . -B build && cmake --build build)" >&2; exit 2; }
# PYTHON: an interpreter with PyTorch (a GPU machine's own, say); default Debian's.
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import torch' 2>/dev/null || { echo "bench-train: needs PyTorch: bash scripts/install-deps.sh --bench (or PYTHON=...)" >&2; exit 2; }
exec "$PYTHON" scripts/bench_train.py "$@"
