#!/usr/bin/env bash
# CTR training (DeepFM) of sdp-train vs PyTorch (sparse and dense tables) and TensorFlow (the
# SageMaker DeepFM sample's model) in one run: samples/s, test AUC, log loss, peak RSS, at 1 and 2
# threads. Needs `scripts/install-deps.sh --bench` (python3-torch; tensorflow-cpu in the virtual
# environment /opt/sdp-bench-venv, or SDP_BENCH_VENV=...). sdp-train: build/sdp-train, SDP_TRAIN=
# or --sdp-train PATH; without it (or a build without the CTR models) the peers run alone and the
# report says why. a9a from $SDP_DATA_DIR/a9a (default ../shared/data), skipped without it.
# Options: see bench_ctr.py (--quick: a smoke test in about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
export SDP_TRAIN=${SDP_TRAIN:-$PWD/build/sdp-train}
case " $* " in
  *" --sdp-train"*) ;;
  *) [ -x "$SDP_TRAIN" ] || echo "bench-ctr: no $SDP_TRAIN (build first: cmake -S . -B build && cmake --build build): peers only" >&2 ;;
esac
export SDP_BENCH_VENV=${SDP_BENCH_VENV:-/opt/sdp-bench-venv}
[ -x "$SDP_BENCH_VENV/bin/python" ] && "$SDP_BENCH_VENV/bin/python" -c 'import numpy' 2>/dev/null ||
  echo "bench-ctr: no TensorFlow venv at $SDP_BENCH_VENV (bash scripts/install-deps.sh --bench): tf skipped" >&2
# PYTHON: an interpreter with PyTorch and numpy; default Debian's.
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "bench-ctr: $PYTHON has no numpy: bash scripts/install-deps.sh --bench (or PYTHON=...)" >&2; exit 2; }
"$PYTHON" -c 'import torch' 2>/dev/null || echo "bench-ctr: $PYTHON has no PyTorch (bash scripts/install-deps.sh --bench): torch peers skipped" >&2
exec "$PYTHON" scripts/bench_ctr.py "$@"
