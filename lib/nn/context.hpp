// Context: what every layer of one model shares — the device it computes on, that device's
// stream, the parameter store it registers into, and the grad-ready hook backward reports
// to. Layers pick nothing from globals: the factories (X::create) read ctx.device, so two
// models on two devices can live in one process (Caffe's factory without Caffe::mode()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/parameter_store.hpp"
#include "core/stream.hpp"
#include "core/tensor_desc.hpp"

namespace sdp::nn {

using GradReadyHook = std::function<void(const Param&)>;
class LayerProfile;

// The stream a model computes on: the CPU layers' own stream, core's CUDA stream on
// a GPU. Throws sdp::Error when this build has no backend for `device`.
std::shared_ptr<Stream> make_compute_stream(const Device& device);

// How the GPU layers may compute f32 and choose their algorithms (precision: tf32,
// train.deterministic, train.conv_algorithms, train.cudnn_workspace_mb). The defaults keep f32
// in f32 and every run's bits the same.
struct ComputeRules {
  bool tf32 = false;                // f32 data on TF32 tensor cores (Ampere and newer)
  bool deterministic = true;        // only algorithms that give the same bits every run
  bool measure_algorithms = false;  // cuDNN times its candidates once per shape (find), not its heuristics
  std::size_t workspace_limit = std::size_t{512} << 20;  // bytes a candidate may ask for
  bool operator==(const ComputeRules& o) const {
    return tf32 == o.tf32 && deterministic == o.deterministic && measure_algorithms == o.measure_algorithms &&
           workspace_limit == o.workspace_limit;
  }
};

struct Context {
  Context(ParameterStore& store_ref, Device device_value = Device::cpu(), uint64_t seed_value = 42)
      : store(store_ref),
        device(device_value),
        stream(make_compute_stream(device_value)),
        seed(seed_value) {}

  ParameterStore& store;
  Device device;
  std::shared_ptr<Stream> stream;
  GradReadyHook grad_ready_hook;  // may be empty
  uint64_t seed;                  // base seed for stochastic layers (dropout)
  // Where stochastic layers are in their random stream: each draws from a generator seeded
  // by (seed, layer, random_stream, random_step), so a resumed run continues the same masks
  // with no generator state in the checkpoint. The trainer sets stream = rank, step = step.
  uint64_t random_stream = 0;
  int64_t random_step = 0;
  // channels_last (NHWC) end to end on the GPU (model.memory_format): a CUDA layer given NHWC
  // input computes on it as it is and gives NHWC output (and gradients), with no conversion;
  // without it, CUDA layers compute NCHW and convert at their edges.
  bool channels_last = false;
  // A GradientPlan will place this configure's buffers (a Model training with its plan on):
  // the GPU layers then leave their outputs and backward's buffers to it instead of
  // allocating them. The CPU layers always defer to a plan that binds them.
  bool planned_backward = false;
  // That plan is lean (model.memory_plan: lean): a GPU layer keeps for backward only what its
  // backward reads (a BatchNorm without a fused activation keeps no output, cuDNN's backward is
  // given none; a convolution without a fused ReLU keeps its output only for its consumers),
  // and cuDNN's workspace is a buffer of each operation's own in the arena instead of one the
  // size of the largest, alive all the time.
  bool lean_plan = false;
  ComputeRules rules;
  // model.batchnorm: folded. Each configure folds each BatchNorm with its ReLU between two
  // convolutions into them where it can (nn/batchnorm2d.hpp: fold_between); `folded` counts those
  // that did at the last one and `refused` says why the others did not (Model::configure clears
  // both).
  // With `with_residual`, each residual branch's last BatchNorm (its block's sum and ReLU fused)
  // folds too, after the convolution before it (fold_with_residual_after), in training, and a
  // projection shortcut's BatchNorm into it (fold_into_residual_of); `folded_with_residual`,
  // `refused_with_residual`, `folded_shortcuts` and `refused_shortcuts` count those.
  struct BatchNormFolding {
    bool requested = false;
    bool with_residual = false;
    int folded = 0;
    std::vector<std::string> refused;  // "layer: why"
    int folded_with_residual = 0;
    std::vector<std::string> refused_with_residual;
    int folded_shortcuts = 0;
    std::vector<std::string> refused_shortcuts;
    double build_seconds = 0;  // building the folded passes' cuDNN graphs (each shape's once a stream)
    // "6 of 6 BatchNorms between two convolutions folded into them, 3 of 3 with their block's
    // sum after the one before, 2 of 2 projection shortcuts' into theirs (...)", and the first
    // refusal.
    std::string summary() const;
  } batchnorm_folding;
  // model.grad_sum: fused. Each training configure asks each residual block whose BatchNorm fuses
  // its sum to make its input gradient's sum in its branch's first convolution's input gradient
  // pass (Conv2d::add_to_input_grad); `fused` counts the blocks that did, `refused` says why not.
  struct GradSumFusion {
    bool requested = false;
    int fused = 0;
    std::vector<std::string> refused;  // "block: why"
    // "16 of 16 residual blocks' input gradient sums in their first convolution's pass", and the
    // first refusal.
    std::string summary() const;
  } grad_sum_fusion;
  // Times every layer's forward and backward when set (nn/layer_profile.hpp); not owned.
  LayerProfile* profile = nullptr;
};

// Frees what the layers on ctx's stream share as scratch (a GPU's cuDNN workspace) once the
// device is idle; the next configure reserves what it uses again. Nothing on the CPU.
void release_shared_scratch(Context& ctx);

// Copies `src` into `dst`: the same logical tensor (shape, dtype) in possibly different
// layouts, on the context's device. What tests and the loss use to read blocked layouts.
void convert_layout(Context& ctx, const TensorRef& src, const TensorRef& dst);

// Writes the f32 plain NCHW batch `src` into `dst`, the same shape channels_last in dst's
// dtype (f32 or 16-bit), in one pass on ctx's GPU stream: a channels_last model's input.
void stage_channels_last(Context& ctx, const TensorRef& src, const TensorRef& dst);

}  // namespace sdp::nn
