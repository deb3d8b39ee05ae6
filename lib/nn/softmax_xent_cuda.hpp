// Softmax cross-entropy on a GPU: softmax_xent_rule.hpp's row arithmetic, one
// thread per sample, then one block that adds the rows' losses and hits in a fixed order, so
// every GPU gets the same bits. No CUDA type here; the functions exist only in a build with
// the CUDA backend (SDP_HAVE_CUDA). Enqueued on `stream` (a CUDA Stream; null = CUDA's default
// stream); nothing waits: the caller reads `totals` when it logs.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "core/stream.hpp"

namespace sdp::nn::cuda_xent {

// Device pointers: logits [n, k] of `logits_dtype` and the f32 grad [n, k] (plain
// row-major), labels [n], row_loss [2 n] (scratch), totals [2] = {sum of the rows' losses,
// number of top-1 hits}. The gradient is multiplied by `loss_scale`. A label outside [0, k)
// sets *bad_label (never cleared here) and its row contributes nothing.
void forward(DType logits_dtype, const void* logits, const int32_t* labels, int64_t n, int k, float label_smoothing,
             float loss_scale, float* grad, double* row_loss, double* totals, int* bad_label, Stream* stream);

}  // namespace sdp::nn::cuda_xent
