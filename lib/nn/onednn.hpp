// Small helpers around the oneDNN v2.6 C++ API shared by every CPU layer: the process-wide
// CPU engine, descriptor shortcuts, and LayoutAdapter, which moves a tensor between the
// layout a producer wrote and the layout a primitive asked for (a no-op when they agree).
#pragma once

#include <dnnl.hpp>

#include "core/tensor.hpp"

namespace sdp::nn {

using dnnl::memory;
using Dims = memory::dims;

// One CPU engine for the process; primitives and memories of every model live on it.
const dnnl::engine& cpu_engine();

// f32 descriptor with the plain (row-major) layout for its rank: x, nc, ncw, nchw.
memory::desc plain_md(const Dims& dims);
// f32 descriptor that lets a primitive choose the layout (format_tag::any).
memory::desc any_md(const Dims& dims);
bool is_plain(const memory::desc& md);

Dims to_dims(const Shape& shape);
Shape to_shape(const Dims& dims);

// A dnnl::memory over a Tensor's storage (no copy); the Tensor must outlive its use.
memory wrap(const Tensor& tensor);
memory wrap(const Tensor& tensor, const memory::desc& md);

// Copies `src` into `dst` (possibly different layouts of the same logical tensor).
void reorder(dnnl::stream& stream, const memory& src, const memory& dst);

// Converts between a fixed pair of layouts. configure() allocates the target buffer only
// when the layouts differ; convert() then reorders into it, or returns the input as is.
class LayoutAdapter {
 public:
  void configure(const memory::desc& from, const memory::desc& to);
  const memory& convert(dnnl::stream& stream, const memory& src);
  bool needed() const { return needed_; }
  const memory::desc& target() const { return to_; }

 private:
  bool needed_ = false;
  memory::desc to_;
  memory buffer_;
  dnnl::reorder reorder_;
};

}  // namespace sdp::nn
