// CUDA kernel of channel_sum_cuda.hpp.
#include "nn/channel_sum_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"

namespace sdp::nn::cuda {

namespace {

constexpr int kSumThreads = 256;

// One block per channel: strided partial sums, then a fixed tree (deterministic).
template <class T>
__global__ void channel_sum_kernel(const T* x, float* sums, int64_t n, int64_t c, int64_t hw) {
  __shared__ float partial[kSumThreads];
  const int64_t ch = blockIdx.x;
  const int64_t count = n * hw;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += load_f32(x[((i / hw) * c + ch) * hw + i % hw]);
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[ch] = partial[0];
}

}  // namespace

void channel_sums(DType dtype, const void* x, float* sums, int64_t n, int64_t c, int64_t hw, cudaStream_t stream) {
  if (c <= 0) return;
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    channel_sum_kernel<T><<<static_cast<unsigned>(c), kSumThreads, 0, stream>>>(static_cast<const T*>(x), sums, n, c,
                                                                                hw);
  });
  check_launch("channel_sum_kernel");
}

}  // namespace sdp::nn::cuda
