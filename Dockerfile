# sdp-train as an Amazon SageMaker training image for CPU instances (docs/sagemaker.md), on
# Debian 12.
#
#   scripts/sagemaker-local.sh --build-only   # sdp-train:test, labelled with its sources (the container tests)
#   docker build -t sdp-train:cpu .
#   docker build -t sdp-train:nvidia --build-arg BASE_IMAGE=nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04 .
#
# For GPU instances (p4d, p5) build Dockerfile.gpu instead: Debian 12 with the CUDA, cuDNN
# and NCCL the code is built and tested with, from NVIDIA's wheels, and no compilers in the
# image. This file on NVIDIA's CUDA image (the third line) takes that image's CUDA; never
# built here: that base cannot be fetched here.
#
# Where no registry is reachable, scripts/docker-local.sh up starts dockerd and makes
# debian:bookworm from Debian's packages (debootstrap).
#
# SageMaker starts it as `docker run IMAGE train`: the entry point is
# scripts/sagemaker-entrypoint.sh, also on PATH as `train` (scripts/image-setup.sh: that and
# the ssh set-up the leader's mpirun needs).
ARG BASE_IMAGE=debian:bookworm
FROM ${BASE_IMAGE}

# AUTO builds the CUDA backend when the base image has nvcc (the CUDA image), not otherwise.
ARG SDP_WITH_CUDA=AUTO
ARG BUILD_JOBS=2
ENV DEBIAN_FRONTEND=noninteractive \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    PATH=/usr/local/cuda/bin:${PATH}

# The image's own needs; scripts/install-deps.sh brings the build's.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends openssh-server openssh-client procps ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/sdp-train
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh --no-pip && rm -rf /var/lib/apt/lists/*

# The README's build command, without the tests (they need not ship).
COPY CMakeLists.txt ./
COPY cmake cmake
COPY apps apps
COPY lib lib
COPY models models
# The build copies the launcher wrapper beside the binary (apps/sdp-train/CMakeLists.txt);
# tests/image/dockerfile_context_test.py checks that each build step finds what it reads.
COPY scripts/sdp-launch scripts/
RUN cmake -S . -B build -G Ninja -DSDP_BUILD_TESTS=OFF -DSDP_WITH_CUDA=${SDP_WITH_CUDA} \
 && cmake --build build -j${BUILD_JOBS} \
 && install -m 755 build/sdp-train /usr/local/bin/sdp-train \
 && rm -rf build \
 && sdp-train --version

COPY configs configs
COPY scripts scripts
RUN bash scripts/image-setup.sh

ENTRYPOINT ["/opt/sdp-train/scripts/sagemaker-entrypoint.sh"]
CMD ["train"]
