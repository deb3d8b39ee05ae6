#include "nn/model.hpp"

#include <random>
#include <stdexcept>

#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "nn/conv_algorithm_choices.hpp"
#include "nn/layer_profile.hpp"

#if defined(SDP_HAVE_CUDNN)
#include "nn/conv2d_cuda.hpp"
#endif

namespace sdp::nn {

namespace {
// Names of the model's own parts in a LayerProfile.
const std::string kInputUnit = "input", kLossUnit = "loss";
}  // namespace

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

Model::~Model() { drop_step_graphs(); }

void Model::drop_step_graphs() {
  if (step_graphs_.empty()) return;
  ctx_.stream->synchronize();  // a replay still queued runs on what it recorded
  step_graphs_.clear();
}

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

void Model::set_grad_ready_hook(std::function<void(const Param&)> hook, bool recordable) {
  ctx_.grad_ready_hook = std::move(hook);
  grad_ready_hook_recordable_ = recordable && ctx_.grad_ready_hook;
}

void Model::set_compute_dtype(DType dtype) {
  if (dtype != DType::kF32 && ctx_.device.is_cpu())
    throw std::invalid_argument("model " + name_ + ": " + dtype_name(dtype) +
                                " compute (mixed precision) needs a GPU; the CPU backend computes in f32");
  compute_dtype_ = dtype;
  configured_batch_ = -1;
}

void Model::set_channels_last(bool value) {
  if (value && ctx_.device.is_cpu())
    throw std::invalid_argument("model " + name_ + ": channels_last end to end is a GPU path");
  ctx_.channels_last = value;
  configured_batch_ = -1;
}

void Model::set_compute_rules(const ComputeRules& rules) {
  if (rules.tf32 && ctx_.device.is_cpu())
    throw std::invalid_argument("model " + name_ + ": TF32 is a GPU's tensor-core math; the CPU computes in f32");
  ctx_.rules = rules;
  configured_batch_ = -1;
}

// The input as the first layer takes it: channels_last when the whole model computes so.
bool Model::input_channels_last() const { return ctx_.channels_last; }

// Host batches already in the compute type, NHWC (data.batch_type: compute): 16-bit
// channels_last models only; f32 batches are NCHW, reordered on the device.
bool Model::takes_compute_batches() const { return input_channels_last() && compute_dtype_ != DType::kF32; }

void Model::configure(int64_t batch, bool training) {
  Shape shape = {batch};
  shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
  input_ = {TensorDesc::plain(shape, ctx_.device, compute_dtype_), nullptr};
  if (input_channels_last()) input_.desc.layout = Layout::kChannelsLast;
  // The old arena goes first, so it and the new one are never resident together; on a GPU
  // once the last step's kernels that use it are done.
  if (plan_.arena_bytes() > 0 && !ctx_.device.is_cpu()) ctx_.stream->synchronize();
  plan_.clear();
  // A lean plan's training configuration places cuDNN's workspaces in the arena: the shared one
  // an earlier configuration (an evaluation's) reserved would only sit beside it.
  if (ctx_.lean_plan) release_shared_scratch(ctx_);
  ctx_.planned_backward = training && plan_enabled_;
  ctx_.batchnorm_folding.folded = 0;  // the blocks count again as they configure
  ctx_.batchnorm_folding.refused.clear();
  ctx_.batchnorm_folding.folded_with_residual = 0;
  ctx_.batchnorm_folding.refused_with_residual.clear();
  ctx_.batchnorm_folding.folded_shortcuts = 0;
  ctx_.batchnorm_folding.refused_shortcuts.clear();
  ctx_.batchnorm_folding.build_seconds = 0;
  ctx_.grad_sum_fusion.fused = 0;
  ctx_.grad_sum_fusion.refused.clear();
  TensorDesc desc = input_.desc;
  for (auto& layer : layers_) desc = layer->configure(desc, training);
  loss_->configure(desc, num_classes_);
  // A layer ending in a ReLU hands its derivative to the next layer where that one can apply
  // it in a pass of its own (Layer::set_input_grad_relu_gated): before the plan, which follows
  // the backward both then take.
  for (std::size_t k = 0; training && k + 1 < layers_.size(); ++k)
    if (layers_[k]->ends_in_relu() && layers_[k + 1]->set_input_grad_relu_gated(true))
      layers_[k]->set_output_grad_relu_gated(true);
  if (training && plan_enabled_) {
    // The walk forward() takes (the input is the model's own staged copy), the loss reading
    // the logits in its forward and, conservatively, its backward; then the walk backward()
    // takes, the loss's gradient being its own buffer (nullptr).
    GradientPlan::Buffer* act = nullptr;
    for (auto& layer : layers_) act = layer->plan_forward(plan_, act);
    for (int loss_pass = 0; loss_pass < 2; ++loss_pass) {
      plan_.read(act);
      plan_.next();
    }
    GradientPlan::Buffer* grad = nullptr;
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it)
      grad = (*it)->plan_backward(plan_, grad);
    plan_.allocate(ctx_.device);
  }
  configured_batch_ = batch;
  configured_training_ = training;
  // Recordings refer to the buffers of the configuration they were made in.
  drop_step_graphs();
  steps_since_configure_ = 0;
}

float Model::forward(const Tensor& x, const int32_t* labels, bool training, int64_t* correct, uint8_t* hits) {
  const TensorRef& logits = forward_layers(x, training, /*mark_input_copied=*/false);
  const float loss = timed(ctx_.profile, loss_.get(), kLossUnit, "loss", Pass::kForward,
                           [&] { return loss_->forward(logits, labels, correct, hits); });
  backward_ready_ = training;
  return loss;
}

void Model::forward_deferred(const Tensor& x, const int32_t* labels) {
  const TensorRef& logits = forward_layers(x, /*training=*/true, /*mark_input_copied=*/true);
  timed(ctx_.profile, loss_.get(), kLossUnit, "loss", Pass::kForward, [&] { loss_->forward_deferred(logits, labels); });
  backward_ready_ = true;
}

float Model::take_loss() { return loss_->take_loss(); }

std::string Model::measured_conv_algorithms() {
#if defined(SDP_HAVE_CUDNN)
  if (ctx_.device.is_cuda()) return export_measured_conv_algorithms(ctx_);
#endif
  return "";
}

std::string Model::use_measured_conv_algorithms(const std::string& text, const std::string& what) {
#if defined(SDP_HAVE_CUDNN)
  if (ctx_.device.is_cuda()) {
    const std::string why = import_measured_conv_algorithms(ctx_, text, what);
    if (why.empty()) configured_batch_ = -1;  // the convolutions take them at the next configure
    return why;
  }
#endif
  parse_conv_algorithm_choices(text, what);  // the CPU computes without them; bad text is still bad
  return "";
}

void Model::wait_input_copied() {
  if (input_copied_) input_copied_->synchronize();
}

// Checks and stages the input, configures on a new shape or mode, runs every layer: the logits.
// `mark_input_copied`: records input_copied_ after a staged input (forward_deferred's, whose
// caller cannot rely on the loss read to know the copy is done).
const TensorRef& Model::forward_layers(const Tensor& x, bool training, bool mark_input_copied) {
  stage_forward(x, training, mark_input_copied);
  const TensorRef* act = &input_;
  for (auto& layer : layers_) act = &layer->run_forward(*act);
  return *act;
}

void Model::stage_forward(const Tensor& x, bool training, bool mark_input_copied) {
  if (!built_) throw std::logic_error("Model " + name_ + ": forward before build");
  // Host input to a GPU model is copied in on the model's stream (the loader's batches live
  // in host memory); otherwise the input must already be on the model's device. A 16-bit
  // channels_last model also takes host input already in its compute type, NHWC [N, H, W, C]
  // (data.batch_type: compute): copied in as it is, no cast.
  const bool stage = x.device().is_cpu() && !ctx_.device.is_cpu();
  const bool ready = stage && takes_compute_batches() && x.dtype() == compute_dtype_;
  const Shape expected = ready ? Shape{input_shape_[1], input_shape_[2], input_shape_[0]} : input_shape_;
  if (x.rank() != 4 || !(x.dtype() == DType::kF32 || ready) || !(stage || x.device() == ctx_.device) ||
      Shape(x.shape().begin() + 1, x.shape().end()) != expected || x.dim(0) < 1)
    throw InputError("model " + name_ + " expects f32 " + ctx_.device.str() + " input [N, " +
                     shape_str(input_shape_).substr(1) +
                     (takes_compute_batches() && stage ? " (or " + std::string(dtype_name(compute_dtype_)) +
                                                           " host input [N, " + shape_str(expected).substr(1) + ")"
                                                     : std::string()) +
                     ", got " + shape_str(x.shape()) + " " + dtype_name(x.dtype()) + " on " + x.device().str());
  if (x.dim(0) != configured_batch_ || training != configured_training_)
    configure(x.dim(0), training);
  // Timed only where there is work: a copy to the device or a cast.
  LayerProfile* input_profile = stage || compute_dtype_ != DType::kF32 ? ctx_.profile : nullptr;
  timed(input_profile, &input_, kInputUnit, "input", Pass::kForward, [&] { stage_input(x, stage); });
  if (stage && mark_input_copied) {
    // Done once the stream has the batch (copied here or by the prefetch it waited for).
    if (!input_copied_) input_copied_ = ctx_.stream->make_event();
    input_copied_->record();
  }
}

// Points input_ at `x` on the model's device in the compute dtype: staged from host memory
// (or taken from a prefetch), then cast under mixed precision.
void Model::stage_input(const Tensor& x, bool stage) {
  if (stage) {
    int slot;
    if (prefetched_slot_ >= 0 && prefetched_src_ == x.raw() && prefetched_bytes_ == x.nbytes()) {
      slot = prefetched_slot_;  // copied on the copy stream already
      ctx_.stream->wait_for_prefetch();
    } else {
      // A prefetch of other input is dropped; its copy must land before this one can reuse
      // the memory it writes.
      if (prefetched_slot_ >= 0) ctx_.stream->wait_for_prefetch();
      slot = prefetched_slot_ >= 0 ? prefetched_slot_ : 1 - last_slot_;
      reserve_slot(slot, x.nbytes());
      ctx_.stream->copy_from_host(staged_[slot].raw(), x.raw(), x.nbytes());
    }
    prefetched_slot_ = -1;
    prefetched_src_ = nullptr;
    last_slot_ = slot;
    input_.data = staged_[slot].raw();
  } else {
    input_.data = x.raw();
  }
  // Input already in the compute type (NHWC: forward_layers checked) is the first layer's own.
  if ((compute_dtype_ != DType::kF32 || input_channels_last()) && x.dtype() == DType::kF32) {
    if (!compute_input_.defined() || compute_input_.numel() < x.numel() || compute_input_.dtype() != compute_dtype_) {
      const MemoryPurposeScope purpose(MemoryPurpose::kInput);
      compute_input_ = Tensor({x.numel()}, compute_dtype_, ctx_.device);
    }
    if (input_channels_last()) {  // cast and reordered in one pass
      TensorDesc plain = input_.desc;
      plain.layout = Layout::kPlain;
      plain.dtype = DType::kF32;
      stage_channels_last(ctx_, {plain, input_.data}, {input_.desc, compute_input_.raw()});
    } else {
      ctx_.stream->cast_from_f32(compute_input_.raw(), compute_dtype_, static_cast<const float*>(input_.data),
                                 x.numel());
    }
    input_.data = compute_input_.raw();
  }
}

void Model::reserve_slot(int slot, std::size_t bytes) {
  // Allocated when the batch grows, never in the steady step loop.
  if (!staged_[slot].defined() || staged_[slot].nbytes() < bytes) {
    const MemoryPurposeScope purpose(MemoryPurpose::kInput);
    staged_[slot] = Tensor({static_cast<int64_t>((bytes + 3) / 4)}, DType::kF32, ctx_.device);
  }
}

void Model::prefetch(const Tensor& x) {
  if (ctx_.device.is_cpu() || !x.device().is_cpu()) return;
  if (x.dtype() != DType::kF32 && !(takes_compute_batches() && x.dtype() == compute_dtype_)) return;
  // The slot the last forward did not read. Its earlier reader finished: forward returns the
  // loss, so the stream had run everything before the last forward when it returned (with
  // forward_deferred, the caller took that forward's loss before the next forward).
  const int slot = 1 - last_slot_;
  reserve_slot(slot, x.nbytes());
  ctx_.stream->prefetch_from_host(staged_[slot].raw(), x.raw(), x.nbytes());
  prefetched_slot_ = slot;
  prefetched_src_ = x.raw();
  prefetched_bytes_ = x.nbytes();
}

std::string Model::step_graph_obstacle() const {
  if (!ctx_.device.is_cuda()) return "the model computes on the " + ctx_.device.str() + ", not a GPU";
  for (const auto& layer : layers_)
    if (!layer->same_work_every_step())
      return "layer " + layer->name() + " (" + layer->kind() + ") draws new values every step";
  if (ctx_.profile != nullptr) return "the layers are being timed one by one";
  return "";
}

std::string Model::backward_graph_obstacle() const {
  if (ctx_.grad_ready_hook && !grad_ready_hook_recordable_)
    return "each gradient is handed on as backward makes it (buckets reduced across ranks, or summed over "
           "micro-batches)";
  return "";
}

Model::StepRecording Model::step_recording() const {
  if (!step_graphs_enabled_ || !step_graph_failure_.empty() || !step_graph_obstacle().empty())
    return StepRecording::kNone;
  if (backward_graph_obstacle().empty()) return StepRecording::kForwardAndBackward;
  return forward_alone_ ? StepRecording::kForward : StepRecording::kNone;
}

void Model::forward_backward_deferred(const Tensor& x, const int32_t* labels) {
  const StepRecording scope = step_recording();
  if (scope == StepRecording::kNone) {
    forward_deferred(x, labels);
    backward();
    if (step_tail_) step_tail_();
    return;
  }
  stage_forward(x, /*training=*/true, /*mark_input_copied=*/true);
  loss_->stage_labels(labels);
  const StepGraphKey key{input_.data, loss_->loss_scale(), scope};
  auto found = step_graphs_.find(key);
  // The steps before choose algorithms and grow workspaces, which a recording cannot do.
  constexpr int64_t kStepsBeforeRecording = 2;
  if (found == step_graphs_.end() && ++steps_since_configure_ > kStepsBeforeRecording) {
    bool recorded = record_step_graph(key);
    if (recording_agreement_ && !recording_agreement_(recorded) && recorded) {
      drop_step_graphs();
      step_graph_failure_ = "another rank's recording failed (a recording that holds collectives is every rank's or "
                            "none's)";
      recorded = false;
    }
    if (recorded) found = step_graphs_.find(key);
  }
  const bool whole = scope == StepRecording::kForwardAndBackward;
  if (found != step_graphs_.end()) {
    found->second->replay();
    ++replayed_steps_;
  } else {
    queue_forward();
    if (whole) {
      queue_backward();
      if (step_tail_) step_tail_();
    }
  }
  loss_->queue_loss_read();
  if (!whole) {
    queue_backward();  // launched: its hook sees each gradient as it is made
    if (step_tail_) step_tail_();
  }
  backward_ready_ = false;
}

void Model::queue_forward() {
  const TensorRef* act = &input_;
  for (auto& layer : layers_) act = &layer->run_forward(*act);
  loss_->queue_loss(*act);
}

void Model::queue_backward() {
  const TensorRef* grad = &loss_->backward();
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) grad = &(*it)->run_backward(*grad);
}

bool Model::record_step_graph(const StepGraphKey& key) {
  // At most a few recordings: the staged input's two slots (or the cast input) at one loss scale.
  if (step_graphs_.size() >= 4) drop_step_graphs();
  Stream& stream = *ctx_.stream;
  try {
    stream.begin_capture();
    queue_forward();
    if (key.scope == StepRecording::kForwardAndBackward) {
      queue_backward();
      if (step_tail_) step_tail_();
    }
    step_graphs_[key] = stream.end_capture();
    return true;
  } catch (const std::exception& e) {
    stream.abort_capture();
    drop_step_graphs();
    step_graph_failure_ = e.what();
    return false;
  }
}

void Model::set_step_tail(std::function<void()> tail) {
  step_tail_ = std::move(tail);
  drop_step_graphs();
}

void Model::backward() {
  if (!backward_ready_)
    throw std::logic_error("Model " + name_ + ": backward needs a forward(training=true) first");
  const TensorRef* grad = &timed(ctx_.profile, loss_.get(), kLossUnit, "loss", Pass::kBackward,
                                 [&]() -> const TensorRef& { return loss_->backward(); });
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) grad = &(*it)->run_backward(*grad);
  backward_ready_ = false;
}

}  // namespace sdp::nn
