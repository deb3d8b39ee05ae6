#!/usr/bin/env bash
# Docker on a machine that has no Docker engine running and no image registry in reach: what a
# contributor or CI needs to build the SageMaker images (Dockerfile, Dockerfile.gpu) and run
# their container tests (`ctest -L docker`). Root only (dockerd, debootstrap).
#
#   scripts/docker-local.sh daemon      installs docker.io (Debian's) if dockerd is missing and
#                                       starts dockerd if no daemon answers; log in
#                                       /var/log/sdp-dockerd.log
#   scripts/docker-local.sh base-image  makes the image debian:bookworm, the Dockerfiles' base,
#                                       from Debian's own packages (debootstrap, minbase) and
#                                       `docker import`, when no such image exists; the root file
#                                       system's tarball is cached in $SDP_DOCKER_CACHE (default
#                                       /var/cache/sdp-train), so a second machine-local run takes
#                                       seconds
#   scripts/docker-local.sh up          both of the above
#   scripts/docker-local.sh down        stops the dockerd this script started (no other)
# Exits 77 where it cannot work (not root; no network namespaces for dockerd), 1 on failure.
set -euo pipefail

CACHE=${SDP_DOCKER_CACHE:-/var/cache/sdp-train}
BASE_IMAGE=debian:bookworm
SUITE=bookworm
MIRROR=${SDP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PIDFILE=/run/sdp-dockerd.pid
LOG=/var/log/sdp-dockerd.log

say() { echo "docker-local: $*" >&2; }
die() { say "$*"; exit 1; }
skip() { say "$*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (dockerd, debootstrap)"

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

cmd_daemon() {
  if docker info >/dev/null 2>&1; then
    say "a Docker daemon answers"
    return 0
  fi
  command -v dockerd >/dev/null || { say "installing docker.io"; apt_install docker.io iptables; }
  command -v docker >/dev/null || die "docker.io installed no docker client"
  say "starting dockerd (log $LOG)"
  # setsid: the daemon outlives this script and the shell or test that called it.
  setsid dockerd --pidfile "$PIDFILE" >"$LOG" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && { say "dockerd is up"; return 0; }
    kill -0 $! 2>/dev/null || { tail -5 "$LOG" >&2; die "dockerd exited (log $LOG)"; }
    sleep 0.5
  done
  tail -5 "$LOG" >&2
  die "dockerd did not answer within 30 s (log $LOG)"
}

cmd_base_image() {
  docker info >/dev/null 2>&1 || die "no Docker daemon answers: run $0 daemon first"
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "$BASE_IMAGE is present"
    return 0
  fi
  local tarball=$CACHE/debian-$SUITE-minbase.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || { say "installing debootstrap"; apt_install debootstrap; }
    mkdir -p "$CACHE"
    local root
    root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    # Removed however this ends; an interrupted debootstrap leaves no half tarball either.
    trap 'rm -rf "$root" "$tarball.part"' EXIT
    say "debootstrap $SUITE (minbase) from $MIRROR"
    debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
      { tail -5 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log $CACHE/debootstrap.log)"; }
    # As Docker's official image: no package lists or caches kept, the mirror's sources.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
    tar -C "$root" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$root"
    trap - EXIT
  fi
  say "importing $tarball as $BASE_IMAGE"
  docker import --change 'CMD ["bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
  say "$BASE_IMAGE: $(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1 / 1e6}')"
}

cmd_down() {
  [ -f "$PIDFILE" ] || { say "no dockerd of this script runs"; return 0; }
  local pid
  pid=$(cat "$PIDFILE")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -0 "$pid" 2>/dev/null && die "dockerd ($pid) did not stop"
  rm -f "$PIDFILE"
  say "dockerd stopped"
}

case "${1:-}" in
  daemon) cmd_daemon ;;
  base-image) cmd_base_image ;;
  up) cmd_daemon; cmd_base_image ;;
  down) cmd_down ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; [ -z "${1:-}" ] || [ "$1" = -h ] || [ "$1" = --help ]; exit $? ;;
esac
