// The CTR models' optimizers: the same rule on the table's rows a step touched (lazy: an
// untouched row and its state stay as they are, as TensorFlow's LazyAdam and PyTorch's
// SparseAdam do) and on the dense parameters (every element, every step).
//
//   sgd      p -= lr g; with optimizer.momentum > 0, buf = mu buf + g; p -= lr buf (TensorFlow's
//            MomentumOptimizer; a row's buffer decays only when the row is touched)
//   adam     Adam with the step count t of the whole run in its bias correction (LazyAdam)
//   adagrad  acc += g^2; p -= lr g / (sqrt(acc) + eps), acc from optimizer.initial_accumulator
//   ftrl     FTRL-Proximal (TensorFlow's FtrlOptimizer, learning_rate_power -0.5, optimizer.l1)
//
// model.l2 adds l2 * p to the gradient of the MLP's weights and of the touched rows (the
// sample's L2 over the whole table, applied lazily); biases get none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "core/tensor.hpp"
#include "ctr/ctr_model.hpp"
#include "ctr/sparse_rows.hpp"

namespace sdp {

class CtrOptimizer {
 public:
  CtrOptimizer(const OptimizerSpec& spec, double l2, CtrModel& model);

  // One update with learning rate `lr`: the dense gradient (dense().size()) and the table's
  // sparse gradient, both already averaged over the global batch.
  void step(float lr, const std::vector<float>& dense_grad, const SparseRows& table_grad);

  // Floats of state per table float `spec`'s rule keeps (Adam's m and v: 2): the memory a
  // table needs before one is made.
  static int table_state_floats(const OptimizerSpec& spec);

  int64_t steps() const { return steps_; }
  // The state for checkpoints ("optimizer.<slot>.table", "optimizer.<slot>.dense", "optimizer.steps").
  // Without `table`: the dense part and the step count alone.
  std::vector<NamedTensor> state_tensors(bool table = true) const;
  // The table's state alone ("optimizer.<slot>.table", [rows, width]) as views of the live
  // arrays, not copies: a sharded table's checkpoint part is written from them without a
  // second copy of its rows in memory. Valid until the next step.
  std::vector<NamedTensor> table_state_views();
  // Restores it; InputError naming `what` when a slot is missing or misshapen.
  // Without `table`: the dense part and the step count alone.
  void load_state(const std::vector<NamedTensor>& tensors, const std::string& what, bool table = true);
  // Bytes of optimizer state (both parts).
  int64_t state_bytes() const;

 private:
  struct Slot {
    std::string name;
    std::vector<float> table, dense;
  };
  void update(float* p, const float* g, int64_t n, int64_t state_offset, bool table, float lr, float l2);

  OptimizerKind kind_;
  OptimizerSpec spec_;
  float l2_;
  CtrModel& model_;
  std::vector<Slot> slots_;
  int64_t steps_ = 0;
  struct Chunk {
    int64_t offset, size;
    bool decays;
  };
  std::vector<Chunk> chunks_;  // the dense update's pieces, one per thread task
  // This step's Adam constants.
  float step_size_ = 0, bias2_sqrt_ = 0;
};

}  // namespace sdp
