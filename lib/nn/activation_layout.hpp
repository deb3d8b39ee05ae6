// Where each element of a dense 4-D f32 activation lives, for the hand-written CPU loops
// (direct_max_pool.hpp, direct_conv_grad.hpp) that read oneDNN's layouts directly.
#pragma once

#include <cstdint>
#include <optional>

#include "nn/onednn.hpp"

namespace sdp::nn {

// Where element (n, c, h, w) of a 4-D f32 tensor lives, in floats:
//   n * n_stride + (c / block) * c_stride + h * h_stride + w * w_stride + c % block.
struct ActivationLayout {
  int64_t n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;
  int64_t block = 1;  // channels per inner block (1 for plain layouts)
  memory::format_tag tag = memory::format_tag::undef;  // the oneDNN name of the layout
};

// The layout of `md` when it is a dense f32 NCHW, NHWC or nChw{4,8,16}c tensor.
std::optional<ActivationLayout> activation_layout(const memory::desc& md);

}  // namespace sdp::nn
