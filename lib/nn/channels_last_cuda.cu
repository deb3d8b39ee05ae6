// CUDA kernels of channels_last_cuda.hpp.
#include "nn/channels_last_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/elementwise_rule.hpp"

namespace sdp::nn::cuda {

namespace {

// One thread per OHWI element j = ((o * kh + y) * kw + x) * in + i.
template <class T>
__global__ void filter_to_ohwi_kernel(T* dst, const float* src, int64_t out, int64_t in, int64_t kh, int64_t kw) {
  const int64_t total = out * in * kh * kw;
  SDP_GRID_STRIDE(j, total) {
    const int64_t i = j % in;
    const int64_t x = (j / in) % kw;
    const int64_t y = (j / (in * kw)) % kh;
    const int64_t o = j / (in * kw * kh);
    dst[j] = store_as<T>(src[((o * in + i) * kh + y) * kw + x]);
  }
}

// One thread per OIHW element j = ((o * in + i) * kh + y) * kw + x.
template <class T>
__global__ void filter_grad_to_oihw_kernel(float* dst, const T* src, int64_t out, int64_t in, int64_t kh,
                                           int64_t kw) {
  const int64_t total = out * in * kh * kw;
  SDP_GRID_STRIDE(j, total) {
    const int64_t x = j % kw;
    const int64_t y = (j / kw) % kh;
    const int64_t i = (j / (kw * kh)) % in;
    const int64_t o = j / (kw * kh * in);
    dst[j] = load_f32(src[((o * kh + y) * kw + x) * in + i]);
  }
}

// One thread per NHWC element j = (b * hw + p) * c + ch.
template <class T>
__global__ void stage_nhwc_kernel(T* dst, const float* src, int64_t n, int64_t c, int64_t hw) {
  const int64_t total = n * c * hw;
  SDP_GRID_STRIDE(j, total) {
    const int64_t ch = j % c;
    const int64_t p = (j / c) % hw;
    const int64_t b = j / (c * hw);
    dst[j] = store_as<T>(src[(b * c + ch) * hw + p]);
  }
}

template <class T>
__global__ void batchnorm_inference_nhwc_kernel(const T* x, const T* z, T* y, const float* gamma, const float* beta,
                                                const float* mean, const float* var, float eps, int64_t c,
                                                int64_t count, bool relu) {
  SDP_GRID_STRIDE(j, count) {
    const int64_t ch = j % c;
    float v = (load_f32(x[j]) - mean[ch]) * (gamma[ch] * rsqrtf(var[ch] + eps)) + beta[ch];
    if (z != nullptr) v += load_f32(z[j]);
    y[j] = store_as<T>(relu ? relu_forward(v) : v);
  }
}

// One thread per (b, ch): adjacent threads read adjacent channels (coalesced), each sums its
// hw positions in order.
template <class T>
__global__ void global_avg_pool_nhwc_kernel(const T* x, T* y, int64_t n, int64_t hw, int64_t c) {
  const int64_t total = n * c;
  SDP_GRID_STRIDE(j, total) {
    const int64_t ch = j % c;
    const int64_t b = j / c;
    const T* p = x + b * hw * c + ch;
    float s = 0.0f;
    for (int64_t q = 0; q < hw; ++q) s += load_f32(p[q * c]);
    y[j] = store_as<T>(s / static_cast<float>(hw));
  }
}

template <class T>
__global__ void global_avg_pool_nhwc_backward_kernel(const T* dy, T* dx, int64_t n, int64_t hw, int64_t c) {
  const int64_t total = n * hw * c;
  SDP_GRID_STRIDE(j, total) {
    const int64_t ch = j % c;
    const int64_t b = j / (hw * c);
    dx[j] = store_as<T>(load_f32(dy[b * c + ch]) / static_cast<float>(hw));
  }
}

}  // namespace

void filter_to_ohwi(DType dtype, void* dst, const float* src, int64_t out, int64_t in, int64_t kh, int64_t kw,
                    cudaStream_t stream) {
  const int64_t total = out * in * kh * kw;
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    filter_to_ohwi_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(static_cast<T*>(dst), src, out, in, kh, kw);
  });
  check_launch("filter_to_ohwi_kernel");
}

void filter_grad_to_oihw(DType dtype, float* dst, const void* src, int64_t out, int64_t in, int64_t kh, int64_t kw,
                         cudaStream_t stream) {
  const int64_t total = out * in * kh * kw;
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    filter_grad_to_oihw_kernel<T>
        <<<grid_for(total), kThreads, 0, stream>>>(dst, static_cast<const T*>(src), out, in, kh, kw);
  });
  check_launch("filter_grad_to_oihw_kernel");
}

void stage_nhwc(DType dtype, void* dst, const float* src, int64_t n, int64_t c, int64_t hw, cudaStream_t stream) {
  const int64_t total = n * c * hw;
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    stage_nhwc_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(static_cast<T*>(dst), src, n, c, hw);
  });
  check_launch("stage_nhwc_kernel");
}

void batchnorm_inference_nhwc(DType dtype, const void* x, const void* z, void* y, const float* gamma,
                              const float* beta, const float* mean, const float* var, float eps, int64_t channels,
                              int64_t count, bool relu, cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    batchnorm_inference_nhwc_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(z), static_cast<T*>(y), gamma, beta, mean, var, eps, channels,
        count, relu);
  });
  check_launch("batchnorm_inference_nhwc_kernel");
}

void global_avg_pool_nhwc(DType dtype, const void* x, void* y, int64_t n, int64_t hw, int64_t c,
                          cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    global_avg_pool_nhwc_kernel<T>
        <<<grid_for(n * c), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, hw, c);
  });
  check_launch("global_avg_pool_nhwc_kernel");
}

void global_avg_pool_nhwc_backward(DType dtype, const void* dy, void* dx, int64_t n, int64_t hw, int64_t c,
                                   cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    global_avg_pool_nhwc_backward_kernel<T>
        <<<grid_for(n * hw * c), kThreads, 0, stream>>>(static_cast<const T*>(dy), static_cast<T*>(dx), n, hw, c);
  });
  check_launch("global_avg_pool_nhwc_backward_kernel");
}

}  // namespace sdp::nn::cuda
