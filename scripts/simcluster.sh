#!/usr/bin/env bash
# Simulated cluster on one machine: N "hosts" as network namespaces on a private bridge,
# each with its own address, its own host name and (optionally) a rate-limited link, and
# Open MPI pointed at them through its rsh launcher. For tests and benchmarks of the
# inter-node code paths (the hierarchical AllReduce, cross-host bytes) without a cluster.
#
#   scripts/simcluster.sh up N [--slots K]   hosts sdp-h1..sdp-hN (K slots each, default 2)
#   scripts/simcluster.sh shape RATE [--burst B]  every host link limited to RATE in each
#                                            direction (tc HTB, e.g. 1gbit, 500mbit); `off`
#   scripts/simcluster.sh delay MS [--rate RATE] | off
#                                            every host link MS milliseconds longer each way
#                                            (e.g. 0.1, 2): this kernel has no netem, so a
#                                            relay (scripts/delay_relay.c, built with cc on
#                                            first use) holds each frame in the switch, at a
#                                            real-time priority (a wire takes no host's core);
#                                            --rate: the relay also passes RATE each way as a
#                                            wire does, with no burst (tc HTB saves one up of
#                                            at least a 64 KiB offload segment), in place of
#                                            `shape`; MS may then be 0
#   scripts/simcluster.sh cpus C | off       each host's processes launched from now on get at most
#                                            C CPUs (cgroup cpu quota, a 2.5 ms period; e.g. 0.45):
#                                            hosts sharing this machine's cores then compute as on
#                                            cores of their own, whether the others compute or wait
#   scripts/simcluster.sh memory SIZE | off  each host's processes launched from now on share a
#                                            memory limit of SIZE bytes (cgroup v1 memory, e.g.
#                                            2G): a host with less memory than this machine; the
#                                            ranks see it as a container's limit, and a host that
#                                            passes it is killed by the kernel's OOM killer
#   scripts/simcluster.sh status             hosts, addresses, shaping, byte counters
#   scripts/simcluster.sh counters           "host tx_bytes rx_bytes" of each host's link
#   scripts/simcluster.sh mpirun-args        the mpirun options that launch on the hosts
#   scripts/simcluster.sh slurm [--gpus G]   a real Slurm cluster on the hosts that are up:
#                                            munged, slurmctld, one slurmd per host; CPUs =
#                                            slots, G GPUs per host (default: this machine's
#                                            GPUs dealt out over the hosts)
#   scripts/simcluster.sh slurm-down         stops what `slurm` started (`down` does too)
# Faults (docs/robustness.md, "Faults across hosts"), on one host i of the cluster:
#   scripts/simcluster.sh link i down|up     cut host i's link at its switch port (no packet
#                                            passes either way, no reset is sent), or restore it
#   scripts/simcluster.sh impair i --loss P [--delay MS [--jitter MS]] | off
#                                            lose P % of host i's packets each way (tc netem
#                                            where the kernel has it, else iptables' statistic
#                                            match, which cannot delay: --delay needs netem)
#   scripts/simcluster.sh slow i PERCENT | off   cap host i's processes (those in its network
#                                            namespace now) at PERCENT % of one core per second
#                                            (cgroup cpu quota); run it after the job has started
#   scripts/simcluster.sh down               removes everything `up`, `shape` and `slurm` made
#
# Then:  mpirun -np 4 $(scripts/simcluster.sh mpirun-args) build/sdp-train ...
# or source the env file it writes (SIMCLUSTER_MPIRUN_ARGS, SIMCLUSTER_HOSTS, ...):
#        . "$(scripts/simcluster.sh env-file)"
#
# Layout (SIMCLUSTER_PREFIX=sdp, SIMCLUSTER_NET=10.213.0):
#   switch: namespace sdp-sw holding bridge br0, one port per host (h1..hN) and an uplink;
#   host i: namespace sdp-hi, eth0 = address 10.213.0.i/24 (veth to port hi of the switch),
#           host name sdp-hi (a UTS namespace per launched process), every host's name in
#           its /etc/hosts (/etc/netns/sdp-hi/hosts, which `ip netns exec` binds there);
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
# Slurm (`slurm`, after `up`): slurmctld runs in the root namespace at $NET.254 and one
# slurmd per host runs inside the host's network namespace, entered with `nsenter --net`
# (not `ip netns exec`, which remounts /sys and loses the cgroup mounts slurmd needs), with
# its own UTS namespace (host name) and mount namespace: the PMIx plugin keeps per-job
# directories under TmpFS, and slurmd's sharing a file system collide there, so each gets
# its own directory bound over the TmpFS path. One munged serves them all (its socket is a
# path). Jobs start from slurmd, so they inherit the host's namespaces, as on a real node.
# Clients (sbatch, srun, squeue, scancel) find the cluster through SLURM_CONF, which the
# env file exports. See docs/slurm.md.
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
# The host's CPU share and memory limit (simcluster.sh cpus, memory), inherited by everything
# launched from here, and visible there as a container's are: `ip netns exec` mounts a /sys of
# its own, without the cgroup file systems, so the controllers are mounted again inside.
controllers=""
for c in cpu memory; do
  if [ -d "/sys/fs/cgroup/$c/$host" ]; then
    echo $$ >"/sys/fs/cgroup/$c/$host/cgroup.procs"
    controllers="$controllers $c"
  fi
done
if [ -n "$controllers" ]; then
  exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" &&
    { mount -t tmpfs cgroup /sys/fs/cgroup && for c in '"$controllers"'; do
        mkdir /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c; done; } 2>/dev/null;
    exec sh -c "$*"' "$host" "$*"
fi
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
  # Each host resolves every host's name, as a cluster's DNS would: `ip netns exec` binds
  # /etc/netns/NS/hosts over /etc/hosts inside the namespace.
  for i in $(seq 1 "$n"); do
    mkdir -p "/etc/netns/$PREFIX-h$i"
    { cat /etc/hosts; for j in $(seq 1 "$n"); do echo "$NET.$j $PREFIX-h$j"; done; } >"/etc/netns/$PREFIX-h$i/hosts"
  done
  write_launch_files "$n" "$slots"
  echo "simcluster: $n hosts up ($(tr '\n' ' ' <"$STATE/hosts")), $slots slots each, subnet $NET.0/24"
}

# shape_dev NS DEV RATE [BURST]: HTB root qdisc with one class of RATE (burst >= 64 KiB: the
# kernel timer cannot release less per tick at Gbit/s; 256 KiB by default; an explicit
# quantum: HTB's default, rate / r2q, is too large at Gbit/s and warns). A message smaller
# than the burst leaves at the veth's own speed once the bucket has refilled.
shape_dev() {
  local ns=$1 dev=$2 rate=$3 burst=${4:-256k}
  local in=(ip netns exec "$ns")
  "${in[@]}" tc qdisc del dev "$dev" root 2>/dev/null || true
  [ "$rate" = off ] && return 0
  "${in[@]}" tc qdisc add dev "$dev" root handle 1: htb default 1
  "${in[@]}" tc class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" \
    burst "$burst" cburst "$burst" quantum 65536
}

cmd_shape() {
  local rate=${1:-} burst=256k
  [ "${2:-}" = --burst ] && burst=${3:?shape: --burst needs a size, e.g. 64k}
  [ -n "$rate" ] || die "shape: need a rate (e.g. 1gbit, 500mbit) or 'off'"
  need_root
  [ -n "$(hosts)" ] || die "shape: no cluster is up (run: $0 up N)"
  local i=0
  for ns in $(hosts); do
    i=$((i + 1))
    shape_dev "$ns" eth0 "$rate" "$burst"
    shape_dev "$SWITCH" "h$i" "$rate" "$burst"
  done
  if [ "$rate" = off ]; then
    rm -f "$STATE/rate"
    echo "simcluster: host links unshaped"
  else
    echo "$rate" >"$STATE/rate"
    echo "simcluster: host links shaped to $rate each way"
  fi
}

# delay: each host's switch port hi leaves the bridge; a relay in the switch namespace passes
# frames between hi and a new veth di (whose peer dbi joins the bridge), holding each MS.
cmd_delay() {
  local ms=${1:-} rate= bps=
  [ -n "$ms" ] || die "delay: need milliseconds added one way (e.g. 0.1, 2) or 'off'"
  if [ "${2:-}" = --rate ]; then
    rate=${3:?delay: --rate needs a rate, e.g. 1gbit}
    bps=$(awk -v r="$rate" 'BEGIN {
      n = r + 0; u = tolower(substr(r, length(n "") + 1))
      m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : u == "bit" ? 1 : 0
      if (n <= 0 || m == 0) exit 1; printf "%.0f", n * m }') ||
      die "delay: --rate '$rate' is not a rate (e.g. 1gbit, 500mbit)"
  fi
  need_root
  [ -n "$(hosts)" ] || die "delay: no cluster is up (run: $0 up N)"
  stop_delays
  if [ "$ms" = off ]; then
    echo "simcluster: host links without added delay"
    return 0
  fi
  local us
  us=$(awk -v ms="$ms" -v wire="$bps" 'BEGIN { if (ms + 0 < 0 || (ms + 0 == 0 && wire == "")) exit 1; printf "%d", ms * 1000 }') ||
    die "delay: '$ms' is not a positive number of milliseconds (0 only with --rate)"
  local relay=$STATE/delay_relay
  local source
  source=$(dirname "$0")/delay_relay.c
  if [ ! -x "$relay" ] || [ "$source" -nt "$relay" ]; then
    cc -O2 -Wall -o "$relay" "$source" || die "delay: could not build delay_relay.c (needs cc)"
  fi
  local sw=(ip netns exec "$SWITCH") i=0 ns
  for ns in $(hosts); do
    i=$((i + 1))
    "${sw[@]}" ip link set "h$i" nomaster
    "${sw[@]}" ip link add "d$i" type veth peer name "db$i"
    "${sw[@]}" ip link set "db$i" master br0 up
    "${sw[@]}" ip link set "d$i" up
    "${sw[@]}" "$relay" "h$i" "d$i" "$us" $bps >"$STATE/delay-h$i.log" 2>&1 &
    echo $! >"$STATE/delay-h$i.pid"
  done
  sleep 0.2
  for pid in "$STATE"/delay-h*.pid; do
    kill -0 "$(cat "$pid")" 2>/dev/null || die "delay: a relay did not start: $(cat "${pid%.pid}.log")"
  done
  echo "$ms" >"$STATE/delay"
  if [ -n "$rate" ]; then
    # The relay is the link now: no token bucket in front of it.
    i=0
    for ns in $(hosts); do
      i=$((i + 1))
      shape_dev "$ns" eth0 off
      shape_dev "$SWITCH" "h$i" off
    done
    echo "$rate (a wire: no burst)" >"$STATE/rate"
    echo "simcluster: host links $ms ms longer each way, $rate each way as a wire (no burst)"
    return 0
  fi
  echo "simcluster: host links $ms ms longer each way"
}

# Stops the relays and puts every host's switch port back on the bridge.
stop_delays() {
  local pid i=0 ns
  for pid in "$STATE"/delay-h*.pid; do
    [ -f "$pid" ] || continue
    kill "$(cat "$pid")" 2>/dev/null || true
    rm -f "$pid" "${pid%.pid}.log"
  done
  for ns in $(hosts); do
    i=$((i + 1))
    if ip netns exec "$SWITCH" ip link show "d$i" >/dev/null 2>&1; then
      ip netns exec "$SWITCH" ip link del "d$i"
      ip netns exec "$SWITCH" ip link set "h$i" master br0
    fi
  done
  rm -f "$STATE/delay"
  grep -qs "a wire" "$STATE/rate" && rm -f "$STATE/rate"  # the relays were the links' rate
  return 0
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
  echo "simcluster: $(hosts | wc -l) hosts, link rate $(cat "$STATE/rate" 2>/dev/null || echo unshaped)," \
    "added delay $(cat "$STATE/delay" 2>/dev/null || echo none)"
  echo "  mpirun $(cat "$STATE/mpirun-args")"
  for ns in $(hosts); do
    local addr
    addr=$(ip netns exec "$ns" ip -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')
    echo "  $ns ${addr:-?} tx_bytes=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes 2>/dev/null || echo ?)" \
      "rx_bytes=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes 2>/dev/null || echo ?)"
  done
}


# ---- Slurm on the simulated hosts ----------------------------------------------------------
SLURM_DIR=$STATE/slurm

slurm_pids() {  # the daemons `slurm` started, from their pid files
  cat "$SLURM_DIR"/run/*.pid 2>/dev/null || true
}

machine_gpu_count() {  # the GPUs nvidia-smi lists, 0 without one
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
  else
    echo 0
  fi
}

write_slurm_conf() {
  local slots=$1 gpus=$2
  local conf=$SLURM_DIR/slurm.conf
  mkdir -p "$SLURM_DIR"/{ctld,spool,run,log,tmpfs,hosttmp,munge}
  cat >"$conf" <<EOF
# Written by scripts/simcluster.sh slurm: a Slurm cluster on the simulated hosts.
ClusterName=${PREFIX}sim
SlurmctldHost=$PREFIX-ctl($NET.254)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long before it starts again (the revoked credential
# of its last run must expire first); 120 s by default, 10 here so that tests need not wait.
AuthInfo=socket=$SLURM_DIR/munge/munge.socket.2,cred_expire=10
StateSaveLocation=$SLURM_DIR/ctld
SlurmctldPidFile=$SLURM_DIR/run/slurmctld.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmdPidFile=$SLURM_DIR/run/slurmd-%n.pid
SlurmdLogFile=$SLURM_DIR/log/slurmd-%n.log
SlurmctldPort=${SIMCLUSTER_SLURMCTLD_PORT:-6817}
SlurmdPort=6818
TmpFS=$SLURM_DIR/tmpfs
# Every host shares this machine's cores: no binding, processes tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# Look at pending jobs every few seconds (default 60 s for the main pass, 30 s for backfill):
# a requeued job starts soon after its wait.
SchedulerParameters=sched_interval=5,bf_interval=5
SlurmdParameters=config_overrides
ReturnToService=2
# scancel and requeue send SIGTERM, then SIGKILL this many seconds later.
KillWait=30
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
EOF
  [ "$gpus" -gt 0 ] && echo "GresTypes=gpu" >>"$conf"
  : >"$SLURM_DIR/gres.conf"
  local i=0 first
  for ns in $(hosts); do
    i=$((i + 1))
    local gres=""
    if [ "$gpus" -gt 0 ]; then
      # The machine's GPUs dealt out: host i gets its own device files.
      first=$(((i - 1) * gpus))
      gres=" Gres=gpu:$gpus"
      echo "NodeName=$ns Name=gpu File=/dev/nvidia[$first-$((first + gpus - 1))]" >>"$SLURM_DIR/gres.conf"
    fi
    echo "NodeName=$ns NodeAddr=$NET.$i CPUs=$slots State=UNKNOWN$gres" >>"$conf"
  done
  echo "PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE" >>"$conf"
}

cmd_slurm() {
  local gpus=
  while [ $# -gt 0 ]; do
    case "$1" in
      --gpus) gpus=$2; shift 2 ;;
      *) die "slurm: unknown option $1" ;;
    esac
  done
  need_root
  [ -n "$(hosts)" ] || die "slurm: no cluster is up (run: $0 up N)"
  for tool in munged slurmctld slurmd sbatch srun sinfo nsenter; do
    command -v "$tool" >/dev/null ||
      skip "no '$tool' command (scripts/install-deps.sh installs Slurm and munge)"
  done
  [ -n "$(ls /sys/fs/cgroup 2>/dev/null)" ] || skip "slurmd needs a cgroup file system under /sys/fs/cgroup"
  cmd_slurm_down >/dev/null
  local n slots
  n=$(hosts | wc -l)
  slots=$(sed -n 's/^SIMCLUSTER_SLOTS=//p' "$STATE/env")
  [ -n "$gpus" ] || gpus=$(($(machine_gpu_count) / n))
  [[ "$gpus" =~ ^[0-9]+$ ]] || die "slurm: --gpus needs a count"
  write_slurm_conf "$slots" "$gpus"
  local conf=$SLURM_DIR/slurm.conf

  # munge: a fresh key for this cluster, one daemon for every host.
  dd if=/dev/urandom of="$SLURM_DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$SLURM_DIR/munge/munge.key"
  munged --force --socket="$SLURM_DIR/munge/munge.socket.2" --key-file="$SLURM_DIR/munge/munge.key" \
    --pid-file="$SLURM_DIR/run/munged.pid" --log-file="$SLURM_DIR/log/munged.log" \
    --seed-file="$SLURM_DIR/munge/munged.seed" >"$SLURM_DIR/log/munged.start" 2>&1 ||
    { cat "$SLURM_DIR/log/munged.start" >&2; die "slurm: munged did not start"; }

  # slurmctld checks that it runs on SlurmctldHost: give it that host name.
  unshare --uts sh -c 'hostname "$1" && exec slurmctld -f "$2"' sh "$PREFIX-ctl" "$conf" ||
    { tail -20 "$SLURM_DIR/log/slurmctld.log" >&2; die "slurm: slurmctld did not start"; }
  for ns in $(hosts); do
    mkdir -p "$SLURM_DIR/hosttmp/$ns" "$SLURM_DIR/spool/$ns"
    # The host's network, its own host name and its own TmpFS (see the header).
    nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
      sh -c 'hostname "$1" && mount --bind "$2" "$3" && exec slurmd -f "$4" -N "$1"' \
      sh "$ns" "$SLURM_DIR/hosttmp/$ns" "$SLURM_DIR/tmpfs" "$conf" ||
      { tail -20 "$SLURM_DIR/log/slurmd-$ns.log" >&2 2>/dev/null; die "slurm: slurmd on $ns did not start"; }
  done
  echo "export SLURM_CONF=$conf" >>"$STATE/env"
  # Every node idle (its slurmd registered) within 30 s.
  local tries=0 idle=0
  while [ $tries -lt 60 ]; do
    idle=$(SLURM_CONF=$conf sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
    [ "$idle" -eq "$n" ] && break
    sleep 0.5; tries=$((tries + 1))
  done
  if [ "$idle" -ne "$n" ]; then
    SLURM_CONF=$conf sinfo -N >&2 || true
    for log in "$SLURM_DIR"/log/*.log; do echo "== $log" && tail -n 5 "$log"; done >&2
    die "slurm: $idle of $n nodes idle after 30 s (logs: $SLURM_DIR/log)"
  fi
  echo "simcluster: slurm up: slurmctld at $NET.254, $n nodes of $slots CPUs$([ "$gpus" -gt 0 ] && echo " and $gpus GPUs") each, partition 'sim'"
  echo "  export SLURM_CONF=$conf"
}

# kill_in_hosts [COMM]: every process in the hosts' namespaces (only those named COMM when
# given), SIGTERM then SIGKILL after 2 s. A process in a namespace keeps it alive after `ip netns
# del`, unnamed, where nothing would find it again.
kill_in_hosts() {
  local ns pid pids=()
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-(h[0-9]+|sw)$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      [ -z "${1:-}" ] || [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$1" ] && pids+=("$pid")
    done
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 8); do kill -0 "${pids[@]}" 2>/dev/null || return 0; sleep 0.25; done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

cmd_slurm_down() {
  local pids
  pids=$(slurm_pids)
  if [ -n "$pids" ]; then
    # SIGTERM: slurmd ends its job steps, slurmctld saves its state.
    kill $pids 2>/dev/null || true
    for _ in $(seq 1 40); do
      kill -0 $pids 2>/dev/null || break
      sleep 0.25
    done
    kill -9 $pids 2>/dev/null || true
  fi
  # A job step's slurmstepd outlives a slurmd killed under it (one per test run was left).
  kill_in_hosts slurmstepd
  [ -f "$STATE/env" ] && sed -i '/SLURM_CONF/d' "$STATE/env"
  rm -rf "$SLURM_DIR"
  echo "simcluster: slurm down"
}

# host_ns I: checks that host I is up, prints its namespace.
host_ns() {
  local i=${1:-}
  [[ "$i" =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$(hosts | wc -l)" ] ||
    die "need a host number 1..$(hosts | wc -l) (hosts up: $(hosts | tr '\n' ' '))"
  echo "$PREFIX-h$i"
}

cmd_link() {
  local i=${1:-} state=${2:-}
  need_root
  host_ns "$i" >/dev/null
  case "$state" in
    down | up) ip netns exec "$SWITCH" ip link set "h$i" "$state" ;;
    *) die "link: need 'down' or 'up'" ;;
  esac
  echo "simcluster: link of $PREFIX-h$i $state"
}

has_netem() {  # the kernel's netem qdisc (a module some kernels lack)
  local probe=$PREFIX-netem$$ ok=1
  ip netns add "$probe" 2>/dev/null || return 1
  ip netns exec "$probe" tc qdisc add dev lo root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$probe"
  return $ok
}

cmd_impair() {
  local i=${1:-}; shift || true
  local loss="" delay="" jitter=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --loss) loss=$2; shift 2 ;;
      --delay) delay=$2; shift 2 ;;
      --jitter) jitter=$2; shift 2 ;;
      off) loss=off; shift ;;
      *) die "impair: unknown option $1" ;;
    esac
  done
  need_root
  local ns
  ns=$(host_ns "$i")
  local in=(ip netns exec "$ns")
  # Whatever an earlier call set, both kinds.
  "${in[@]}" tc qdisc del dev eth0 root 2>/dev/null || true
  ip netns exec "$SWITCH" tc qdisc del dev "h$i" root 2>/dev/null || true
  if command -v iptables >/dev/null; then
    "${in[@]}" iptables -F INPUT 2>/dev/null || true
    "${in[@]}" iptables -F OUTPUT 2>/dev/null || true
  fi
  if [ "$loss" = off ]; then echo "simcluster: $ns unimpaired"; return 0; fi
  [[ "$loss" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "impair: --loss needs a percentage (e.g. 1, 5, 0.5)"
  if has_netem; then
    local netem=(netem loss "$loss%")
    [ -n "$delay" ] && netem+=(delay "${delay}ms" ${jitter:+"${jitter}ms"})
    "${in[@]}" tc qdisc add dev eth0 root "${netem[@]}"
    ip netns exec "$SWITCH" tc qdisc add dev "h$i" root "${netem[@]}"
    echo "simcluster: $ns loses $loss % each way${delay:+, delay ${delay} ms${jitter:+ +- ${jitter} ms}} (netem)"
    return 0
  fi
  [ -z "$delay" ] || skip "impair: --delay needs the kernel's netem qdisc, which this kernel lacks"
  command -v iptables >/dev/null || skip "impair: no netem and no iptables (apt-get install iptables)"
  local p
  p=$(awk -v l="$loss" 'BEGIN { printf "%.6f", l / 100 }')
  "${in[@]}" iptables -A INPUT -i eth0 -m statistic --mode random --probability "$p" -j DROP
  "${in[@]}" iptables -A OUTPUT -o eth0 -m statistic --mode random --probability "$p" -j DROP
  echo "simcluster: $ns loses $loss % each way (iptables statistic; this kernel has no netem)"
}

# Moves a cgroup's processes back to the root group and removes it. A process that is being
# created or reaped there meanwhile keeps it busy for a moment (rmdir: "Device or resource
# busy", seen once in CI), hence the retries.
remove_cgroup() {
  local cg=$1 pid
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    while read -r pid; do echo "$pid" >"$(dirname "$cg")/cgroup.procs" 2>/dev/null || true; done <"$cg/cgroup.procs"
    rmdir "$cg" 2>/dev/null && return 0
    sleep 0.1
  done
  rmdir "$cg"
}

cmd_slow() {
  local i=${1:-} percent=${2:-}
  need_root
  local ns
  ns=$(host_ns "$i")
  local cg=/sys/fs/cgroup/cpu/$ns
  [ -d /sys/fs/cgroup/cpu ] || skip "slow: no cgroup v1 cpu controller at /sys/fs/cgroup/cpu"
  if [ "$percent" = off ]; then
    [ -d "$cg" ] && remove_cgroup "$cg"
    echo "simcluster: $ns at full speed"
    return 0
  fi
  [[ "$percent" =~ ^[0-9]+$ ]] && [ "$percent" -ge 1 ] || die "slow: need a percentage of one core (e.g. 20) or 'off'"
  mkdir -p "$cg"
  # A 1 s period (the longest CFS allows): the host runs, then stands still for the rest of the
  # second, as a host that loses its CPU in bursts (a noisy neighbour, a throttled VM) does.
  echo 1000000 >"$cg/cpu.cfs_period_us"
  echo $((percent * 10000)) >"$cg/cpu.cfs_quota_us"
  local moved=0
  for pid in $(ip netns pids "$ns"); do
    echo "$pid" >"$cg/cgroup.procs" 2>/dev/null && moved=$((moved + 1))
  done
  echo "simcluster: $ns capped at $percent % of one core ($moved processes)"
}

cmd_cpus() {
  local cpus=${1:-}
  need_root
  [ -d /sys/fs/cgroup/cpu ] || skip "cpus: no cgroup v1 cpu controller at /sys/fs/cgroup/cpu"
  local ns cg period=${SIMCLUSTER_CPU_PERIOD_US:-2500}
  for ns in $(hosts); do
    cg=/sys/fs/cgroup/cpu/$ns
    if [ "$cpus" = off ]; then
      [ -d "$cg" ] && remove_cgroup "$cg"
      continue
    fi
    [[ "$cpus" =~ ^[0-9]*\.?[0-9]+$ ]] || die "cpus: need a number of CPUs (e.g. 0.45) or 'off'"
    mkdir -p "$cg"
    # A short period (SIMCLUSTER_CPU_PERIOD_US, default 2.5 ms, longer where the quota would be
    # under the 1 ms CFS allows): a step of a few milliseconds sees a steady share, not a full
    # core in bursts; with 10 ms, Open MPI's polling used up a host's quota while it waited and
    # the host then stood still for the rest of the period (LeNet-5 4x1 flat: 18-40 ms a step).
    period=$(awk -v c="$cpus" -v p="$period" 'BEGIN { m = int(1000 / c) + 1; printf "%d", (p > m ? p : m) }')
    echo "$period" >"$cg/cpu.cfs_period_us"
    echo "$(awk -v c="$cpus" -v p="$period" 'BEGIN { printf "%d", c * p }')" >"$cg/cpu.cfs_quota_us"
  done
  if [ "$cpus" = off ]; then echo "simcluster: hosts at the machine's full speed"; else echo "simcluster: each host's new processes get at most $cpus CPUs"; fi
}

cmd_memory() {
  local size=${1:-}
  need_root
  [ -d /sys/fs/cgroup/memory ] || skip "memory: no cgroup v1 memory controller at /sys/fs/cgroup/memory"
  local ns cg bytes
  if [ "$size" != off ]; then
    bytes=$(numfmt --from=iec "$size" 2>/dev/null) || die "memory: need a size (e.g. 2G, 1500M) or 'off'"
  fi
  for ns in $(hosts); do
    cg=/sys/fs/cgroup/memory/$ns
    if [ "$size" = off ]; then
      [ -d "$cg" ] && remove_cgroup "$cg"
      continue
    fi
    mkdir -p "$cg"
    echo "$bytes" >"$cg/memory.limit_in_bytes"
    echo 0 >"$cg/memory.max_usage_in_bytes"  # the peak from now on
  done
  if [ "$size" = off ]; then echo "simcluster: hosts without a memory limit"; else echo "simcluster: each host's new processes share at most $size of memory"; fi
}

cmd_down() {
  need_root
  for cg in /sys/fs/cgroup/memory/$PREFIX-h*; do  # `memory` limits
    [ -d "$cg" ] || continue
    remove_cgroup "$cg" 2>/dev/null || true
  done
  for cg in /sys/fs/cgroup/cpu/$PREFIX-h*; do  # `slow` caps
    [ -d "$cg" ] || continue
    remove_cgroup "$cg" 2>/dev/null || true
  done
  cmd_slurm_down >/dev/null
  for pid in "$STATE"/delay-h*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true; done
  kill_in_hosts  # what the hosts still run: ranks, launchers, daemons of a test that died
  # Everything this prefix names, whether or not the state file lists it. Deleting a
  # namespace deletes the veths inside it and their peers.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-(h[0-9]+|sw)$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$UPLINK" 2>/dev/null || true
  rm -rf "$STATE" /etc/netns/"$PREFIX"-h*
  echo "simcluster: down"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  shape) shift; cmd_shape "$@" ;;
  delay) shift; cmd_delay "$@" ;;
  cpus) shift; cmd_cpus "$@" ;;
  memory) shift; cmd_memory "$@" ;;
  slurm) shift; cmd_slurm "$@" ;;
  slurm-down) need_root; cmd_slurm_down ;;
  down) cmd_down ;;
  status) cmd_status ;;
  counters) cmd_counters ;;
  link) shift; cmd_link "$@" ;;
  impair) shift; cmd_impair "$@" ;;
  slow) shift; cmd_slow "$@" ;;
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
