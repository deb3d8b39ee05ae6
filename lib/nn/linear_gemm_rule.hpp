// The three column-major GEMMs of LinearCuda (linear_cuda.cu) for row-major PyTorch tensors,
// as data, so the CPU tests (test_cuda_rules.cpp) run them through a reference column-major
// GEMM against the CPU twin: the transposes and leading dimensions are checked without a GPU.
//
// cuBLAS is column-major; a row-major [r, c] matrix is the column-major [c, r] matrix, its
// transpose, with leading dimension c. With X [N, in], W [out, in], Y and dY [N, out]:
//   forward        Y^T  = W · X^T     A = W (T),  B = X (N),  C = Y
//   weight grad    dW^T = X^T · dY    A = X (N),  B = dY (T), C = dW
//   input grad     dX^T = W^T · dY^T  A = W (N),  B = dY (N), C = dX
#pragma once

namespace sdp::nn {

// C (m x n) = op(A) (m x k) · op(B) (k x n), column-major, leading dimensions lda/ldb/ldc.
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
};

struct LinearGemms {
  GemmShape forward, weight_grad, input_grad;
};

inline LinearGemms linear_gemms(int batch, int in, int out) {
  LinearGemms g;
  g.forward = {true, false, out, batch, in, in, in, out};
  g.weight_grad = {false, true, in, out, batch, in, out, in};
  g.input_grad = {false, false, in, batch, out, in, out, in};
  return g;
}

}  // namespace sdp::nn
