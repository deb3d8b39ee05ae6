#!/usr/bin/env bash
# Weak scaling of sdp-train (1 vs 2 ranks) next to PyTorch DDP (gloo), in one run.
# Needs build/sdp-train and `scripts/install-deps.sh --bench`. Options: see bench_scaling.py.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sdp-train ] || { echo "bench-scaling: build first (cmake -S . -B build && cmake --build build)" >&2; exit 2; }
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || { echo "bench-scaling: needs PyTorch: bash scripts/install-deps.sh --bench" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec /usr/bin/python3 scripts/bench_scaling.py "$@"
