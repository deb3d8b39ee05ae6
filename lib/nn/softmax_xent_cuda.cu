// CUDA kernels of softmax_xent_cuda.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "core/stream_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/softmax_xent_cuda.hpp"
#include "nn/softmax_xent_rule.hpp"

namespace sdp::nn::cuda_xent {

namespace {

constexpr int kRowThreads = 128;
constexpr int kSumThreads = 256;

// One thread per sample (K is small: 10 to 1000 classes). row_loss[i] is the row's loss and
// row_loss[n + i] 1 for a top-1 hit; a bad label's row is all zeros and raises the flag.
template <class T>
__global__ void rows_kernel(const T* logits, const int32_t* labels, int64_t n, int k, XentTarget q, float inv_n,
                            float* grad, double* row_loss, int* bad_label) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int32_t label = labels[i];
  double* hit = row_loss + n;  // second half of the scratch: 1.0 for a top-1 hit
  if (label < 0 || label >= k) {
    atomicOr(bad_label, 1);
    row_loss[i] = 0.0;
    hit[i] = 0.0;
    for (int j = 0; j < k; ++j) grad[i * k + j] = 0.0f;
    return;
  }
  int argmax = 0;
  row_loss[i] = softmax_xent_row(logits + i * k, k, label, q, inv_n, grad + i * k, &argmax);
  hit[i] = argmax == label ? 1.0 : 0.0;
}

// One block: strided partial sums, then a fixed tree (deterministic).
__global__ void sum_kernel(const double* row_loss, int64_t n, double* totals) {
  __shared__ double loss[kSumThreads];
  __shared__ double hits[kSumThreads];
  double l = 0.0, h = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    l += row_loss[i];
    h += row_loss[n + i];
  }
  loss[threadIdx.x] = l;
  hits[threadIdx.x] = h;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      loss[threadIdx.x] += loss[threadIdx.x + width];
      hits[threadIdx.x] += hits[threadIdx.x + width];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals[0] = loss[0];
    totals[1] = hits[0];
  }
}

}  // namespace

void forward(DType logits_dtype, const void* logits, const int32_t* labels, int64_t n, int k, float label_smoothing,
             float loss_scale, float* grad, double* row_loss, double* totals, int* bad_label, Stream* stream) {
  if (n <= 0) return;
  cudaStream_t s = cuda_stream_of(stream);
  const unsigned blocks = static_cast<unsigned>((n + kRowThreads - 1) / kRowThreads);
  const float inv_n = 1.0f / static_cast<float>(n) * loss_scale;
  nn::cuda::with_storage_type(logits_dtype, [&](auto tag) {
    using T = nn::cuda::storage_t<decltype(tag)>;
    rows_kernel<T><<<blocks, kRowThreads, 0, s>>>(static_cast<const T*>(logits), labels, n, k,
                                                  xent_target(label_smoothing, k), inv_n, grad, row_loss, bad_label);
  });
  sum_kernel<<<1, kSumThreads, 0, s>>>(row_loss, n, totals);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw RuntimeError(std::string("softmax cross-entropy on the GPU: launch failed: ") + cudaGetErrorString(status));
}

}  // namespace sdp::nn::cuda_xent
