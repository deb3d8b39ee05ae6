#!/usr/bin/env bash
# The input side alone: sdp-train's loader vs PyTorch's DataLoader + torchvision, tf.data and
# NVIDIA DALI's CPU pipeline, on the same JPEGs with the same transforms, in one run. Needs
# sdp-train (build/sdp-train, or SDP_TRAIN=/path/to/sdp-train), `scripts/install-deps.sh --bench`
# (python3-torch, python3-torchvision; tensorflow-cpu and nvidia-dali-cuda130 in the virtual
# environment /opt/sdp-bench-venv, or SDP_BENCH_VENV=...) and CIFAR-10 ($SDP_DATA_DIR/cifar10,
# default ../shared/data), from which the JPEGs are made. tf.data and DALI are optional: without
# them their rows say "not installed". Options: see bench_data.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export SDP_TRAIN=${SDP_TRAIN:-$PWD/build/sdp-train}
[ -x "$SDP_TRAIN" ] || { echo "bench-data: no $SDP_TRAIN: build first (cmake -S . -B build && cmake --build build) or set SDP_TRAIN" >&2; exit 2; }
export SDP_BENCH_VENV=${SDP_BENCH_VENV:-/opt/sdp-bench-venv}
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import torch, torchvision' 2>/dev/null ||
  { echo "bench-data: needs PyTorch and torchvision: bash scripts/install-deps.sh --bench (or PYTHON=...)" >&2; exit 2; }
exec "$PYTHON" scripts/bench_data.py "$@"
