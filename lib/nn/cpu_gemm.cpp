#include "nn/cpu_gemm.hpp"

#include <dnnl.h>

#include <string>

#include "core/error.hpp"

namespace sdp::nn {

void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw RuntimeError("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") for " +
                       std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
}

}  // namespace sdp::nn
