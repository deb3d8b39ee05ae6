#include "nn/model.hpp"

#include <random>
#include <stdexcept>

#include "core/error.hpp"

namespace sdp::nn {

Model::Model(std::string name, Shape input_shape, int num_classes, uint64_t seed, Device device)
    : name_(std::move(name)),
      input_shape_(std::move(input_shape)),
      num_classes_(num_classes),
      seed_(seed),
      ctx_(store_, device, seed),
      loss_(SoftmaxCrossEntropy::create(ctx_)) {
  if (input_shape_.size() != 3) throw std::invalid_argument("Model: input shape must be [C, H, W]");
  if (num_classes_ < 1) throw std::invalid_argument("Model: num_classes < 1");
}

Model::~Model() = default;

void Model::add(std::unique_ptr<Layer> layer) {
  if (built_) throw std::logic_error("Model::add after build");
  layers_.push_back(std::move(layer));
}

void Model::build() {
  if (built_) return;
  if (layers_.empty()) throw std::logic_error("Model " + name_ + ": no layers");
  // Nobody consumes the gradient w.r.t. the images: skip input gradients up to and
  // including the first layer with parameters (e.g. flatten -> fc1 in the MLP).
  for (auto& layer : layers_) {
    layer->set_needs_input_grad(false);
    if (layer->has_parameters()) break;
  }
  store_.finalize(ctx_.device);
  std::mt19937_64 rng(seed_);
  for (auto& layer : layers_) layer->init_parameters(rng);
  built_ = true;
  // Configure once at batch 1 so an input shape the architecture cannot take fails here,
  // at construction, rather than at the first step.
  try {
    configure(1, false);
  } catch (const std::exception& e) {  // a backend's own error type (dnnl::error, ...)
    throw std::invalid_argument("input " + shape_str(input_shape_) + ": " + e.what());
  }
}

void Model::set_grad_ready_hook(std::function<void(const Param&)> hook) {
  ctx_.grad_ready_hook = std::move(hook);
}

void Model::configure(int64_t batch, bool training) {
  Shape shape = {batch};
  shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
  input_ = {TensorDesc::plain(shape, ctx_.device), nullptr};
  // The old arena goes first, so it and the new one are never resident together.
  plan_.clear();
  TensorDesc desc = input_.desc;
  for (auto& layer : layers_) desc = layer->configure(desc, training);
  loss_->configure(desc, num_classes_);
  if (training && plan_enabled_) {
    // The walk backward() takes; the loss's gradient is its own buffer (nullptr).
    GradientPlan::Buffer* grad = nullptr;
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it)
      grad = (*it)->plan_backward(plan_, grad);
    plan_.allocate(ctx_.device);
  }
  configured_batch_ = batch;
  configured_training_ = training;
}

float Model::forward(const Tensor& x, const int32_t* labels, bool training, int64_t* correct) {
  if (!built_) throw std::logic_error("Model " + name_ + ": forward before build");
  // Host input to a GPU model is copied in on the model's stream (the loader's batches live
  // in host memory); otherwise the input must already be on the model's device.
  const bool stage = x.device().is_cpu() && !ctx_.device.is_cpu();
  if (x.rank() != 4 || x.dtype() != DType::kF32 || !(stage || x.device() == ctx_.device) ||
      Shape(x.shape().begin() + 1, x.shape().end()) != input_shape_ || x.dim(0) < 1)
    throw InputError("model " + name_ + " expects f32 " + ctx_.device.str() + " input [N, " +
                     shape_str(input_shape_).substr(1) + ", got " + shape_str(x.shape()) + " " +
                     dtype_name(x.dtype()) + " on " + x.device().str());
  if (x.dim(0) != configured_batch_ || training != configured_training_)
    configure(x.dim(0), training);
  if (stage) {
    // Allocated when the batch grows, never in the steady step loop.
    if (!staged_input_.defined() || staged_input_.numel() < x.numel())
      staged_input_ = Tensor({x.numel()}, DType::kF32, ctx_.device);
    ctx_.stream->copy_from_host(staged_input_.raw(), x.raw(), x.nbytes());
    input_.data = staged_input_.raw();
  } else {
    input_.data = x.raw();
  }
  const TensorRef* act = &input_;
  for (auto& layer : layers_) act = &layer->forward(*act);
  const float loss = loss_->forward(*act, labels, correct);
  backward_ready_ = training;
  return loss;
}

void Model::backward() {
  if (!backward_ready_)
    throw std::logic_error("Model " + name_ + ": backward needs a forward(training=true) first");
  const TensorRef* grad = &loss_->backward();
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) grad = &(*it)->backward(*grad);
  backward_ready_ = false;
}

}  // namespace sdp::nn
