// Finite-difference gradient checking for nn layers (the Caffe test_gradient_check_util
// idea): a scalar function of some float coordinates, its analytic gradient, and central
// differences (f(v + eps) - f(v - eps)) / (2 eps) on a sample of coordinates.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half_float.hpp"
#include "core/parameter_store.hpp"
#include "nn/context.hpp"
#include "nn/layer.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn::testing {

struct GradCheckOptions {
  float eps = 1e-2f;
  double rtol = 1e-2;
  double atol = 2e-3;
  int max_coords = 60;            // sampled coordinates (all when fewer)
  double max_bad_fraction = 0.0;  // > 0 only for functions with kinks (whole models)
};

// Checks `analytic` (d f / d values[i]) against central differences of f, perturbing
// values[i] in place. Returns the number of coordinates outside the tolerance.
inline int check_gradient(const std::string& what, const std::function<double()>& f, float* values,
                          const std::vector<float>& analytic, const GradCheckOptions& opt,
                          uint64_t seed = 1) {
  const int64_t n = static_cast<int64_t>(analytic.size());
  std::vector<int64_t> coords(n);
  for (int64_t i = 0; i < n; ++i) coords[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(coords.begin(), coords.end(), rng);
  if (n > opt.max_coords) coords.resize(opt.max_coords);
  int bad = 0;
  double err2 = 0.0, ref2 = 0.0;
  for (int64_t i : coords) {
    const float v = values[i];
    values[i] = v + opt.eps;
    const double fp = f();
    values[i] = v - opt.eps;
    const double fm = f();
    values[i] = v;
    // The perturbation actually applied, after float rounding of v +- eps.
    const double h = (static_cast<double>(v + opt.eps) - static_cast<double>(v - opt.eps));
    const double fd = (fp - fm) / h;
    const double an = analytic[i];
    err2 += (fd - an) * (fd - an);
    ref2 += fd * fd;
    if (std::abs(fd - an) > opt.atol + opt.rtol * std::max(std::abs(fd), std::abs(an))) {
      ++bad;
      if (opt.max_bad_fraction == 0.0)
        ADD_FAILURE() << what << "[" << i << "]: analytic " << an << " vs numeric " << fd;
    }
  }
  if (opt.max_bad_fraction > 0.0) {
    EXPECT_LE(bad, static_cast<int>(opt.max_bad_fraction * coords.size()))
        << what << ": too many coordinates off";
    // Over the sample the gradient vector must match closely (catches a sign or a missing
    // term even when individual kinks are tolerated).
    EXPECT_LT(std::sqrt(err2), 0.05 * std::sqrt(ref2) + opt.atol) << what;
  }
  return bad;
}

inline std::vector<float> random_vector(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A tensor's values on the host, and back, whatever its device (the parameter arenas live on
// the model's device).
inline std::vector<float> host_values(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  copy_bytes(Device::cpu(), out.data(), t.device(), t.raw(), out.size() * sizeof(float));
  return out;
}
inline void set_values(const Tensor& t, const std::vector<float>& values) {
  copy_bytes(t.device(), t.raw(), Device::cpu(), values.data(), values.size() * sizeof(float));
}
// Sets element i of a tensor on any device.
inline void set_value(const Tensor& t, int64_t i, float value) {
  copy_bytes(t.device(), static_cast<float*>(t.raw()) + i, Device::cpu(), &value, sizeof(float));
}

inline int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}

// Runs one layer, built by its factory for the harness's device, on a plain input and
// defines L = sum_i w_i * y_i over its plain output. Values live on the host; the harness
// copies them to the device and converts layouts there (nn::convert_layout), so the same
// test runs on every device. On the CPU the input may be handed to the layer in a oneDNN
// layout (e.g. nChw16c) to exercise the layout handling the models rely on.
class LayerHarness {
 public:
  explicit LayerHarness(Device device = Device::cpu(), uint64_t seed = 7)
      : ctx_(store_, device, seed) {}

  template <typename L, typename... Args>
  L& make(Args&&... args) {
    std::unique_ptr<L> layer = L::create(ctx_, "layer", std::forward<Args>(args)...);
    L& ref = *layer;
    adopt(std::move(layer));
    return ref;
  }

  // Takes a layer built on ctx() (e.g. by a factory), then finalizes and initializes.
  void adopt(std::unique_ptr<Layer> layer) {
    layer_ = std::move(layer);
    store_.finalize(ctx_.device);
    std::mt19937_64 rng(11);
    layer_->init_parameters(rng);
  }

  // Input dims; `layout` is the oneDNN tag the layer receives (plain when undef; abcd and
  // acdb are the device-neutral plain and channels_last).
  // `compute`: the activations' dtype (f16/bf16: mixed precision on a GPU); values still go
  // in and come out as f32 on the host.
  void configure(const Dims& in, bool training,
                 memory::format_tag layout = memory::format_tag::undef, DType compute = DType::kF32) {
    in_dims_ = in;
    // Blocked layouts are oneDNN's: other devices get the same values in plain layout.
    if (!ctx_.device.is_cpu() && layout != memory::format_tag::acdb) layout = memory::format_tag::undef;
    src_desc_ = layout == memory::format_tag::undef
                    ? TensorDesc::plain(in, ctx_.device)
                    : to_tensor_desc(memory::desc(in, memory::data_type::f32, layout));
    src_desc_.device = ctx_.device;
    src_desc_.dtype = compute;
    x_.assign(numel(in), 0.f);
    src_ = device_buffer(src_desc_);
    dst_desc_ = layer_->configure(src_desc_, training);
    out_dims_ = dst_desc_.shape;
    w_ = random_vector(numel(out_dims_), 99);
  }

  std::vector<float>& input() { return x_; }
  std::vector<float>& loss_weights() { return w_; }
  const Dims& out_dims() const { return out_dims_; }
  const TensorDesc& layer_dst_desc() const { return dst_desc_; }
  ParameterStore& store() { return store_; }
  Context& ctx() { return ctx_; }
  Layer& layer() { return *layer_; }

  std::vector<float> forward() {
    from_host(x_, src_);  // tests may have replaced the vector
    return to_host(layer_->forward(src_));
  }

  double loss() {
    const std::vector<float> y = forward();
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += static_cast<double>(w_[i]) * y[i];
    return l;
  }

  // Backward with diff_dst = w; returns the plain input gradient.
  std::vector<float> backward() {
    diff_dst_ = device_buffer(dst_desc_);
    from_host(w_, diff_dst_);
    const TensorRef& dx = layer_->backward(diff_dst_);
    if (!layer_->needs_input_grad()) return {};
    EXPECT_TRUE(dx.desc == src_desc_) << "input gradient in " << dx.desc.str() << ", input was "
                                      << src_desc_.str();
    return to_host(dx);
  }

  // A buffer of `desc` on the device, kept alive by the harness.
  TensorRef device_buffer(const TensorDesc& desc) {
    buffers_.push_back(allocate(desc.device, desc.nbytes()));
    return {desc, buffers_.back().get()};
  }
  // Host plain values -> `dst` (any layout) and back.
  // 16-bit tensors are converted on the host with half_float.hpp's rounding.
  void from_host(const std::vector<float>& values, const TensorRef& dst) {
    const DType dtype = dst.desc.dtype;
    TensorRef plain = device_buffer(TensorDesc::plain(dst.desc.shape, ctx_.device, dtype));
    if (dtype == DType::kF32) {
      copy_bytes(ctx_.device, plain.data, Device::cpu(), values.data(), values.size() * sizeof(float));
    } else {
      std::vector<uint16_t> bits(values.size());
      for (std::size_t i = 0; i < values.size(); ++i)
        bits[i] = dtype == DType::kF16 ? float_to_half(values[i]) : float_to_bfloat16(values[i]);
      copy_bytes(ctx_.device, plain.data, Device::cpu(), bits.data(), bits.size() * sizeof(uint16_t));
    }
    convert_layout(ctx_, plain, dst);
  }
  std::vector<float> to_host(const TensorRef& src) {
    const DType dtype = src.desc.dtype;
    TensorRef plain = device_buffer(TensorDesc::plain(src.desc.shape, ctx_.device, dtype));
    convert_layout(ctx_, src, plain);
    std::vector<float> out(numel(src.desc.shape));
    if (dtype == DType::kF32) {
      copy_bytes(Device::cpu(), out.data(), ctx_.device, plain.data, out.size() * sizeof(float));
    } else {
      std::vector<uint16_t> bits(out.size());
      copy_bytes(Device::cpu(), bits.data(), ctx_.device, plain.data, bits.size() * sizeof(uint16_t));
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = dtype == DType::kF16 ? half_to_float(bits[i]) : bfloat16_to_float(bits[i]);
    }
    return out;
  }

  // Full check: the input gradient and every parameter gradient against L. Parameters are
  // perturbed in a host copy that is written to the device before each evaluation.
  void check_all(const GradCheckOptions& opt) {
    forward();
    const std::vector<float> dx = backward();
    std::vector<std::vector<float>> grads;
    for (const Param& p : store_.params()) grads.push_back(host_values(p.grad));
    auto f = [this] { return loss(); };
    if (layer_->needs_input_grad()) check_gradient("d/dx", f, x_.data(), dx, opt);
    int k = 0;
    for (Param& p : store_.params()) {
      std::vector<float> values = host_values(p.value);
      auto f_param = [&] {
        set_values(p.value, values);
        return loss();
      };
      check_gradient("d/d" + p.name, f_param, values.data(), grads[k++], opt);
      set_values(p.value, values);
    }
  }

 private:
  ParameterStore store_;
  Context ctx_;
  std::unique_ptr<Layer> layer_;
  Dims in_dims_, out_dims_;
  TensorDesc src_desc_, dst_desc_;
  std::vector<float> x_, w_;
  std::vector<std::shared_ptr<void>> buffers_;
  TensorRef src_, diff_dst_;
};

}  // namespace sdp::nn::testing
