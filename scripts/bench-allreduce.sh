#!/usr/bin/env bash
# AllReduce benchmark: every algorithm side by side with Open MPI's own MPI_Allreduce, in
# the nccl-tests table format (see lib/distributed/allreduce_bench.hpp).
#
#   scripts/bench-allreduce.sh [-np N] [--runs K] [bench options...]
#     -np N        ranks (default 2)
#     --runs K     repeat the whole sweep K times and print the per-row MEDIAN (default 1)
#     bench options are passed through: --min-bytes --max-bytes --iters --algorithms
#     --compression, and --ranks-per-node R (simulated nodes; `--set
#     distributed.ranks_per_node=R` for the sdp-train CLI)
#
# Runs `sdp-train bench allreduce` when the binary has that command, else the stand-alone
# driver tests/mpi/sdp_bench_allreduce. BUILD_DIR picks the build (default: build, then
# build-dist). For final numbers: a quiet machine (check `top`), several runs.
set -euo pipefail
cd "$(dirname "$0")/.."

np=2
runs=1
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -np) np="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# More ranks than cores: do not busy-poll (a spinning rank steals its peer's core).
if [ "$np" -gt "$(nproc)" ]; then export OMPI_MCA_mpi_yield_when_idle=1; fi

cmd=()
for dir in ${BUILD_DIR:-build build-dist}; do
  if [ -x "$dir/sdp-train" ] && "$dir/sdp-train" bench --help 2>&1 | grep -qE "^ +allreduce"; then
    # The CLI spells the topology override as a job-spec key.
    cli_args=()
    for ((i = 0; i < ${#args[@]}; i++)); do
      if [ "${args[$i]}" = "--ranks-per-node" ]; then
        cli_args+=(--set "distributed.ranks_per_node=${args[$((i + 1))]}"); i=$((i + 1))
      else
        cli_args+=("${args[$i]}")
      fi
    done
    cmd=("$dir/sdp-train" bench allreduce ${cli_args[@]+"${cli_args[@]}"})
    break
  fi
  if [ -x "$dir/tests/mpi/sdp_bench_allreduce" ]; then
    cmd=("$dir/tests/mpi/sdp_bench_allreduce" ${args[@]+"${args[@]}"})
    break
  fi
done
if [ ${#cmd[@]} -eq 0 ]; then
  echo "bench-allreduce: no sdp-train with 'bench allreduce' and no sdp_bench_allreduce found; build first" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((run = 1; run <= runs; run++)); do
  mpirun -np "$np" --oversubscribe "${cmd[@]}" > "$tmp/run$run.txt"
  [ "$runs" -gt 1 ] || cat "$tmp/run1.txt"
done
[ "$runs" -gt 1 ] || exit 0

# Median of every numeric column over the runs, row by row (rows are in the same order).
python3 - "$runs" "$tmp" <<'PY'
import statistics, sys
runs, tmp = int(sys.argv[1]), sys.argv[2]
tables = [open(f"{tmp}/run{r}.txt").read().splitlines() for r in range(1, runs + 1)]
print(f"# median of {runs} runs (vs_mpi: median of the per-run ratios)")
for lines in zip(*tables):
    if lines[0].startswith("#"):
        print(lines[0])
        continue
    cols = [l.split() for l in lines]
    out = []
    for j, c in enumerate(cols[0]):
        vals = [row[j] for row in cols]
        try:
            med = statistics.median(float(v) for v in vals)
            out.append(c if j < 2 else (f"{med:.3g}" if j == 6 else f"{med:.2f}" if j in (7, 4, 5) else f"{med:.1f}" if j == 3 else f"{med:.0f}"))
        except ValueError:
            out.append(c)
    print(" %13s %13s %-14s %11s %11s %11s %9s %7s %6s" % tuple(out))
PY
