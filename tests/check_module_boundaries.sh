#!/usr/bin/env bash
# The module boundaries of DESIGN.md §2 and §6, checked on the source tree:
#  * no oneDNN type in any header outside nn/'s oneDNN files (onednn*.hpp, *_cpu.hpp and the
#    CPU kernels they use), so a CUDA layer can implement every interface;
#  * nn/ never includes MPI or distributed/; distributed/ never includes a layer.
# Usage: check_module_boundaries.sh SOURCE_DIR
set -uo pipefail
cd "${1:?source dir}"
status=0
fail() { echo "module boundary: $*" >&2; status=1; }

for h in $(find lib models apps -name '*.hpp'); do
  case "$h" in
    lib/nn/onednn*.hpp | lib/nn/*_cpu.hpp | lib/nn/direct_max_pool.hpp) continue ;;
  esac
  if grep -nE '<dnnl|dnnl::|nn/onednn|memory::desc' "$h"; then
    fail "$h names oneDNN: only nn/'s oneDNN files (onednn*.hpp, *_cpu.hpp) may"
  fi
done
grep -rnE '#include +[<"](mpi\.h|distributed/)' lib/nn && fail "lib/nn includes MPI or distributed/"
grep -rnE '#include +"nn/' lib/distributed && fail "lib/distributed includes a layer (nn/)"
[ $status -eq 0 ] && echo "module boundaries hold"
exit $status
