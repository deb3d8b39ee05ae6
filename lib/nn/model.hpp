// Model: a list of layers with a known backward order plus a softmax cross-entropy head,
// owning the ParameterStore that holds all parameters, gradients and buffers.
//
// Contract for the training loop:
//  * After construction (build()), store() is finalized and the parameters are
//    initialized from the seed; equal seeds give bit-identical parameters on every rank.
//  * forward(x, labels, training) runs the model on an [N, C, H, W] f32 NCHW tensor on the
//    model's device, or in host memory for a GPU model (copied in on its stream; labels in
//    host memory) and returns the mean cross-entropy; `correct`
//    receives the number of top-1 hits.
//    Primitives are built on the first call and again only when N or the mode changes.
//  * backward() after forward(training=true) OVERWRITES every parameter gradient in the
//    gradient arena and calls the grad-ready hook once per Param, in reverse registration
//    order, as soon as that gradient is final (data parallelism starts AllReduce there).
//  * A training configure plans backward's buffers (nn/gradient_plan.hpp): input gradients
//    share one arena, allocated once per configure; gradient_plan() reports its size.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/parameter_store.hpp"
#include "core/tensor.hpp"
#include "nn/context.hpp"
#include "nn/gradient_plan.hpp"
#include "nn/layer.hpp"
#include "nn/softmax_cross_entropy.hpp"

namespace sdp::nn {

class Model {
 public:
  Model(std::string name, Shape input_shape, int num_classes, uint64_t seed = 42,
        Device device = Device::cpu());
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  ParameterStore& store() { return store_; }
  const ParameterStore& store() const { return store_; }
  const std::string& name() const { return name_; }
  Shape input_shape() const { return input_shape_; }
  int num_classes() const { return num_classes_; }
  const Device& device() const { return ctx_.device; }

  float forward(const Tensor& x, const int32_t* labels, bool training, int64_t* correct = nullptr);
  void backward();
  void set_grad_ready_hook(std::function<void(const Param&)> hook);
  // Positions stochastic layers (dropout) in their random stream; see Context::random_step.
  void set_random_position(uint64_t stream, int64_t step) {
    ctx_.random_stream = stream;
    ctx_.random_step = step;
  }

  // --- building (models/ use these; the training loop does not) ---
  // Adds a layer of kind L made by L::create for this model's device.
  template <typename L, typename... Args>
  L& add(const std::string& layer_name, Args&&... args) {
    std::unique_ptr<L> layer = L::create(ctx_, layer_name, std::forward<Args>(args)...);
    L& ref = *layer;
    add(std::move(layer));
    return ref;
  }
  void add(std::unique_ptr<Layer> layer);
  Context& context() { return ctx_; }
  // Finalizes the store and initializes every layer's parameters in registration order.
  void build();
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Backward's buffers for the current configuration (empty unless configured for training).
  const GradientPlan& gradient_plan() const { return plan_; }
  // Label smoothing of the loss, in [0, 1) (0: plain cross-entropy).
  void set_label_smoothing(float e) { loss_->set_label_smoothing(e); }
  // false: every backward buffer gets its own storage, as with no plan (the reference the
  // plan is tested against). Takes effect at the next configure.
  void set_gradient_plan_enabled(bool enabled) {
    plan_enabled_ = enabled;
    configured_batch_ = -1;
  }

 private:
  void configure(int64_t batch, bool training);

  std::string name_;
  Shape input_shape_;
  int num_classes_;
  uint64_t seed_;
  ParameterStore store_;
  Context ctx_;  // after store_: it refers to it
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<SoftmaxCrossEntropy> loss_;
  GradientPlan plan_;
  bool plan_enabled_ = true;
  bool built_ = false;

  int64_t configured_batch_ = -1;
  bool configured_training_ = false;
  bool backward_ready_ = false;
  TensorRef input_;
  Tensor staged_input_;  // a GPU model's copy of host input
};

}  // namespace sdp::nn
