#!/usr/bin/env bash
# Simulated cluster on one machine: N "hosts" as network namespaces on a private bridge,
# each with its own address, its own host name and (optionally) a rate-limited link, and
# Open MPI pointed at them through its rsh launcher. For tests and benchmarks of the
# inter-node code paths (the hierarchical AllReduce, cross-host bytes) without a cluster.
#
#   scripts/simcluster.sh up N [--slots K]   hosts sdp-h1..sdp-hN (K slots each, default 2)
#   scripts/simcluster.sh shape RATE         every host link limited to RATE in each
#                                            direction (tc HTB, e.g. 1gbit, 500mbit); `off`
#   scripts/simcluster.sh status             hosts, addresses, shaping, byte counters
#   scripts/simcluster.sh counters           "host tx_bytes rx_bytes" of each host's link
#   scripts/simcluster.sh mpirun-args        the mpirun options that launch on the hosts
#   scripts/simcluster.sh down               removes everything `up` and `shape` made
#
# Then:  mpirun -np 4 $(scripts/simcluster.sh mpirun-args) build/sdp-train ...
# or source the env file it writes (SIMCLUSTER_MPIRUN_ARGS, SIMCLUSTER_HOSTS, ...):
#        . "$(scripts/simcluster.sh env-file)"
#
# Layout (SIMCLUSTER_PREFIX=sdp, SIMCLUSTER_NET=10.213.0):
#   switch: namespace sdp-sw holding bridge br0, one port per host (h1..hN) and an uplink;
#   host i: namespace sdp-hi, eth0 = address 10.213.0.i/24 (veth to port hi of the switch),
#           host name sdp-hi (a UTS namespace per launched process);
#   the root namespace (where mpirun runs) reaches the subnet as 10.213.0.254 through veth
#   sdp-sw0 (its other end is the switch's uplink port).
# The bridge lives in its own namespace so that the root namespace's firewall (Docker sets
# FORWARD to DROP and makes bridges call iptables) never sees the hosts' traffic.
# The link of a host is its veth: `shape` puts an HTB class on eth0 (host -> switch) and on
# port hi (switch -> host), so each host has a full-duplex link of RATE, like a switch port.
#
# How launching works: the hostfile lists sdp-h1..sdp-hN with slots=K, so ranks fill a host
# before the next (-np H*K puts K ranks on each). mpirun (root namespace) starts one orted
# per host through plm_rsh_agent = the agent script this writes, which does what ssh would:
#   ip netns exec sdp-hi unshare --uts sh -c 'hostname sdp-hi; exec sh -c "<command>"'
# Each host needs its own host name: Open MPI names its shared-memory (vader) segments
# after it, and hosts sharing a name would collide in /dev/shm. MPI traffic between hosts
# is TCP on the private subnet (btl tcp, btl_tcp_if_include / oob_tcp_if_include); ranks
# of one host use shared memory (vader), as on a real node.
#
# Needs root and network namespaces; exits 77 (the CTest "skipped" status) with a message
# when either is missing. `up` and `down` are idempotent; `up` takes well under a second.
set -euo pipefail

PREFIX=${SIMCLUSTER_PREFIX:-sdp}
NET=${SIMCLUSTER_NET:-10.213.0}
STATE=${SIMCLUSTER_STATE:-/run/$PREFIX-simcluster}
SWITCH=$PREFIX-sw
UPLINK=$PREFIX-sw0

die() { echo "simcluster: $*" >&2; exit 1; }
skip() { echo "simcluster: SKIP: $*" >&2; exit 77; }

need_root() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, veth, tc)"
  command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
  command -v unshare >/dev/null || skip "no 'unshare' command (util-linux)"
}

hosts() {  # the hosts that are up, in order
  [ -f "$STATE/hosts" ] && cat "$STATE/hosts" || true
}

ns_exists() { [ -e "/run/netns/$1" ]; }

write_launch_files() {
  local n=$1 slots=$2
  mkdir -p "$STATE"
  : >"$STATE/hostfile"
  : >"$STATE/hosts"
  for i in $(seq 1 "$n"); do
    echo "$PREFIX-h$i slots=$slots" >>"$STATE/hostfile"
    echo "$PREFIX-h$i" >>"$STATE/hosts"
  done
  # The rsh agent: mpirun calls it as `agent HOST COMMAND...`, like ssh, whose remote
  # shell runs the words joined by spaces (Open MPI quotes them for that).
  cat >"$STATE/agent" <<'EOF'
#!/bin/sh
# simcluster rsh agent for Open MPI (plm_rsh_agent): `agent HOST COMMAND...` runs COMMAND in
# network namespace HOST under host name HOST, as `ssh HOST COMMAND...` would.
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$*"
EOF
  chmod +x "$STATE/agent"
  local args="--hostfile $STATE/hostfile --mca plm_rsh_agent $STATE/agent --mca btl tcp,vader,self"
  args+=" --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24"
  # More ranks than the machine's cores (every simulated host shares them): yield, never spin.
  args+=" --mca mpi_yield_when_idle 1 --mca rmaps_base_oversubscribe 1"
  echo "$args" >"$STATE/mpirun-args"
  {
    echo "SIMCLUSTER_HOSTS=\"$(tr '\n' ' ' <"$STATE/hosts" | sed 's/ $//')\""
    echo "SIMCLUSTER_NHOSTS=$n"
    echo "SIMCLUSTER_SLOTS=$slots"
    echo "SIMCLUSTER_HOSTFILE=$STATE/hostfile"
    echo "SIMCLUSTER_AGENT=$STATE/agent"
    echo "SIMCLUSTER_MPIRUN_ARGS=\"$args\""
    echo "SIMCLUSTER_IFACE=eth0"
  } >"$STATE/env"
}

cmd_up() {
  local n=${1:-}; shift || true
  local slots=2
  while [ $# -gt 0 ]; do
    case "$1" in
      --slots) slots=$2; shift 2 ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: need a host count 1..200"
  [[ "$slots" =~ ^[0-9]+$ ]] && [ "$slots" -ge 1 ] || die "up: --slots needs a positive integer"
  need_root
  # Namespaces must work here (a container may forbid them): try before changing anything.
  if ! ns_exists "$PREFIX-h1"; then
    local probe=$PREFIX-probe$$
    ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces (ip netns add failed)"
    # veth pairs and a UTS namespace per host too (a container may allow one but not these).
    if ! ip -n "$probe" link add p0 type veth peer name p1 2>/dev/null; then
      ip netns del "$probe"; skip "cannot create veth links in a network namespace"
    fi
    if ! ip netns exec "$probe" unshare --uts true 2>/dev/null; then
      ip netns del "$probe"; skip "cannot create UTS namespaces (unshare --uts failed)"
    fi
    ip netns del "$probe"
  fi
  # A different host count: start over (hosts beyond N would linger otherwise).
  if [ -n "$(hosts)" ] && [ "$(hosts | wc -l)" -ne "$n" ]; then cmd_down >/dev/null; fi

  local sw=(ip netns exec "$SWITCH")
  ns_exists "$SWITCH" || ip netns add "$SWITCH"
  "${sw[@]}" ip link show br0 >/dev/null 2>&1 || "${sw[@]}" ip link add br0 type bridge
  "${sw[@]}" ip link set br0 up
  if ! ip link show "$UPLINK" >/dev/null 2>&1; then
    "${sw[@]}" ip link del uplink 2>/dev/null || true
    ip link add "$UPLINK" type veth peer name uplink netns "$SWITCH"
  fi
  "${sw[@]}" ip link set uplink master br0 up
  ip addr replace "$NET.254/24" dev "$UPLINK"
  ip link set "$UPLINK" up
  for i in $(seq 1 "$n"); do
    local ns=$PREFIX-h$i
    ns_exists "$ns" || ip netns add "$ns"
    if ! "${sw[@]}" ip link show "h$i" >/dev/null 2>&1; then
      ip netns exec "$ns" ip link del eth0 2>/dev/null || true
      "${sw[@]}" ip link add "h$i" type veth peer name eth0 netns "$ns"
    fi
    "${sw[@]}" ip link set "h$i" master br0 up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip addr replace "$NET.$i/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
  done
  write_launch_files "$n" "$slots"
  echo "simcluster: $n hosts up ($(tr '\n' ' ' <"$STATE/hosts")), $slots slots each, subnet $NET.0/24"
}

# shape_dev NS DEV RATE: HTB root qdisc with one class of RATE (burst >= 64 KiB: the kernel
# timer cannot release less per tick at Gbit/s; an explicit quantum: HTB's default,
# rate / r2q, is too large at Gbit/s and warns).
shape_dev() {
  local ns=$1 dev=$2 rate=$3
  local in=(ip netns exec "$ns")
  "${in[@]}" tc qdisc del dev "$dev" root 2>/dev/null || true
  [ "$rate" = off ] && return 0
  "${in[@]}" tc qdisc add dev "$dev" root handle 1: htb default 1
  "${in[@]}" tc class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" \
    burst 256k cburst 256k quantum 65536
}

cmd_shape() {
  local rate=${1:-}
  [ -n "$rate" ] || die "shape: need a rate (e.g. 1gbit, 500mbit) or 'off'"
  need_root
  [ -n "$(hosts)" ] || die "shape: no cluster is up (run: $0 up N)"
  local i=0
  for ns in $(hosts); do
    i=$((i + 1))
    shape_dev "$ns" eth0 "$rate"
    shape_dev "$SWITCH" "h$i" "$rate"
  done
  if [ "$rate" = off ]; then
    rm -f "$STATE/rate"
    echo "simcluster: host links unshaped"
  else
    echo "$rate" >"$STATE/rate"
    echo "simcluster: host links shaped to $rate each way"
  fi
}

cmd_counters() {
  for ns in $(hosts); do
    echo "$ns $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes) $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)"
  done
}

cmd_status() {
  if [ -z "$(hosts)" ]; then
    echo "simcluster: down"
    return 0
  fi
  echo "simcluster: $(hosts | wc -l) hosts, link rate $(cat "$STATE/rate" 2>/dev/null || echo unshaped)"
  echo "  mpirun $(cat "$STATE/mpirun-args")"
  for ns in $(hosts); do
    local addr
    addr=$(ip netns exec "$ns" ip -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')
    echo "  $ns ${addr:-?} tx_bytes=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes 2>/dev/null || echo ?)" \
      "rx_bytes=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes 2>/dev/null || echo ?)"
  done
}

cmd_down() {
  need_root
  # Everything this prefix names, whether or not the state file lists it. Deleting a
  # namespace deletes the veths inside it and their peers.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-(h[0-9]+|sw)$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$UPLINK" 2>/dev/null || true
  rm -rf "$STATE"
  echo "simcluster: down"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  shape) shift; cmd_shape "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  counters) cmd_counters ;;
  mpirun-args)
    [ -f "$STATE/mpirun-args" ] || die "no cluster is up (run: $0 up N)"
    cat "$STATE/mpirun-args" ;;
  env-file)
    [ -f "$STATE/env" ] || die "no cluster is up (run: $0 up N)"
    echo "$STATE/env" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    [ -n "${1:-}" ] && [ "$1" != -h ] && [ "$1" != --help ] && exit 1
    exit 0 ;;
esac
