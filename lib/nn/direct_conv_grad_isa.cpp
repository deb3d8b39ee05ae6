// The weight gradient loops of a one-input-channel convolution, compiled once per ISA
// (core/cpu_dispatch.hpp): the output channels of a block are the vector lanes, and each
// kernel column's sum stays in a register for a whole image.
#include "core/simd_lanes.hpp"
#include "nn/direct_conv_grad_kernels.hpp"

namespace sdp::nn::SDP_ISA_NAMESPACE {

namespace {

constexpr int kMaxKernel = 11;

// kKernel > 0: that kernel size, unrolled; 0: any size up to kMaxKernel.
template <int kKernel, int kLanes>
void add_image_lanes(const ConvWeightGradJob& j, const float* x_padded, const float* dy, float* dw,
                     float* db) {
  using F = typename simd::Lanes<kLanes>::F32;
  const int k = kKernel > 0 ? kKernel : j.kernel;
  const int64_t padded_w = j.in_w + 2 * j.padding;
  const int64_t blocks = (j.out_channels + kLanes - 1) / kLanes;
  for (int64_t cb = 0; cb < blocks; ++cb) {
    const float* dyc = dy + cb * j.c_stride;
    F bias = {};
    for (int64_t oh = 0; oh < j.out_h; ++oh)
      for (int64_t ow = 0; ow < j.out_w; ++ow) bias += simd::load<F>(dyc + oh * j.h_stride + ow * j.w_stride);
    simd::store(db + cb * kLanes, simd::load<F>(db + cb * kLanes) + bias);
    float* dwc = dw + cb * k * k * kLanes;
    for (int kh = 0; kh < k; ++kh) {
      F acc[kKernel > 0 ? kKernel : kMaxKernel] = {};
      for (int64_t oh = 0; oh < j.out_h; ++oh) {
        const float* x_row = x_padded + (oh * j.stride + kh) * padded_w;
        const float* dy_row = dyc + oh * j.h_stride;
        for (int64_t ow = 0; ow < j.out_w; ++ow) {
          const F d = simd::load<F>(dy_row + ow * j.w_stride);
          const float* x = x_row + ow * j.stride;
          for (int kw = 0; kw < k; ++kw) acc[kw] += x[kw] * d;
        }
      }
      for (int kw = 0; kw < k; ++kw) {
        float* out = dwc + (kh * k + kw) * kLanes;
        simd::store(out, simd::load<F>(out) + acc[kw]);
      }
    }
  }
}

template <int kLanes>
void add_image_for(const ConvWeightGradJob& j, const float* x, const float* dy, float* dw, float* db) {
  switch (j.kernel) {
    case 3:
      return add_image_lanes<3, kLanes>(j, x, dy, dw, db);
    case 5:
      return add_image_lanes<5, kLanes>(j, x, dy, dw, db);
    default:
      return add_image_lanes<0, kLanes>(j, x, dy, dw, db);
  }
}

void add_image(const ConvWeightGradJob& j, const float* x, const float* dy, float* dw, float* db) {
  if (j.lanes == 16) return add_image_for<16>(j, x, dy, dw, db);
  add_image_for<8>(j, x, dy, dw, db);
}

}  // namespace

extern const DirectConvGradKernels direct_conv_grad_kernels = {add_image};

}  // namespace sdp::nn::SDP_ISA_NAMESPACE
