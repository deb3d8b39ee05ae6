# sdp-train as an Amazon SageMaker training image (docs/sagemaker.md).
#
#   docker build -t sdp-train .                                            # CUDA (production)
#   docker build -t sdp-train:test --build-arg BASE_IMAGE=debian:bookworm .  # CPU only (tests)
#
# SageMaker starts it as `docker run IMAGE train`: the entry point is
# scripts/sagemaker-entrypoint.sh, also on PATH as `train`. Every container runs sshd, and
# root on one container reaches root on every other without a password (one key pair, made
# here and shared by all containers of the image): the leader's mpirun starts the ranks
# of the other hosts over ssh.
ARG BASE_IMAGE=nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04
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
RUN cmake -S . -B build -G Ninja -DSDP_BUILD_TESTS=OFF -DSDP_WITH_CUDA=${SDP_WITH_CUDA} \
 && cmake --build build -j${BUILD_JOBS} \
 && install -m 755 build/sdp-train /usr/local/bin/sdp-train \
 && rm -rf build \
 && sdp-train --version

# sshd: host keys, root by key only, no PAM (a container has no login session to set up).
# ssh: no host key prompts (containers of one job come and go with new addresses).
RUN ssh-keygen -A \
 && mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh \
 && ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519 \
 && cp /root/.ssh/id_ed25519.pub /root/.ssh/authorized_keys \
 && printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n' >/etc/ssh/sshd_config.d/sdp-train.conf \
 && printf 'Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' >/root/.ssh/config \
 && chmod 600 /root/.ssh/config /root/.ssh/authorized_keys

COPY configs configs
COPY scripts scripts
RUN ln -s /opt/sdp-train/scripts/sagemaker-entrypoint.sh /usr/local/bin/train

ENTRYPOINT ["/opt/sdp-train/scripts/sagemaker-entrypoint.sh"]
CMD ["train"]
