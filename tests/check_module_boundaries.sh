#!/usr/bin/env bash
# The module boundaries of docs/architecture.md ("Modules", "Layers"), checked on the source tree:
#  * no oneDNN type in any header outside nn/'s oneDNN files (onednn*.hpp, *_cpu.hpp and the
#    CPU kernels they use), so a CUDA layer can implement every interface;
#  * no CUDA, cuBLAS or cuDNN type in any header but the private *_cuda.hpp ones, and those
#    included only by CUDA sources (*.cu, *_cuda.cpp) and other *_cuda.hpp;
#  * nn/ never includes MPI or distributed/; distributed/ never includes a layer;
#  * every thread the product makes starts in the job's floating-point mode: made by
#    core/floating_point.hpp's start_thread, never by a bare std::thread / pthread_create.
# Usage: check_module_boundaries.sh SOURCE_DIR
set -uo pipefail
cd "${1:?source dir}"
status=0
fail() { echo "module boundary: $*" >&2; status=1; }

for h in $(find lib models apps -name '*.hpp'); do
  case "$h" in
    lib/nn/onednn*.hpp | lib/nn/*_cpu.hpp | lib/nn/activation_layout.hpp) continue ;;
  esac
  if grep -nE '<dnnl|dnnl::|nn/onednn|memory::desc' "$h"; then
    fail "$h names oneDNN: only nn/'s oneDNN files (onednn*.hpp, *_cpu.hpp) may"
  fi
done
cuda_api='<(cuda_runtime|cuda_fp16|cuda_bf16|cublas|cublasLt|cudnn|nccl)[a-z_0-9]*\.h>|\bcuda(Stream|Event|Error)_t\b|\bcu(blas|dnn)[A-Z][A-Za-z]*_t\b|\bnccl(Comm|UniqueId|Result)_t\b'
cuda_headers=()
for h in $(find lib models apps -name '*.hpp'); do
  if sed -e 's://.*$::' "$h" | grep -qE "$cuda_api"; then  # code, not comments
    case "$h" in
      *_cuda.hpp) cuda_headers+=("$h") ;;
      *) sed -e 's://.*$::' "$h" | grep -nE "$cuda_api"; fail "$h names a CUDA type: only private *_cuda.hpp headers may" ;;
    esac
  fi
done
for h in "${cuda_headers[@]}"; do
  inc="${h#lib/}"
  for f in $(grep -rlE "#include +\"$inc\"" lib models apps tests 2>/dev/null); do
    case "$f" in
      *.cu | *_cuda.cpp | *_cuda.hpp) ;;
      *) fail "$f includes $inc, which names CUDA types: only *.cu, *_cuda.cpp and *_cuda.hpp may" ;;
    esac
  done
done
grep -rnE '#include +[<"](mpi\.h|distributed/)' lib/nn && fail "lib/nn includes MPI or distributed/"
grep -rnE '#include +"nn/' lib/distributed && fail "lib/distributed includes a layer (nn/)"
if grep -rnE 'std::(j)?thread *(\(|\{|[a-z_]+ *[({])|pthread_create' lib models apps --include='*.cpp' --include='*.hpp' --include='*.cu' |
   grep -v '^lib/core/floating_point.hpp:' | grep -vE '^[^:]+:[0-9]+: *//'; then
  fail "a thread made without start_thread (core/floating_point.hpp): it would not flush denormals"
fi
[ $status -eq 0 ] && echo "module boundaries hold"
exit $status
