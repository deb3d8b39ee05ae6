#!/usr/bin/env bash
# Assembles CUDA, cuDNN, cuBLAS and NCCL from NVIDIA's PyPI wheels into one directory laid
# out as a CUDA toolkit (bin/, include/, lib/ with lib64 -> lib, nvvm/), the way PyTorch ships
# them: no NVIDIA base image, no apt repository, any Linux with Python.
#
#   scripts/cuda-from-wheels.sh PREFIX            the toolkit to build sdp-train with (nvcc too)
#   scripts/cuda-from-wheels.sh --runtime PREFIX  only the shared libraries sdp-train loads
#   scripts/cuda-from-wheels.sh --download DIR    only fetch the wheels into DIR
#   ... --wheels DIR PREFIX                       take the wheels from DIR (fetch what is missing)
#
# Dockerfile.gpu runs it inside the build; where the build cannot reach PyPI itself (no
# network, or a proxy whose CA the container does not trust), fetch them first into the
# context's .cuda-wheels/, which the Dockerfile takes instead:
#   scripts/cuda-from-wheels.sh --download .cuda-wheels && docker build -f Dockerfile.gpu ...
#
# The versions are the ones the code is built and tested with (the toolkit of the build
# machine, /usr/local/cuda: CUDA 13.0, cuDNN 9.19, NCCL 2.28, cuBLAS 13.1). Each wheel is
# fetched without its dependencies: the set below is complete, and pip would otherwise take
# the newest cuBLAS for cuDNN. nvJPEG is not among them: sdp-train decodes JPEG on the CPU.
# Needs python3 with pip (pip download) and network access to PyPI.
set -euo pipefail

runtime_only=0 download_only=0 wheel_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) runtime_only=1; shift ;;
    --download) download_only=1; wheel_dir=${2:?--download needs a directory}; shift 2 ;;
    --wheels) wheel_dir=${2:?--wheels needs a directory}; shift 2 ;;
    -*) echo "cuda-from-wheels: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $download_only = 1 ] || PREFIX=${1:?usage: $0 [--runtime] [--wheels DIR] PREFIX | --download DIR}

runtime_wheels=(
  nvidia-cuda-runtime==13.0.96   # libcudart
  nvidia-cublas==13.1.0.3        # libcublas, libcublasLt (loaded on first use)
  nvidia-cudnn-cu13==9.19.0.56   # libcudnn*
  nvidia-nccl-cu13==2.28.9       # libnccl
  nvidia-cuda-nvrtc==13.0.88     # cuDNN's runtime-compiled engines compile with it
  nvidia-nvjitlink==13.0.88      # and link with it
)
build_wheels=(
  nvidia-cuda-nvcc==13.0.88      # nvcc, ptxas, fatbinary, nvlink
  nvidia-cuda-crt==13.0.88       # nvcc's crt/ headers
  nvidia-nvvm==13.0.88           # cicc, libnvvm, libdevice
  nvidia-cuda-cccl==13.0.85      # libcu++ (<nv/target>, which cuda_fp16.h includes), CUB, Thrust
)
wheels=("${runtime_wheels[@]}")
[ $runtime_only = 1 ] && [ $download_only = 0 ] || wheels+=("${build_wheels[@]}")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "$wheel_dir" ] || wheel_dir=$work/wheels
mkdir -p "$wheel_dir"
# A wheel's file name: its project name with - as _, then -VERSION-.
wheel_file() { local spec=$1; ls "$wheel_dir/$(echo "${spec%%==*}" | tr - _)-${spec#*==}-"*.whl 2>/dev/null | head -1; }
missing=()
for spec in "${wheels[@]}"; do [ -n "$(wheel_file "$spec")" ] || missing+=("$spec"); done
if [ ${#missing[@]} -gt 0 ]; then
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$wheel_dir" "${missing[@]}"
fi
if [ $download_only = 1 ]; then
  echo "cuda-from-wheels: ${#wheels[@]} wheels in $wheel_dir ($(du -sh "$wheel_dir" | cut -f1))"
  exit 0
fi
mkdir -p "$work/tree"
for spec in "${wheels[@]}"; do
  python3 -m zipfile -e "$(wheel_file "$spec")" "$work/tree"
done

# Every wheel puts its files under nvidia/<part>/ (cu13, cudnn, nccl): merge the parts.
mkdir -p "$PREFIX"
for part in "$work"/tree/nvidia/*/; do
  for sub in bin include lib nvvm; do
    [ -d "$part$sub" ] || continue
    if [ $runtime_only = 1 ] && [ "$sub" != lib ]; then continue; fi
    mkdir -p "$PREFIX/$sub"
    cp -a "$part$sub/." "$PREFIX/$sub/"
  done
done
if [ $runtime_only = 1 ]; then
  # Shared libraries only: no static archives, no CMake files.
  find "$PREFIX/lib" -mindepth 1 \( -name '*.a' -o -type d \) -prune -exec rm -rf {} +
else
  chmod +x "$PREFIX"/bin/* "$PREFIX"/nvvm/bin/* 2>/dev/null || true
  [ -e "$PREFIX/lib64" ] || ln -s lib "$PREFIX/lib64"
  # nvcc.profile adds $(TOP)/targets/x86_64-linux/{include,lib} to its search paths.
  mkdir -p "$PREFIX/targets/x86_64-linux"
  [ -e "$PREFIX/targets/x86_64-linux/include" ] || ln -s ../../include "$PREFIX/targets/x86_64-linux/include"
  [ -e "$PREFIX/targets/x86_64-linux/lib" ] || ln -s ../../lib "$PREFIX/targets/x86_64-linux/lib"
  # Wheels carry only the sonames (libcudart.so.13); the linker looks for libcudart.so.
  for lib in "$PREFIX"/lib/lib*.so.*; do
    base=${lib%%.so.*}.so
    [ -e "$base" ] || ln -s "$(basename "$lib")" "$base"
  done
fi
echo "cuda-from-wheels: ${#wheels[@]} wheels in $PREFIX ($(du -sh "$PREFIX" | cut -f1))"
