// GradientAccumulator: train.accumulate_steps = k micro-batches of data.batch_size per
// optimizer step; the step's gradient is the mean over the k micro-batches (and, after the
// AllReduce, over the ranks: the mean over the global batch).
//
// Backward OVERWRITES the gradient arena (nn/model.hpp), so the running sum lives in a second
// arena of the same layout, and each parameter is folded in from the grad-ready hook, right
// after backward wrote its gradient (still in cache):
//   micro-batch 0:          sum  = grad                (a copy: no zeroing pass)
//   micro-batch 1 .. k-2:   sum += grad
//   micro-batch k-1:        grad = (grad + sum) * 1/k  (the add and the scale fused)
// The gradient is final when the last micro-batch's backward reports it, which is when
// DataParallel hands it to the GradientReducer: the AllReduce runs on the last micro-batch
// only, overlapped with the rest of its backward as without accumulation.
//
// Why this way: it costs one more arena of the gradients' size (LeNet-5 0.25 MB, ResNet-50
// 102 MB) and one pass over each gradient per micro-batch, O(parameters) next to backward's
// O(batch x parameters). Layers that add into their gradients instead would change every
// layer's backward on every device (oneDNN's weight-gradient primitives overwrite their output,
// so they would need a scratch buffer and the same add), and swapping arenas between
// micro-batches is ruled out by layers keeping pointers into the arena.
// With k = 2 the result is bitwise what 2 ranks' AllReduce average gives, (g0 + g1) * 0.5:
// a sum of two floats does not depend on the order and halving is exact.
//
// On a GPU the sum arena is in device memory and the same adds are kernels enqueued on the
// compute stream right after the gradient's own (core/cuda_casts.hpp's add_scale).
#pragma once

#include <cstddef>

#include "core/parameter_store.hpp"
#include "core/tensor.hpp"

namespace sdp {

class GradientAccumulator {
 public:
  // `steps` >= 2 micro-batches per optimizer step; `store` finalized. `stream`: the compute
  // stream, where the store is on a GPU (the sums are enqueued on it); ignored on the CPU.
  GradientAccumulator(const ParameterStore& store, int steps, Stream* stream = nullptr);

  int steps() const { return steps_; }
  // Before micro-batch `micro` (0 .. steps - 1) of a step.
  void begin_micro_batch(int micro);
  // From the grad-ready hook, once per parameter per micro-batch. true on the last
  // micro-batch: p.grad now holds the mean over the step's micro-batches.
  bool add(const Param& p);
  // After the last micro-batch's backward: every parameter was folded in (else logic_error:
  // a parameter backward did not report would hold only its last micro-batch's gradient).
  void check_complete() const;

 private:
  int steps_;
  float inverse_steps_;
  Tensor sum_;  // the gradient arena's layout, on its device
  Stream* stream_;
  std::size_t params_;
  int micro_ = 0;
  std::size_t added_ = 0;  // parameters folded in during this micro-batch
};

}  // namespace sdp
