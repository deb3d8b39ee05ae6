#!/usr/bin/env bash
# Runs after the simulated-cluster, Slurm and container tests (CTest's cleanup of their
# fixture): fails naming anything they started that is still there, then ends it, so that
# the next run does not meet it (a slurmstepd left behind once held a later slurm test past
# its limit).
#   leftover_processes.sh PREFIX...   the simulated clusters' prefixes the tests use
set -u
left=()
for prefix in "$@"; do
  # Processes started by a test's cluster carry its SIMCLUSTER_PREFIX (the daemons, slurmstepd
  # and the job steps they start inherit it), wherever their namespace has gone.
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}; pid=${pid%/environ}
    [ "$pid" != $$ ] || continue
    { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qx "SIMCLUSTER_PREFIX=$prefix" || continue
    left+=("process $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-120)) of cluster $prefix")
    kill -KILL "$pid" 2>/dev/null
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(h[0-9]+|sw)$"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      left+=("process $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-120)) in namespace $ns")
      kill -KILL "$pid" 2>/dev/null
    done
    left+=("network namespace $ns")
  done
  [ -z "$(ls /run/"$prefix"-simcluster 2>/dev/null)" ] || left+=("state /run/$prefix-simcluster")
  SIMCLUSTER_PREFIX=$prefix bash "$(dirname "$0")/../scripts/simcluster.sh" down >/dev/null 2>&1 || true
done
# The container tests' jobs (tests/e2e/docker_test.sh names them sdp-test-PID-CASE).
if docker info >/dev/null 2>&1; then
  for c in $(docker ps -aq --filter name=sdp-test-); do
    left+=("container $(docker inspect -f '{{.Name}} ({{.State.Status}})' "$c" | sed 's|^/||')")
    docker rm -f "$c" >/dev/null 2>&1
  done
  for n in $(docker network ls -q --filter name=sdp-test-); do
    left+=("docker network $(docker network inspect -f '{{.Name}}' "$n")")
    docker network rm "$n" >/dev/null 2>&1
  done
fi
if [ ${#left[@]} -gt 0 ]; then
  echo "FAIL: the cluster and container tests left behind (now ended):"
  printf '  %s\n' "${left[@]}"
  exit 1
fi
echo "PASS: the cluster and container tests left nothing running"
