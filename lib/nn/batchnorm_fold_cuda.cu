// CUDA kernels of batchnorm_fold_cuda.hpp.
#include "nn/batchnorm_fold_cuda.hpp"

#include <cstdint>

#include "nn/batchnorm_fold_rule.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"

namespace sdp::nn::cuda {

namespace {

template <class T>
__global__ void batchnorm_fold_finalize_kernel(const float* sum, const float* sq_sum, float count, const float* gamma,
                                               const float* beta, float eps, float momentum, float* running_mean,
                                               float* running_var, float* save_mean, float* save_inv_std, T* scale,
                                               T* bias, int64_t channels) {
  SDP_GRID_STRIDE(ch, channels) {
    const BatchNormFoldChannel c = fold_batch_statistics(sum[ch], sq_sum[ch], count, gamma[ch], beta[ch], eps);
    save_mean[ch] = c.mean;
    save_inv_std[ch] = c.inv_std;
    running_mean[ch] = batchnorm_running_mean(running_mean[ch], c.mean, momentum);
    running_var[ch] = batchnorm_running_var(running_var[ch], c.var, count, momentum);
    scale[ch] = store_as<T>(c.scale);
    bias[ch] = store_as<T>(c.bias);
  }
}

template <class T>
__global__ void batchnorm_fold_inference_kernel(const float* running_mean, const float* running_var,
                                                const float* gamma, const float* beta, float eps, T* scale, T* bias,
                                                int64_t channels) {
  SDP_GRID_STRIDE(ch, channels) {
    const BatchNormFoldChannel c = fold_running_statistics(running_mean[ch], running_var[ch], gamma[ch], beta[ch], eps);
    scale[ch] = store_as<T>(c.scale);
    bias[ch] = store_as<T>(c.bias);
  }
}

// One thread per NHWC element; the per-channel coefficients are recomputed per element (a few
// flops against the three tensors' traffic, which binds this pass).
template <class T>
__global__ void batchnorm_fold_input_grad_kernel(const T* drelu, const T* x, const float* dscale, const float* dbias,
                                                 const float* mean, const float* inv_std, const float* gamma,
                                                 float count, T* dx, int64_t channels, int64_t numel) {
  SDP_GRID_STRIDE(j, numel) {
    const int64_t ch = j % channels;
    const BatchNormInputGradCoefficients k =
        batchnorm_input_grad_coefficients(dscale[ch], dbias[ch], mean[ch], inv_std[ch], gamma[ch], count);
    dx[j] = store_as<T>(fold_input_grad_element(k, load_f32(drelu[j]), load_f32(x[j])));
  }
}

// The same, 16 bytes of each tensor a thread (8 16-bit values of 8 consecutive channels: the
// channels are a multiple of 8), which is what lets a 16-bit pass run at the memory's speed.
// Tensors 16-byte aligned; `vectors` = numel / V.
template <class T>
__global__ void batchnorm_fold_input_grad_vector_kernel(const T* drelu, const T* x, const float* dscale,
                                                        const float* dbias, const float* mean, const float* inv_std,
                                                        const float* gamma, float count, T* dx, int64_t channels,
                                                        int64_t vectors) {
  constexpr int V = static_cast<int>(16 / sizeof(T));
  SDP_GRID_STRIDE(v, vectors) {
    const uint4 rd = reinterpret_cast<const uint4*>(drelu)[v];
    const uint4 rx = reinterpret_cast<const uint4*>(x)[v];
    uint4 ry;
    const T* ed = reinterpret_cast<const T*>(&rd);
    const T* ex = reinterpret_cast<const T*>(&rx);
    T* ey = reinterpret_cast<T*>(&ry);
    const int64_t first = (v * V) % channels;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int64_t ch = first + k;
      const BatchNormInputGradCoefficients c =
          batchnorm_input_grad_coefficients(dscale[ch], dbias[ch], mean[ch], inv_std[ch], gamma[ch], count);
      ey[k] = store_as<T>(fold_input_grad_element(c, load_f32(ed[k]), load_f32(ex[k])));
    }
    reinterpret_cast<uint4*>(dx)[v] = ry;
  }
}

// A channel's scale and bias from a BatchNorm's saved statistics.
__device__ BatchNormFoldChannel saved_channel(const FoldedStatistics& s, int64_t ch) {
  return fold_saved_statistics(s.mean[ch], s.inv_std[ch], s.gamma[ch], s.beta[ch]);
}

// The sum's second term: z, or the shortcut's convolution output through its folded BatchNorm.
__device__ float shortcut_term(const FoldedStatistics& shortcut, int64_t ch, float z) {
  return shortcut.mean == nullptr ? z : fold_shortcut_element(saved_channel(shortcut, ch), z);
}

// One thread per mask byte: 8 elements. Vector: 16 bytes of x, z and y a thread (the channels a
// multiple of 8, the tensors 16-byte aligned); otherwise element by element.
template <class T, bool kVector>
__global__ void batchnorm_fold_residual_output_kernel(const T* x, const T* z, FoldedStatistics bn,
                                                      FoldedStatistics shortcut, T* y, uint8_t* mask,
                                                      int64_t channels, int64_t numel) {
  const int64_t bytes = (numel + 7) / 8;
  SDP_GRID_STRIDE(byte, bytes) {
    const int64_t first = byte * 8;
    uint8_t bits = 0;
    if constexpr (kVector) {
      static_assert(sizeof(T) == 2, "8 values of 16 bits a vector");
      const uint4 rx = reinterpret_cast<const uint4*>(x)[byte];
      const uint4 rz = reinterpret_cast<const uint4*>(z)[byte];
      uint4 ry;
      const T* ex = reinterpret_cast<const T*>(&rx);
      const T* ez = reinterpret_cast<const T*>(&rz);
      T* ey = reinterpret_cast<T*>(&ry);
      const int64_t ch0 = first % channels;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int64_t ch = ch0 + k;
        ey[k] = store_as<T>(fold_residual_output_element(saved_channel(bn, ch), load_f32(ex[k]),
                                                         shortcut_term(shortcut, ch, load_f32(ez[k]))));
        if (load_f32(ey[k]) > 0.0f) bits |= relu_mask_bit(first + k);
      }
      reinterpret_cast<uint4*>(y)[byte] = ry;
    } else {
      for (int64_t j = first; j < first + 8 && j < numel; ++j) {
        const int64_t ch = j % channels;
        y[j] = store_as<T>(fold_residual_output_element(saved_channel(bn, ch), load_f32(x[j]),
                                                        shortcut_term(shortcut, ch, load_f32(z[j]))));
        if (load_f32(y[j]) > 0.0f) bits |= relu_mask_bit(j);
      }
    }
    mask[byte] = bits;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void batchnorm_fold_finalize(DType dtype, const float* sum, const float* sq_sum, int64_t count, const float* gamma,
                             const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                             float* save_mean, float* save_inv_std, void* scale, void* bias, int64_t channels,
                             cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    batchnorm_fold_finalize_kernel<T><<<grid_for(channels), kThreads, 0, stream>>>(
        sum, sq_sum, static_cast<float>(count), gamma, beta, eps, momentum, running_mean, running_var, save_mean,
        save_inv_std, static_cast<T*>(scale), static_cast<T*>(bias), channels);
  });
  check_launch("batchnorm_fold_finalize_kernel");
}

void batchnorm_fold_inference(DType dtype, const float* running_mean, const float* running_var, const float* gamma,
                              const float* beta, float eps, void* scale, void* bias, int64_t channels,
                              cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    batchnorm_fold_inference_kernel<T><<<grid_for(channels), kThreads, 0, stream>>>(
        running_mean, running_var, gamma, beta, eps, static_cast<T*>(scale), static_cast<T*>(bias), channels);
  });
  check_launch("batchnorm_fold_inference_kernel");
}

void batchnorm_fold_input_grad(DType dtype, const void* drelu, const void* x, const float* dscale, const float* dbias,
                               const float* mean, const float* inv_std, const float* gamma, int64_t count, void* dx,
                               int64_t channels, int64_t numel, cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    constexpr int64_t V = 16 / sizeof(T);
    if (channels % V == 0 && aligned16(drelu) && aligned16(x) && aligned16(dx)) {
      batchnorm_fold_input_grad_vector_kernel<T><<<grid_for(numel / V), kThreads, 0, stream>>>(
          static_cast<const T*>(drelu), static_cast<const T*>(x), dscale, dbias, mean, inv_std, gamma,
          static_cast<float>(count), static_cast<T*>(dx), channels, numel / V);
      return;
    }
    batchnorm_fold_input_grad_kernel<T><<<grid_for(numel), kThreads, 0, stream>>>(
        static_cast<const T*>(drelu), static_cast<const T*>(x), dscale, dbias, mean, inv_std, gamma,
        static_cast<float>(count), static_cast<T*>(dx), channels, numel);
  });
  check_launch("batchnorm_fold_input_grad_kernel");
}

void batchnorm_fold_residual_output(DType dtype, const void* x, const void* z, const FoldedStatistics& bn,
                                    const FoldedStatistics& shortcut, void* y, uint8_t* mask, int64_t channels,
                                    int64_t numel, cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    const int64_t bytes = (numel + 7) / 8;
    const auto launch = [&](auto kernel) {
      kernel<<<grid_for(bytes), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(z), bn,
                                                       shortcut, static_cast<T*>(y), mask, channels, numel);
    };
    if constexpr (sizeof(T) == 2) {
      if (channels % 8 == 0 && aligned16(x) && aligned16(z) && aligned16(y)) {
        launch(batchnorm_fold_residual_output_kernel<T, true>);
        return;
      }
    }
    launch(batchnorm_fold_residual_output_kernel<T, false>);
  });
  check_launch("batchnorm_fold_residual_output_kernel");
}

}  // namespace sdp::nn::cuda
