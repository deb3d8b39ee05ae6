#!/usr/bin/env bash
# Installs every Debian package sdp-train needs to build and test, and the Python packages
# Debian does not have (pip). Idempotent and non-interactive; runs apt-get as root, or through
# sudo otherwise.
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --no-pip  the Debian packages to build and run jobs only (an image that
#                                     runs jobs, not tests: no pip packages, no Slurm)
#   scripts/install-deps.sh --bench   also PyTorch (python3-torch, python3-torchvision) with OpenBLAS, the peer the benchmarks compare with,
#                                     and the loader peers of scripts/bench-data.sh (tf.data, NVIDIA DALI) in a virtual environment
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev          # MPI: launcher, collectives
  libyaml-cpp-dev                     # job spec
  nlohmann-json3-dev                  # resourceconfig.json, hyperparameters.json, metrics
  libcli11-dev                        # command line
  libdnnl-dev                         # oneDNN: CPU kernels
  ocl-icd-opencl-dev opencl-headers   # dnnl-config.cmake requires OpenCL (Debian builds oneDNN's GPU runtime); a recommends, so --no-install-recommends skips it
  zlib1g-dev                          # .gz data sets
  libturbojpeg0-dev libjpeg62-turbo-dev  # JPEG: TurboJPEG headers/encoder, libjpeg API for region + DCT-scaled decode
  libpng-dev                          # PNG decode
  libgtest-dev                        # unit tests
  python3                             # test and benchmark scripts
  python3-pip                         # the Python packages below
)
# The tests' own cluster (tests/slurm: scripts/simcluster.sh slurm): Slurm 22.05 with its PMIx
# plugin (slurm-wlm-basic-plugins), and munge, its authentication.
test_packages=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge
               iptables)  # simcluster.sh impair: packet loss where the kernel has no netem
[ "${1:-}" = "--no-pip" ] || packages+=("${test_packages[@]}")
# Not in Debian: pip installs them for the python3 the tests run (the first on PATH).
python_packages=(
  tensorboard==2.20.0                 # its own event reader checks output.tensorboard's files
)
headers_only_packages=()
# data.decode: gpu compiles against nvjpeg.h and loads libnvjpeg.so.13 at run time; the CUDA
# toolkit here lacks both, PyPI's nvidia-nvjpeg (3.8 MB) has them. Only where CUDA code builds.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  python_packages+=(nvidia-nvjpeg==13.3.2.43)
  # The cuDNN frontend's C++ headers (header-only; the wheel's include/): test_nn's probe of
  # the fused BatchNorm-convolution graph (tests/unit/nn/test_cudnn_fusion_cuda.cpp). Its
  # Python side pulls in CUTLASS's DSL and more, which the headers do not need: --no-deps.
  headers_only_packages+=(nvidia-cudnn-frontend==1.32.0)
fi
if [ "${1:-}" = "--bench" ]; then
  # Debian's torch does its matrix products through libblas.so.3: without OpenBLAS that is
  # the reference BLAS, ~20x slower, which would make PyTorch an unfair peer.
  packages+=(python3-torch libopenblas0-pthread)
  packages+=(python3-torchvision)  # the peer of scripts/bench-data.sh: DataLoader + ImageFolder
  packages+=(python3-matplotlib)  # the plots of scripts/plot_*.py
  packages+=(python3-venv)        # the virtual environment of the loader peers, below
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = "--no-pip" ] && exit 0
# The packages of a list that are not installed at their pinned version.
not_installed() {
  local p
  for p in "$@"; do
    python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('${p%%==*}') != '${p#*==}')" 2>/dev/null ||
      echo "$p"
  done
}
pip_install() {
  local pip_flags=(--quiet --disable-pip-version-check)
  # Debian's own python3 is marked externally managed (PEP 668): pip refuses it without this flag.
  python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))' &&
    pip_flags+=(--break-system-packages)
  [ "$(id -u)" -eq 0 ] && pip_flags+=(--root-user-action=ignore)
  # A system python3 installs into /usr/local (root); a user's own (pyenv, a venv) into itself.
  if [ "$(id -u)" -ne 0 ] && [ ! -w "$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" ]; then
    $SUDO python3 -m pip install "${pip_flags[@]}" "$@"
  else
    python3 -m pip install "${pip_flags[@]}" "$@"
  fi
}
mapfile -t python_missing < <(not_installed "${python_packages[@]}")
if [ ${#python_missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#python_packages[@]} Python packages are installed"
else
  echo "install-deps: pip installing ${python_missing[*]} for $(command -v python3)"
  pip_install "${python_missing[@]}"
fi
mapfile -t headers_missing < <(not_installed "${headers_only_packages[@]}")
if [ ${#headers_missing[@]} -gt 0 ]; then
  echo "install-deps: pip installing ${headers_missing[*]} (headers; no dependencies)"
  pip_install --no-deps "${headers_missing[@]}"
fi

if [ "${1:-}" = "--bench" ]; then
  # The other loader peers of scripts/bench-data.sh: tf.data and NVIDIA DALI's CPU pipeline,
  # bench-only (sdp-train neither links nor imports them). They come from PyPI, pinned to the
  # versions docs/benchmarks.md reports, into a virtual environment of their own rather than
  # `pip --break-system-packages`: tensorflow-cpu needs numpy >= 1.26 and protobuf >= 6, which
  # in /usr/local would shadow Debian's numpy 1.24 and protobuf 3.21 for every /usr/bin/python3
  # program, Debian's torch 1.13 (built against numpy 1.x) included. bench_data.py runs these
  # peers with the environment's python, one process per timed run. SDP_BENCH_VENV moves it.
  venv=${SDP_BENCH_VENV:-/opt/sdp-bench-venv}
  peers=(tensorflow-cpu==2.21.0 nvidia-dali-cuda130==2.4.0)
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "${peers[@]}" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(any(m.version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))
PY
  then
    echo "install-deps: ${peers[*]} are installed in $venv"
  else
    echo "install-deps: installing ${peers[*]} into $venv (about 2 GB)"
    [ -x "$venv/bin/python" ] || $SUDO /usr/bin/python3 -m venv "$venv"
    $SUDO "$venv/bin/python" -m pip install -q --disable-pip-version-check "${peers[@]}"
  fi
fi
