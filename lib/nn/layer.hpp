// Layer: a forward/backward pair (Caffe style, no autograd), one interface for every device.
// Each layer kind (Conv2d, BatchNorm2d, ...) is an abstract class holding what is the same on
// every device — options, parameter registration, initialization — and X::create(ctx, ...)
// (nn/layer_factory.hpp) returns the implementation for ctx.device: XCpu on oneDNN in
// x_cpu.{hpp,cpp}, and its CUDA twin next to it. The contract:
//
//  * The constructor registers parameters (and buffers) with the ParameterStore; values
//    exist only after the store is finalized, when init_parameters() fills them.
//  * configure(src, training) is called whenever the input shape or the mode changes; it
//    creates every primitive and allocates outputs, so forward/backward create nothing. It
//    returns the output's TensorDesc (shape and layout: plain, channels_last, or the
//    backend's own blocked layout, which only that backend reads).
//  * forward(src) takes a TensorRef described by exactly the configured src and returns the
//    output (owned by the layer, valid until its next forward). The layer may keep `src`
//    for backward.
//  * backward(diff_dst) takes the output gradient in the output's layout, OVERWRITES the
//    gradients of this layer's parameters, reports each to the grad-ready hook in reverse
//    registration order, and returns the input gradient in src's layout (an empty TensorRef
//    when needs_input_grad() is false, e.g. for the first layer of a model).
//  * plan_backward(plan, diff_dst) mirrors backward() on a GradientPlan (nn/gradient_plan.hpp)
//    after a training configure: it declares the buffers backward will read and write and
//    returns the planned buffer the input gradient will leave in (nullptr: one the plan does
//    not manage). A planned input gradient is valid only until the consumer's backward
//    returns — the plan reuses its memory afterwards. Without a plan, layers own everything.
//  * plan_forward(plan, src) mirrors forward() on the same plan, before that walk: it declares
//    what forward reads and writes and returns the planned buffer its output leaves in
//    (nullptr: the layer's own, as by default). A layer whose output the plan places keeps the
//    planned buffers its backward reads and declares those reads again in plan_backward, so
//    an activation's memory serves later gradients once its last reader's backward has run.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "core/tensor_desc.hpp"
#include "nn/context.hpp"
#include "nn/gradient_plan.hpp"

namespace sdp::nn {

class Layer {
 public:
  Layer(Context& ctx, std::string name) : ctx_(ctx), name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const Device& device() const { return ctx_.device; }

  // What the layer computes, one word (conv, batchnorm, relu, ...): LayerProfile's groups.
  virtual const char* kind() const = 0;
  // A layer made of child layers (ResidualBlock), which times its parts itself.
  virtual bool composite() const { return false; }

  virtual TensorDesc configure(const TensorDesc& src, bool training) = 0;
  virtual const TensorRef& forward(const TensorRef& src) = 0;
  virtual const TensorRef& backward(const TensorRef& diff_dst) = 0;
  // forward and backward as a model or a composite layer calls them: timed when the context
  // has a LayerProfile (a composite layer's parts time themselves).
  const TensorRef& run_forward(const TensorRef& src);
  const TensorRef& run_backward(const TensorRef& diff_dst);
  virtual GradientPlan::Buffer* plan_backward(GradientPlan& plan,
                                              GradientPlan::Buffer* diff_dst) = 0;
  virtual GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src);
  // Fills this layer's parameters and buffers; called in registration order with one
  // generator so equal seeds give bit-identical models on every rank.
  virtual void init_parameters(std::mt19937_64& /*rng*/) {}

  virtual bool has_parameters() const { return !params_.empty(); }
  // Whether backward reads this layer's own forward output. When false, the one consumer of
  // that output may overwrite it after reading it (ResidualBlock adds the shortcut in place
  // over the branch's last output), which saves an activation-sized buffer.
  virtual bool backward_reads_output() const { return true; }
  bool needs_input_grad() const { return needs_input_grad_; }
  virtual void set_needs_input_grad(bool value) { needs_input_grad_ = value; }

  // A ReLU's derivative moved across a layer boundary (Model::configure pairs neighbours):
  // when a layer's output is its own last ReLU's, the next layer may multiply the gradient it
  // returns by ReLU'(its input) inside a pass it makes anyway (a residual block's gradient
  // sum), and the first then skips its ReLU's backward: one pass over memory less, the same
  // bits. All false by default: only ResidualBlock takes part, and takes the gate only where
  // its device's Add can apply it (Add::gates_by_relu_output: not the CPU's).
  // Whether forward's output is a ReLU's that backward would apply first.
  virtual bool ends_in_relu() const { return false; }
  // Asks backward to return its input gradient gated by ReLU'(input); returns whether it will.
  virtual bool set_input_grad_relu_gated(bool /*gated*/) { return false; }
  // The output gradient arrives gated already (the next layer took the ReLU's derivative).
  virtual void set_output_grad_relu_gated(bool /*gated*/) {}
  // Whether each training step queues the same kernels with the same arguments, so a step
  // recorded once (a CUDA graph: Model::set_step_graphs) can stand for the next ones. Not a
  // layer whose arguments follow the step (dropout's masks).
  virtual bool same_work_every_step() const { return true; }

 protected:
  Param& add_parameter(const std::string& suffix, const Shape& shape, bool weight_decay);
  Buffer& add_buffer(const std::string& suffix, const Shape& shape);
  // Reports this layer's own parameters to the hook, last registered first.
  void grads_ready() const;

  Context& ctx_;
  std::string name_;
  std::vector<Param*> params_;
  bool needs_input_grad_ = true;
};

}  // namespace sdp::nn
