#include "nn/onednn.hpp"

#include <stdexcept>

namespace sdp::nn {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

namespace {
memory::format_tag plain_tag(std::size_t rank) {
  using tag = memory::format_tag;
  switch (rank) {
    case 1:
      return tag::a;
    case 2:
      return tag::ab;
    case 3:
      return tag::abc;
    case 4:
      return tag::abcd;
    case 5:
      return tag::abcde;
  }
  throw std::invalid_argument("plain_md: unsupported rank " + std::to_string(rank));
}
}  // namespace

memory::desc plain_md(const Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, plain_tag(dims.size()));
}

memory::desc any_md(const Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

bool is_plain(const memory::desc& md) {
  return md == plain_md(md.dims());
}

Dims to_dims(const Shape& shape) {
  return Dims(shape.begin(), shape.end());
}
Shape to_shape(const Dims& dims) {
  return Shape(dims.begin(), dims.end());
}

memory wrap(const Tensor& tensor) {
  return wrap(tensor, plain_md(to_dims(tensor.shape())));
}

memory wrap(const Tensor& tensor, const memory::desc& md) {
  if (tensor.dtype() != DType::kF32 || !tensor.device().is_cpu())
    throw std::invalid_argument("nn::wrap: expected an f32 CPU tensor");
  if (md.get_size() > tensor.nbytes())
    throw std::invalid_argument("nn::wrap: tensor " + shape_str(tensor.shape()) +
                                " is smaller than the descriptor");
  return memory(md, cpu_engine(), tensor.raw());
}

void reorder(dnnl::stream& stream, const memory& src, const memory& dst) {
  dnnl::reorder(src, dst).execute(stream, const_cast<memory&>(src), const_cast<memory&>(dst));
}

void LayoutAdapter::configure(const memory::desc& from, const memory::desc& to) {
  to_ = to;
  needed_ = !(from == to);
  if (needed_) {
    buffer_ = memory(to, cpu_engine());
    reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
  } else {
    buffer_ = memory();
    reorder_ = dnnl::reorder();
  }
}

const memory& LayoutAdapter::convert(dnnl::stream& stream, const memory& src) {
  if (!needed_) return src;
  reorder_.execute(stream, const_cast<memory&>(src), buffer_);
  return buffer_;
}

}  // namespace sdp::nn
