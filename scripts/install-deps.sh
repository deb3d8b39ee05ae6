#!/usr/bin/env bash
# Installs every Debian package sdp-train needs to build and test. Idempotent and
# non-interactive; runs apt-get as root, or through sudo otherwise.
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --bench   also PyTorch (python3-torch, python3-torchvision) with OpenBLAS, the peer the benchmarks compare with
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
)
if [ "${1:-}" = "--bench" ]; then
  # Debian's torch does its matrix products through libblas.so.3: without OpenBLAS that is
  # the reference BLAS, ~20x slower, which would make PyTorch an unfair peer.
  packages+=(python3-torch libopenblas0-pthread)
  packages+=(python3-torchvision)  # the peer of scripts/bench-data.sh: DataLoader + ImageFolder
  packages+=(python3-matplotlib)  # the plots of scripts/plot_*.py
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
