// GradientPlan: one arena for the buffers backward writes (input gradients, fused-ReLU
// gradients, layout-adapter outputs, gradient sums) and the forward outputs of layers that
// plan them (the GPU layers: Layer::plan_forward), shared between buffers whose lifetimes
// do not overlap. An input gradient is dead once the previous layer's backward consumed it,
// so a chain needs a few gradient buffers at a time, not one per layer.
//
// The contract:
//  * After configuring a model for training, its owner walks the backward in the order
//    backward() will run, calling plan_backward() on each layer (Layer::plan_backward mirrors
//    Layer::backward: it takes the buffer diff_dst will arrive in and returns the buffer its
//    input gradient leaves in). Each backward operation declares every planned buffer it
//    reads (read) or writes (write), then ends with next(). A buffer lives from its first
//    write to its last read; buffers passed through unchanged are simply returned, so the
//    consumer's read extends their life. nullptr stands for a buffer the plan does not manage
//    (the loss's gradient, a layer's own storage): never shared, so never a hazard.
//  * allocate() then places every buffer at an offset of one arena such that two buffers
//    whose lifetimes overlap (even in one operation) never overlap in memory, and binds each
//    buffer to its address. Nothing is allocated in the step loop.
//  * A buffer no plan bound (a layer used on its own, as the unit tests do) gets its own
//    storage from its owner; a plan is an optimization, never a requirement.
//  * Before that walk, the owner walks forward (Layer::plan_forward) on the same plan. A layer
//    whose output is planned declares it there and re-declares, in plan_backward, the reads
//    its backward makes of its forward; a layer that does not (the CPU layers) owns its
//    output, which stays alive until its backward has read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/dtype.hpp"

namespace sdp::nn {

class GradientPlan {
 public:
  // What a layer registers: its size, and how to point it at its storage.
  struct Buffer {
    std::size_t bytes = 0;
    std::function<void(void*)> bind;

   private:
    friend class GradientPlan;
    uint64_t generation = 0;  // of the plan that last recorded it (0: none)
    int index = -1;
  };

  GradientPlan();
  // Forgets every recorded buffer and frees the arena (buffers bound to it must be
  // reconfigured before use: Model::configure reconfigures every layer).
  void clear();

  // Declarations of the current backward operation.
  void read(Buffer* buffer);
  Buffer* write(Buffer* buffer);
  void next() { ++now_; }

  // Places and binds every recorded buffer (see the contract).
  void allocate(const Device& device);

  std::size_t arena_bytes() const { return arena_bytes_; }
  // What the recorded buffers would take with one allocation each.
  std::size_t separate_bytes() const;
  // The most bytes alive in one operation: what any placement needs at least (arena_bytes()
  // against it says how well the buffers were packed).
  std::size_t peak_live_bytes() const;
  std::size_t buffer_count() const { return records_.size(); }

 private:
  struct Record {
    Buffer* buffer;
    int first, last;
    std::size_t offset = 0;
  };
  Record& record(Buffer& buffer);

  uint64_t generation_;
  int now_ = 0;
  std::vector<Record> records_;
  std::shared_ptr<void> arena_;
  std::size_t arena_bytes_ = 0;
};

}  // namespace sdp::nn
