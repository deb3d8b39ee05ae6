#include "nn/add.hpp"

#include <stdexcept>

namespace sdp::nn {

memory::desc Add::configure(const memory::desc& a_md, const memory::desc& b_md) {
  if (a_md.dims() != b_md.dims())
    throw std::invalid_argument("Add: operand shapes " + shape_str(to_shape(a_md.dims())) +
                                " and " + shape_str(to_shape(b_md.dims())) + " differ");
  const auto& eng = cpu_engine();
  b_to_a_.configure(b_md, a_md);
  diff_b_.configure(a_md, b_md);
  const dnnl::binary::primitive_desc pd({dnnl::algorithm::binary_add, a_md, a_md, a_md}, eng);
  add_ = dnnl::binary(pd);
  dst_ = memory(pd.dst_desc(), eng);
  return pd.dst_desc();
}

const memory& Add::forward(const memory& a, const memory& b) {
  add_.execute(ctx_.stream, {{DNNL_ARG_SRC_0, a},
                             {DNNL_ARG_SRC_1, b_to_a_.convert(ctx_.stream, b)},
                             {DNNL_ARG_DST, dst_}});
  return dst_;
}

}  // namespace sdp::nn
