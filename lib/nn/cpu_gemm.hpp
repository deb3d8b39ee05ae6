// Row-major single-precision GEMM on the CPU, through oneDNN's sgemm (its JIT kernels for the
// CPU's ISA, threaded over the pool nn::set_num_threads sets). For layers written outside the
// oneDNN primitive graph (the CTR models' MLP, ctr/), so that oneDNN stays behind nn/.
#pragma once

#include <cstdint>

namespace sdp::nn {

// C[m x n] = alpha * op(A) * op(B) + beta * C, each row-major with its leading dimension;
// op(X) = X, or its transpose when trans_x. Throws RuntimeError when oneDNN refuses.
void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace sdp::nn
