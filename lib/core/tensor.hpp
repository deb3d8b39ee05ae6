// Tensor: a shape, a dtype, a device and a pointer into shared storage. Copies of a Tensor
// share storage (like torch.Tensor); views into arenas keep the arena's storage alive.
// Storage is allocated on the tensor's device (core/device_memory.hpp); CPU storage is
// 64-byte aligned so oneDNN and AVX-512 kernels get aligned rows. The helpers that touch
// elements (fill) refuse a device the host cannot address; zero/copy_from work on any device
// this build supports.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device_memory.hpp"
#include "core/dtype.hpp"
#include "core/stream.hpp"

namespace sdp {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage on `device`.
  explicit Tensor(Shape shape, DType dtype = DType::kF32, Device device = Device::cpu());

  // A tensor over memory owned by `owner` (kept alive by this tensor), at `data`.
  static Tensor view_of(std::shared_ptr<void> owner, void* data, Shape shape,
                        DType dtype = DType::kF32, Device device = Device::cpu());

  bool defined() const { return data_ != nullptr || shape_numel(shape_) == 0; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int axis) const { return shape_.at(axis < 0 ? shape_.size() + axis : axis); }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }

  // Same storage, new shape with the same number of elements.
  Tensor reshaped(Shape shape) const;
  // The first bytes of the same storage read as `dtype` in `shape` (at most nbytes()).
  Tensor reinterpreted(Shape shape, DType dtype) const;
  // Elements [begin, begin + count) of the flattened tensor, as a 1-D view.
  Tensor slice(int64_t begin, int64_t count) const;

  void zero();
  void fill(float value);               // f32 on the CPU only
  // No NaN or infinity (f32). On a GPU the check runs on `stream` (null = CUDA's default
  // stream) after the work queued there, and waits for its answer.
  bool all_finite(Stream* stream = nullptr) const;
  void copy_from(const Tensor& other);  // same numel and dtype; across devices too
  // Every element times `factor` (f32), in place; on a GPU enqueued on `stream` (null =
  // CUDA's default stream) without waiting.
  void scale(float factor, Stream* stream = nullptr);

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_;
};

// A tensor with a stable name (checkpoint entries, optimizer state).
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace sdp
