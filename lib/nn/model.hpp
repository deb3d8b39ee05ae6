// Model: a list of layers with a known backward order plus a softmax cross-entropy head,
// owning the ParameterStore that holds all parameters, gradients and buffers.
//
// Contract for the training loop:
//  * After construction (build()), store() is finalized and the parameters are
//    initialized from the seed; equal seeds give bit-identical parameters on every rank.
//  * forward(x, labels, training) runs the model on an [N, C, H, W] f32 NCHW tensor on the
//    model's device, or in host memory for a GPU model (copied in on its stream; labels in
//    host memory; cast to the compute dtype under mixed precision) and returns the mean
//    cross-entropy; `correct`
//    receives the number of top-1 hits.
//    Primitives are built on the first call and again only when N or the mode changes.
//  * backward() after forward(training=true) OVERWRITES every parameter gradient in the
//    gradient arena and calls the grad-ready hook once per Param, in reverse registration
//    order, as soon as that gradient is final (data parallelism starts AllReduce there).
//  * A training configure plans backward's buffers (nn/gradient_plan.hpp): input gradients
//    share one arena, allocated once per configure; gradient_plan() reports its size.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
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

  // `hits` (host, one per sample, optional): 1 where the sample's top-1 class is its label.
  float forward(const Tensor& x, const int32_t* labels, bool training, int64_t* correct = nullptr,
                uint8_t* hits = nullptr);
  // A GPU model: starts copying the host batch `x` to the device on a copy stream, to run
  // while the work queued so far (the previous batch's backward) computes; the forward that
  // takes `x` next waits for that copy instead of copying. `x` (page-locked for the copy to
  // be asynchronous: data/batch.hpp's pinned batches) must stay unchanged until that forward.
  // A no-op for a CPU model or input already on the device.
  void prefetch(const Tensor& x);
  // A training forward whose loss is read later with take_loss (train.loss_read: step_end):
  // on a GPU the host does not wait for forward, so it queues backward while forward runs.
  // Host input must then stay unchanged until wait_input_copied() has returned.
  void forward_deferred(const Tensor& x, const int32_t* labels);
  // The mean loss of the last forward_deferred (waits for it on a GPU).
  float take_loss();
  // Waits until the last forward_deferred's host input is on the device (at once on the CPU).
  void wait_input_copied();
  void backward();
  // forward_deferred then backward, replayed from a CUDA graph where set_step_graphs and the
  // obstacles below allow (step_recording): the input and the labels are staged as launches,
  // then the layers' forward and the loss's kernels, and the layers' backward unless a
  // grad-ready hook must see it, are recorded at the third such step after each configure
  // (the steps before pick algorithms and grow workspaces) and replayed from then on, one
  // recording per input buffer, loss scale and scope (their addresses and values are the
  // recording's); a backward not recorded is launched after the replay. A recording that
  // fails (a layer's call that cannot be recorded) ends the replays for this model:
  // step_graph_failure() says why, and the step runs as launches, as without graphs.
  void forward_backward_deferred(const Tensor& x, const int32_t* labels);
  // `forward_alone`: where backward cannot be recorded (backward_graph_obstacle), record the
  // forward alone and launch backward; otherwise such steps are launched whole.
  void set_step_graphs(bool enabled, bool forward_alone = false) {
    step_graphs_enabled_ = enabled;
    forward_alone_ = forward_alone;
  }
  // Device work queued after backward in every forward_backward_deferred, and recorded with a
  // whole step: the optimizer's update decided on the device (optimizer.capturable), so one
  // replay is the whole step. Empty (the default): none. Drops the recordings made without it.
  void set_step_tail(std::function<void()> tail);
  // The last training forward's loss on the device (SoftmaxCrossEntropy::loss_sum_on_device):
  // its sum over the rows, and the rows. A null sum on the CPU.
  struct DeviceLoss {
    const double* sum = nullptr;
    int64_t rows = 0;
  };
  DeviceLoss loss_on_device() const { return {loss_->loss_sum_on_device(), loss_->rows()}; }
  enum class StepRecording { kNone, kForward, kForwardAndBackward };
  StepRecording step_recording() const;
  // Why this model's steps are not recorded at all (empty when they can be): not a GPU model,
  // a layer whose work follows the step (dropout), layers timed one by one.
  std::string step_graph_obstacle() const;
  // Why its backward is not (empty when it can be): a grad-ready hook (data parallel's
  // buckets or micro-batch sums) takes each gradient as backward makes it, on the host.
  std::string backward_graph_obstacle() const;
  const std::string& step_graph_failure() const { return step_graph_failure_; }
  int64_t replayed_steps() const { return replayed_steps_; }
  // `recordable`: the hook's device work may be recorded with backward (data parallel's
  // stream-ordered buckets: distributed.stream_ordered), so it is no backward_graph_obstacle;
  // it runs while a step is recorded or launched, not on a replay.
  void set_grad_ready_hook(std::function<void(const Param&)> hook, bool recordable = false);
  // Where recordings hold collectives (a recordable hook on several ranks), recording is
  // collective: every rank replays or none does. `agree(recorded)` is called after each
  // recording attempt with this rank's outcome and returns whether every rank recorded; when
  // not, a rank that did drops its recording, the step is launched, and so are the steps
  // after (step_graph_failure says why), as after a failed recording.
  void set_recording_agreement(std::function<bool(bool recorded)> agree) { recording_agreement_ = std::move(agree); }
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
  // Mixed precision: activations and their gradients in `dtype` (f16 or bf16; f32 is the
  // default) while parameters, their gradients and the optimizer stay f32. Only a GPU model
  // takes 16-bit compute (std::invalid_argument otherwise). Takes effect at the next forward.
  void set_compute_dtype(DType dtype);
  DType compute_dtype() const { return compute_dtype_; }
  // channels_last (NHWC) end to end on a GPU (Context::channels_last): the input is staged
  // NHWC and every CUDA layer computes on NHWC (in f16 with BatchNorm fused).
  // Parameters, checkpoints and model.safetensors keep their layout. Throws on the CPU.
  void set_channels_last(bool value);
  bool channels_last() const { return ctx_.channels_last; }
  // TF32, determinism and algorithm choice of the GPU layers (Context::rules). Takes effect at
  // the next forward.
  void set_compute_rules(const ComputeRules& rules);
  // train.conv_algorithms: measured: the algorithms this model's GPU convolutions timed, as text
  // (nn/conv_algorithm_choices.hpp; "" when none were, or on the CPU), and choices to take instead
  // of timing (rank 0's, a checkpoint's: every rank and a resumed run then compute with the same
  // algorithms, the same bits): "" once taken (from the next configure), or why not (measured
  // with another cuDNN or GPU: this model times its own). Malformed text is an InputError naming `what`.
  std::string measured_conv_algorithms();
  std::string use_measured_conv_algorithms(const std::string& text, const std::string& what);
  // Configures for a training step of `batch` now instead of at the first forward (rank 0, to
  // time its convolution algorithms before the other ranks take them).
  void prepare_training(int64_t batch) { configure(batch, /*training=*/true); }
  // Multiplies every gradient backward produces by `scale` (loss scaling: a power of two).
  void set_loss_scale(float scale) { loss_->set_loss_scale(scale); }
  float loss_scale() const { return loss_->loss_scale(); }
  // false: every backward buffer gets its own storage, as with no plan (the reference the
  // plan is tested against). Takes effect at the next configure.
  void set_gradient_plan_enabled(bool enabled) {
    plan_enabled_ = enabled;
    configured_batch_ = -1;
  }
  // model.batchnorm: folded (Context::batchnorm_folding): each BatchNorm with its ReLU between
  // two convolutions of a residual branch is folded into them at each configure where the
  // layers can (a GPU's NHWC 16-bit convolutions with cuDNN's graphs); `with_residual`: each
  // branch's last BatchNorm, with its block's sum, after the convolution before it too, and a
  // projection shortcut's BatchNorm into that one (in training). Takes effect at the next
  // forward; batchnorm_folding() says what the last configure folded and why not the rest.
  void set_batchnorm_folding(bool requested, bool with_residual = false) {
    ctx_.batchnorm_folding.requested = requested;
    ctx_.batchnorm_folding.with_residual = requested && with_residual;
    configured_batch_ = -1;
  }
  const Context::BatchNormFolding& batchnorm_folding() const { return ctx_.batchnorm_folding; }
  // model.grad_sum: fused (Context::grad_sum_fusion): each residual block whose BatchNorm fuses its
  // sum makes its input gradient's sum in its branch's first convolution's input gradient pass,
  // where the layers can (a GPU's NHWC 16-bit convolutions with cuDNN's graphs). Takes effect at
  // the next forward; grad_sum_fusion() says what the last training configure fused.
  void set_grad_sum_fused(bool requested) {
    ctx_.grad_sum_fusion.requested = requested;
    configured_batch_ = -1;
  }
  const Context::GradSumFusion& grad_sum_fusion() const { return ctx_.grad_sum_fusion; }
  // With the plan on, GPU layers keep an output for backward only where their backward reads
  // it, and plan cuDNN's workspace per operation (Context::lean_plan). Takes effect at the next
  // configure.
  void set_lean_memory_plan(bool lean) {
    ctx_.lean_plan = lean;
    configured_batch_ = -1;
  }

 private:
  void configure(int64_t batch, bool training);
  void stage_input(const Tensor& x, bool stage);
  const TensorRef& forward_layers(const Tensor& x, bool training, bool mark_input_copied);
  // forward_layers' first part: checks the input, configures on a new shape or mode, stages it.
  void stage_forward(const Tensor& x, bool training, bool mark_input_copied);
  // The parts of a step a graph records: the layers' forward from input_ and the loss's
  // kernels; the layers' backward.
  void queue_forward();
  void queue_backward();
  struct StepGraphKey {
    const void* input;
    float loss_scale;
    StepRecording scope;
    bool operator<(const StepGraphKey& o) const {
      return std::tie(input, loss_scale, scope) < std::tie(o.input, o.loss_scale, o.scope);
    }
  };
  // Records the key's scope as a graph; false (step_graph_failure_ set) when the recording failed.
  bool record_step_graph(const StepGraphKey& key);
  void drop_step_graphs();
  // A slot of at least `bytes`: a batch in the compute type (16 bits) takes half an f32 one's.
  void reserve_slot(int slot, std::size_t bytes);

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
  DType compute_dtype_ = DType::kF32;
  bool input_channels_last() const;
  bool takes_compute_batches() const;

  int64_t configured_batch_ = -1;
  bool configured_training_ = false;
  bool backward_ready_ = false;
  TensorRef input_;
  std::unique_ptr<Event> input_copied_;  // recorded after each staged input (wait_input_copied)
  // A GPU model's copies of host input: two slots, so a prefetch fills one while the last
  // forward's backward still reads the other.
  Tensor staged_[2];
  int last_slot_ = 0;                       // the slot the last forward read
  const void* prefetched_src_ = nullptr;    // the host batch a pending prefetch copies
  std::size_t prefetched_bytes_ = 0;
  int prefetched_slot_ = -1;                // -1: none pending
  Tensor compute_input_;  // the input cast to the compute dtype (mixed precision)
  // Step graphs (forward_backward_deferred); cleared by configure.
  bool step_graphs_enabled_ = false;
  bool forward_alone_ = false;
  std::map<StepGraphKey, std::unique_ptr<StreamGraph>> step_graphs_;
  std::function<void()> step_tail_;
  bool grad_ready_hook_recordable_ = false;
  std::function<bool(bool)> recording_agreement_;
  int64_t steps_since_configure_ = 0;
  int64_t replayed_steps_ = 0;
  std::string step_graph_failure_;
};

}  // namespace sdp::nn
