// Optimizer: updates every parameter of a ParameterStore in place from its gradient
// arena, with state (momentum, Adam moments) held in arenas of the same layout. Each kind
// (Sgd, Adam, Lars, Lamb) holds its options and state; its device twins hold the update, and
// X::create picks the twin for the store's device, as layers do (nn/layer_factory.hpp):
//   XCpu   one multi-tensor pass (optim/multi_tensor.hpp): one OpenMP region over chunks of
//          the arenas, the per-tensor norms of LARS and LAMB gathered inside it;
//   XCuda  a few launches that cover every tensor (optim/cuda_updates.hpp), on stream().
//
// Contract: step(lr) is called once per training step, after the gradients have been
// averaged over all ranks; every rank then applies the identical update. The learning
// rate comes from outside (LrSchedule), so the optimizer holds no schedule state.
// Weight decay: with decay_all (PyTorch's default: torch.optim applies weight_decay to
// every parameter it is given) every parameter decays; otherwise only those with
// Param::weight_decay (the "no decay on biases and norms" recipe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/parameter_store.hpp"
#include "core/tensor.hpp"
#include "optim/cuda_updates.hpp"
#include "optim/multi_tensor.hpp"

namespace sdp {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual const char* name() const = 0;  // "sgd", "adam", "adamw", "lars", "lamb"

  // One update with learning rate `lr`; then step_count() grows by one.
  void step(float lr);
  // The same update with the gradients' finiteness check folded into its pass (host
  // arenas): false when a gradient is NaN or infinite. On the CPU the update has then been
  // applied with it and the weights are poisoned, so the caller must end the run (what
  // train.on_nonfinite: abort does); on a GPU the check runs first and nothing is updated.
  bool step_checking_gradients(float lr);
  // Updates done so far (PyTorch's per-parameter "step"); restore it with the state.
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps) { step_count_ = steps; }

  // Whole state arenas, named by kind ("momentum_buffer", "exp_avg", ...), for
  // broadcasting state in one call. Empty for plain SGD.
  const std::vector<NamedTensor>& state_arenas() const { return state_; }
  // Per-parameter views of the state arenas, named "<param>.<kind>" (e.g.
  // "conv1.weight.exp_avg"), for checkpoints. Writing to them restores the state.
  std::vector<NamedTensor> state_tensors() const;

  // Where the update is enqueued when the arenas live on a GPU: the rank's compute stream;
  // null is CUDA's default stream. Ignored on the CPU.
  void set_stream(Stream* stream) { stream_ = stream; }

  // The update with 1-based number `t`: on the CPU it also reports whether every gradient it
  // read was finite; twins that do not check (checks_gradients_in_update() false) return true.
  virtual bool update(float lr, int64_t t) = 0;
  virtual bool checks_gradients_in_update() const = 0;

  // optimizer.capturable (a GPU update recorded in a CUDA graph): update() reads its per-step
  // scalars from `scalars` in device memory (step_scalars, written there before each step) and
  // changes nothing while *skip is non-zero (the step's gradients were not finite). The caller
  // then counts each applied update with count_applied_update(). GPU twins only.
  void read_scalars_from_device(const cuda_updates::StepScalars* scalars, const int32_t* skip);
  // The scalars of update number t at learning rate lr, exactly as the CPU computes them.
  virtual cuda_updates::StepScalars step_scalars(float lr, int64_t t) const;
  void count_applied_update() { ++step_count_; }

 protected:
  Optimizer(ParameterStore& store, float weight_decay, bool decay_all);

  // A contiguous range of the arenas sharing one weight decay value.
  struct Segment {
    int64_t begin = 0;
    int64_t count = 0;
    float weight_decay = 0;
  };

  // The arenas in chunks: of segments_ (group = segment index: SGD, Adam), or of each
  // parameter tensor (group = index in store_.params(): LARS, LAMB, whose scalars are per
  // tensor). Made once, from the layout alone.
  const std::vector<multi_tensor::Chunk>& segment_chunks() const { return segment_chunks_; }
  const std::vector<multi_tensor::Chunk>& parameter_chunks() const { return parameter_chunks_; }

  // segments_ (SGD, Adam) or one range per parameter (LARS, LAMB: `adapt` = the parameter
  // takes weight decay and the trust ratio), copied to the GPU on first use. Defined in
  // optimizer_cuda.cpp, for the CUDA twins.
  const cuda_updates::RangeTable& segment_table();
  const cuda_updates::RangeTable& parameter_table(float weight_decay);
  // A zero-filled state arena with the parameter arena's layout, on the store's device.
  float* add_state(const std::string& kind);
  // Where the GPU twins' launches take the scalars of update t at lr (read_scalars_from_device).
  cuda_updates::ScalarSource scalar_source(float lr, int64_t t) const {
    return {step_scalars(lr, t), device_scalars_, device_skip_};
  }

  ParameterStore& store_;
  std::vector<Segment> segments_;

  Stream* stream_ = nullptr;

 private:
  std::vector<multi_tensor::Chunk> segment_chunks_, parameter_chunks_;
  std::shared_ptr<const cuda_updates::RangeTable> segment_table_;
  std::shared_ptr<const cuda_updates::RangeTable> parameter_table_;
  std::vector<NamedTensor> state_;
  int64_t step_count_ = 0;
  const cuda_updates::StepScalars* device_scalars_ = nullptr;
  const int32_t* device_skip_ = nullptr;
};

// Throws InputError: `kind` has no update for `device` in this build.
[[noreturn]] void throw_no_update(const char* kind, const Device& device);

// Makes `Cpu` or `Cuda` (a twin of optimizer kind `Kind`) for the store's device; throws
// sdp::InputError naming `kind` when this build has none for it. Cuda is instantiated only in
// builds with the CUDA backend.
template <class Kind, class Cpu, class Cuda, class Options>
std::unique_ptr<Kind> make_for_device(ParameterStore& store, const char* kind, const Options& options) {
  const Device device = store.device();
  if (device.is_cpu()) return std::make_unique<Cpu>(store, options);
#ifdef SDP_HAVE_CUDA
  if (device.is_cuda()) {
    require_device(device, kind);
    return std::make_unique<Cuda>(store, options);
  }
#endif
  throw_no_update(kind, device);
}

}  // namespace sdp
