// Optimizer: updates every parameter of a ParameterStore in place from its gradient
// arena, with state (momentum, Adam moments) held in arenas of the same layout. On the CPU
// the update is one multi-tensor pass (optim/multi_tensor.hpp): one OpenMP region over
// chunks of the arenas, the per-tensor norms of LARS and LAMB gathered inside it; on a GPU
// a few launches cover every tensor (optim/cuda_updates.hpp).
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

  // Where the update is enqueued when the arenas live on a GPU: the rank's compute stream (a
  // cudaStream_t, opaque here); null is CUDA's default stream. Ignored on the CPU.
  void set_device_stream(void* stream) { device_stream_ = stream; }

 protected:
  Optimizer(ParameterStore& store, float weight_decay, bool decay_all);

  // A contiguous range of the arenas sharing one weight decay value.
  struct Segment {
    int64_t begin = 0;
    int64_t count = 0;
    float weight_decay = 0;
  };

  // `t` is the 1-based number of this update. update_cpu: the arenas are host memory; one
  // multi-tensor pass over segment_chunks() or parameter_chunks(), returning whether every
  // gradient it read was finite. update_cuda: they are on a GPU; it only enqueues kernels on
  // device_stream_ (built with the CUDA backend; the default says the optimizer has no device
  // twin). step() picks by the store's device. Both run update_rules.hpp's arithmetic.
  virtual bool update_cpu(float lr, int64_t t) = 0;
  virtual void update_cuda(float lr, int64_t t);

  // The arenas in chunks: of segments_ (group = segment index: SGD, Adam), or of each
  // parameter tensor (group = index in store_.params(): LARS, LAMB, whose scalars are per
  // tensor). Made once, from the layout alone.
  const std::vector<multi_tensor::Chunk>& segment_chunks() const { return segment_chunks_; }
  const std::vector<multi_tensor::Chunk>& parameter_chunks() const { return parameter_chunks_; }

  // segments_ (SGD, Adam) or one range per parameter (LARS, LAMB: `adapt` = the parameter
  // takes weight decay and the trust ratio), copied to the GPU on first use.
  const cuda_updates::RangeTable& segment_table();
  const cuda_updates::RangeTable& parameter_table(float weight_decay);
  // A zero-filled state arena with the parameter arena's layout, on the store's device.
  float* add_state(const std::string& kind);

  ParameterStore& store_;
  std::vector<Segment> segments_;

  void* device_stream_ = nullptr;

 private:
  std::vector<multi_tensor::Chunk> segment_chunks_, parameter_chunks_;
  std::shared_ptr<const cuda_updates::RangeTable> segment_table_;
  std::shared_ptr<const cuda_updates::RangeTable> parameter_table_;
  std::vector<NamedTensor> state_;
  int64_t step_count_ = 0;
};

}  // namespace sdp
