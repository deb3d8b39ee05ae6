#include "nn/onednn.hpp"

#include <stdexcept>

#include "core/error.hpp"

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

bool OneDnnLayout::same_as(const BackendLayout& other) const {
  const auto* o = dynamic_cast<const OneDnnLayout*>(&other);
  return o != nullptr && o->md_ == md_;
}

std::string OneDnnLayout::str() const {
  // The blocking of the innermost dimension is what tells nChw16c from nChw8c.
  const auto& blk = md_.data.format_desc.blocking;
  std::string s = "onednn(blocked";
  for (int i = 0; i < blk.inner_nblks; ++i)
    s += " " + std::to_string(blk.inner_idxs[i]) + ":" + std::to_string(blk.inner_blks[i]);
  return s + ")";
}

namespace {
memory::desc nhwc_md(const Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::acdb);
}
}  // namespace

memory::desc to_md(const TensorDesc& desc) {
  if (desc.dtype != DType::kF32)
    throw std::invalid_argument(std::string("oneDNN layers take f32, got ") + dtype_name(desc.dtype));
  const Dims dims = to_dims(desc.shape);
  switch (desc.layout) {
    case Layout::kPlain: return plain_md(dims);
    case Layout::kChannelsLast:
      if (dims.size() != 4) throw std::invalid_argument("channels_last needs a 4-D tensor");
      return nhwc_md(dims);
    case Layout::kBackend:
      if (const auto* l = dynamic_cast<const OneDnnLayout*>(desc.backend.get())) return l->md();
      throw std::invalid_argument("oneDNN layer got another backend's layout: " + desc.str());
  }
  throw std::logic_error("to_md: bad layout");
}

TensorDesc to_tensor_desc(const memory::desc& md) {
  TensorDesc d = TensorDesc::plain(to_shape(md.dims()));
  if (md == plain_md(md.dims())) return d;
  if (md.dims().size() == 4 && md == nhwc_md(md.dims())) {
    d.layout = Layout::kChannelsLast;
    return d;
  }
  d.layout = Layout::kBackend;
  d.backend = std::make_shared<OneDnnLayout>(md);
  return d;
}

dnnl::stream& onednn_stream(Context& ctx) {
  return static_cast<OneDnnStream&>(*ctx.stream).get();
}

void convert_layout_cpu(Context& ctx, const TensorRef& src, const TensorRef& dst) {
  memory s(to_md(src.desc), cpu_engine(), src.data), d(to_md(dst.desc), cpu_engine(), dst.data);
  reorder(onednn_stream(ctx), s, d);
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

void PlannedMemory::configure(const memory::desc& md) {
  mem_ = memory(md, cpu_engine(), nullptr);
  buffer_.bytes = md.get_size();
  // set_data_handle zero-fills a blocked layout's padding: once here, never per step.
  buffer_.bind = [this](void* p) { mem_.set_data_handle(p); };
}

void PlannedMemory::reset() {
  mem_ = memory();
  buffer_.bytes = 0;
  buffer_.bind = nullptr;
}

const memory& PlannedMemory::get() {
  // Unplanned use (a layer on its own): its own storage, once.
  if (mem_ && mem_.get_data_handle() == nullptr) mem_ = memory(mem_.get_desc(), cpu_engine());
  return mem_;
}

void LayoutAdapter::configure(const memory::desc& from, const memory::desc& to, bool planned) {
  to_ = to;
  needed_ = !(from == to);
  if (needed_) {
    buffer_.configure(to);
    if (!planned) buffer_.get();  // forward adapters keep their output until backward
    reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
  } else {
    buffer_.reset();
    reorder_ = dnnl::reorder();
  }
}

const memory& LayoutAdapter::convert(dnnl::stream& stream, const memory& src) {
  if (!needed_) return src;
  const memory& dst = buffer_.get();
  reorder_.execute(stream, const_cast<memory&>(src), const_cast<memory&>(dst));
  return dst;
}

}  // namespace sdp::nn
