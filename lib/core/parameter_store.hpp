// ParameterStore: every parameter of a model in ONE contiguous arena, every gradient in a
// second arena with the same layout, and non-trainable buffers (BatchNorm running
// statistics) in a third. Gradient buckets for the AllReduce are slices of the gradient
// arena, so reducing a bucket needs no copy into a fusion buffer (docs/architecture.md, "Communicators").
//
// Two phases: layers register tensors while the model is built (add_parameter /
// add_buffer return references that stay valid), then finalize() allocates the arenas
// and points every Param at its slices. Registration order is forward order, so the
// tail of the gradient arena is produced first by backward.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace sdp {

struct Param {
  std::string name;
  Shape shape;
  bool weight_decay = true;  // false for biases and normalization parameters
  int64_t offset = 0;        // element offset in the arenas
  Tensor value;              // view into the parameter arena (valid after finalize)
  Tensor grad;               // view into the gradient arena (valid after finalize)
};

struct Buffer {
  std::string name;
  Shape shape;
  int64_t offset = 0;
  Tensor value;  // view into the buffer arena (valid after finalize)
};

class ParameterStore {
 public:
  // Offsets are rounded up to this many elements (64 bytes of f32) so every tensor
  // starts on a cache line.
  static constexpr int64_t kAlignElements = 16;

  Param& add_parameter(const std::string& name, const Shape& shape, bool weight_decay = true);
  Buffer& add_buffer(const std::string& name, const Shape& shape);

  // Allocates the arenas (zero-filled) on `device` and binds every Param/Buffer view.
  void finalize(Device device = Device::cpu());
  bool finalized() const { return finalized_; }
  const Device& device() const { return device_; }

  std::deque<Param>& params() { return params_; }
  const std::deque<Param>& params() const { return params_; }
  std::deque<Buffer>& buffers() { return buffers_; }
  const std::deque<Buffer>& buffers() const { return buffers_; }

  // Moves the gradient arena into caller-provided memory (on device()) of grad_arena().nbytes() bytes
  // (e.g. an MPI shared-memory window, so ranks of a node reduce from each other's
  // gradients without copies) and re-points every Param::grad. Call it before the first
  // forward: layers may keep raw pointers into the arena from then on.
  void rebind_grad_arena(std::shared_ptr<void> owner, void* data);

  // Flat 1-D views of the whole arenas (padding included, always zero in grads).
  const Tensor& param_arena() const { return param_arena_; }
  const Tensor& grad_arena() const { return grad_arena_; }
  const Tensor& buffer_arena() const { return buffer_arena_; }

  // Number of trainable scalars (padding excluded).
  int64_t num_parameters() const;
  void zero_grad() { grad_arena_.zero(); }
  // FNV-1a over parameter names and shapes: equal on every rank that built the same model.
  uint64_t fingerprint() const;

 private:
  std::deque<Param> params_;  // deque: references stay valid while adding
  std::deque<Buffer> buffers_;
  int64_t param_elements_ = 0;
  int64_t buffer_elements_ = 0;
  Tensor param_arena_, grad_arena_, buffer_arena_;
  bool finalized_ = false;
  Device device_;
};

}  // namespace sdp
