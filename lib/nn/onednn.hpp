// The CPU backend's bridge to oneDNN v2.6, shared by every CPU layer (the *_cpu files): the
// process-wide CPU engine and stream, descriptor shortcuts, the translation between the
// device-neutral TensorDesc and oneDNN's memory::desc, LayoutAdapter (moves a tensor
// between the layout a producer wrote and the one a primitive asked for), and OneDnnLayer,
// which implements the device-neutral Layer contract over memory-based virtuals.
// Only nn/'s oneDNN files include this header.
#pragma once

#include <cstring>

#include <dnnl.hpp>

#include "core/tensor.hpp"
#include "core/tensor_desc.hpp"
#include "nn/context.hpp"
#include "nn/gradient_plan.hpp"

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

// A oneDNN layout (blocked nChw16c, ...) carried opaquely by TensorDesc::backend.
class OneDnnLayout final : public BackendLayout {
 public:
  explicit OneDnnLayout(const memory::desc& md) : md_(md) {}
  bool same_as(const BackendLayout& other) const override;
  std::size_t nbytes() const override { return md_.get_size(); }
  std::string str() const override;
  const memory::desc& md() const { return md_; }

 private:
  memory::desc md_;
};

// TensorDesc <-> memory::desc. Plain and NHWC map to their format tags; anything else
// travels as a OneDnnLayout. to_md rejects another backend's layout and non-f32 dtypes.
memory::desc to_md(const TensorDesc& desc);
TensorDesc to_tensor_desc(const memory::desc& md);

// The CPU Stream: a oneDNN stream on cpu_engine().
class OneDnnStream final : public Stream {
 public:
  OneDnnStream() : stream_(cpu_engine()) {}
  Device device() const override { return Device::cpu(); }
  void synchronize() override { stream_.wait(); }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  dnnl::stream& get() { return stream_; }

 private:
  dnnl::stream stream_;
};
dnnl::stream& onednn_stream(Context& ctx);
void convert_layout_cpu(Context& ctx, const TensorRef& src, const TensorRef& dst);

// A primitive argument bound to whatever TensorRef the previous layer handed over. The
// dnnl::memory is made once per configure; bind() re-points it only when the pointer
// changes (set_data_handle may zero-pad blocked layouts: not something to pay per step).
class OneDnnPort {
 public:
  void configure(const TensorDesc& desc) { mem_ = memory(to_md(desc), cpu_engine(), nullptr); }
  const memory& bind(const TensorRef& ref) {
    if (mem_.get_data_handle() != ref.data) mem_.set_data_handle(ref.data);
    return mem_;
  }

 private:
  memory mem_;
};

// Copies `src` into `dst` (possibly different layouts of the same logical tensor).
void reorder(dnnl::stream& stream, const memory& src, const memory& dst);

// A buffer backward writes, whose storage a GradientPlan may share with buffers of disjoint
// lifetime (nn/gradient_plan.hpp). configure() makes it unbound; write() declares it to the
// plan, which binds it in allocate(); get() gives it its own storage when no plan did (a
// layer used on its own), so the layer works either way.
class PlannedMemory {
 public:
  void configure(const memory::desc& md);
  void reset();  // no buffer at all
  explicit operator bool() const { return static_cast<bool>(mem_); }
  const memory& get();
  // Declares a write of this buffer in the current operation; returns what the plan tracks.
  GradientPlan::Buffer* write(GradientPlan& plan) { return plan.write(&buffer_); }

 private:
  memory mem_;
  GradientPlan::Buffer buffer_;
};

// Converts between a fixed pair of layouts. configure() prepares the target buffer only when
// the layouts differ; convert() then reorders into it, or returns the input as is. A planned
// adapter (one used in backward) takes its buffer from the GradientPlan: declare it with
// plan(), which returns the buffer its output lives in (`input` when no conversion is needed).
class LayoutAdapter {
 public:
  void configure(const memory::desc& from, const memory::desc& to, bool planned = false);
  const memory& convert(dnnl::stream& stream, const memory& src);
  bool needed() const { return needed_; }
  const memory::desc& target() const { return to_; }
  GradientPlan::Buffer* plan(GradientPlan& plan, GradientPlan::Buffer* input) {
    return needed_ ? buffer_.write(plan) : input;
  }

 private:
  bool needed_ = false;
  memory::desc to_;
  PlannedMemory buffer_;
  dnnl::reorder reorder_;
};

// The device-neutral Layer contract (configure/forward/backward on TensorDesc/TensorRef)
// implemented over oneDNN memories: a CPU layer derives from OneDnnLayer<Kind> and writes
// configure_md/forward_md/backward_md/plan_backward_md with the same contract in oneDNN
// terms (an empty memory from backward_md when no input gradient is needed).
template <class Kind>
class OneDnnLayer : public Kind {
 public:
  using Kind::Kind;

  TensorDesc configure(const TensorDesc& src, bool training) final {
    src_port_.configure(src);
    const memory::desc dst_md = configure_md(to_md(src), training);
    out_.desc = to_tensor_desc(dst_md);
    out_.desc.device = src.device;
    diff_dst_port_.configure(out_.desc);
    diff_src_.desc = src;
    return out_.desc;
  }
  const TensorRef& forward(const TensorRef& src) final {
    out_.data = forward_md(src_port_.bind(src)).get_data_handle();
    return out_;
  }
  const TensorRef& backward(const TensorRef& diff_dst) final {
    const memory& g = backward_md(diff_dst_port_.bind(diff_dst));
    diff_src_.data = g ? g.get_data_handle() : nullptr;
    return diff_src_;
  }
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) final {
    plan.read(diff_dst);
    GradientPlan::Buffer* diff_src = plan_backward_md(plan, diff_dst);
    plan.next();
    return diff_src;
  }

 protected:
  virtual memory::desc configure_md(const memory::desc& src_md, bool training) = 0;
  virtual const memory& forward_md(const memory& src) = 0;
  virtual const memory& backward_md(const memory& diff_dst) = 0;
  // plan_backward in one operation: declares every planned buffer backward_md writes (its
  // temporaries too) and returns the one it returns (diff_dst when it passes it through;
  // nullptr when it returns nothing or its own storage).
  virtual GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                                 GradientPlan::Buffer* diff_dst) = 0;
  dnnl::stream& stream() { return onednn_stream(this->ctx_); }

  const memory empty_;

 private:
  OneDnnPort src_port_, diff_dst_port_;
  TensorRef out_, diff_src_;
};

}  // namespace sdp::nn
