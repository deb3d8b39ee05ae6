#include "nn/activation_layout.hpp"

namespace sdp::nn {

std::optional<ActivationLayout> activation_layout(const memory::desc& md) {
  using tag = memory::format_tag;
  const Dims dims = md.dims();
  if (dims.size() != 4 || md.data_type() != memory::data_type::f32) return std::nullopt;
  // Only dense layouts oneDNN itself would create for these dims (no views, no offsets).
  for (tag t : {tag::abcd, tag::acdb, tag::aBcd16b, tag::aBcd8b, tag::aBcd4b}) {
    if (!(md == memory::desc(dims, memory::data_type::f32, t))) continue;
    const auto& blocking = md.data.format_desc.blocking;
    ActivationLayout layout;
    layout.n_stride = blocking.strides[0];
    layout.c_stride = blocking.strides[1];
    layout.h_stride = blocking.strides[2];
    layout.w_stride = blocking.strides[3];
    layout.block = blocking.inner_nblks == 1 ? blocking.inner_blks[0] : 1;
    layout.tag = t;
    return layout;
  }
  return std::nullopt;
}

}  // namespace sdp::nn
