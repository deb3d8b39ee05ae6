#!/usr/bin/env bash
# The SageMaker image's own set-up, shared by Dockerfile (CPU, or on an NVIDIA base) and
# Dockerfile.gpu (Debian 12 with CUDA from wheels). Runs at image build time, as root, from
# /opt/sdp-train (which holds scripts/ and configs/).
#
# Every container runs sshd, and root on one container reaches root on every other without a
# password (one key pair, made here and shared by all containers of the image): the leader's
# mpirun starts the ranks of the other hosts over ssh. sshd: host keys, root by key only, no
# PAM (a container has no login session to set up). ssh: no host key prompts (containers of
# one job come and go with new addresses). SageMaker starts the image as `docker run IMAGE
# train`: `train` is scripts/sagemaker-entrypoint.sh.
set -euo pipefail
ssh-keygen -A
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519
cp /root/.ssh/id_ed25519.pub /root/.ssh/authorized_keys
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n' >/etc/ssh/sshd_config.d/sdp-train.conf
printf 'Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' >/root/.ssh/config
chmod 600 /root/.ssh/config /root/.ssh/authorized_keys
ln -sf /opt/sdp-train/scripts/sagemaker-entrypoint.sh /usr/local/bin/train
ln -sf /opt/sdp-train/scripts/sdp-launch /usr/local/bin/sdp-launch  # beside sdp-train: slurm-train.sbatch looks there
