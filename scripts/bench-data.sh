#!/usr/bin/env bash
# The input side alone: sdp-train's loader vs PyTorch's DataLoader + torchvision, on the same
# JPEGs with the same transforms, in one run. Needs build/sdp-train, `scripts/install-deps.sh
# --bench` (python3-torch, python3-torchvision) and CIFAR-10 ($SDP_DATA_DIR/cifar10, default
# ../shared/data), from which the JPEGs are made. Options: see bench_data.py.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sdp-train ] || { echo "bench-data: build first (cmake -S . -B build && cmake --build build)" >&2; exit 2; }
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import torch, torchvision' 2>/dev/null ||
  { echo "bench-data: needs PyTorch and torchvision: bash scripts/install-deps.sh --bench (or PYTHON=...)" >&2; exit 2; }
exec "$PYTHON" scripts/bench_data.py "$@"
