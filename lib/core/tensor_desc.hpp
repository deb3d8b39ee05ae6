// TensorDesc / TensorRef: how activations and their gradients pass between layers, the
// same on every device (docs/architecture.md, "Layers"). A TensorDesc says what the bytes mean — shape,
// dtype, device and layout — and a TensorRef adds the pointer (not owning: the producing
// layer owns the buffer until its next forward/backward).
//
// Layouts: kPlain (row-major: NCHW, NC) and kChannelsLast (NHWC) can be read by anyone.
// kBackend is a backend's own layout (oneDNN's blocked nChw16c, say): only the backend that
// produced it reads `backend`; every other consumer asks that backend to reorder.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace sdp {

enum class Layout { kPlain, kChannelsLast, kBackend };

const char* layout_name(Layout layout);

// A backend's opaque layout description, implemented next to that backend.
class BackendLayout {
 public:
  virtual ~BackendLayout() = default;
  virtual bool same_as(const BackendLayout& other) const = 0;
  virtual std::size_t nbytes() const = 0;  // may exceed numel * dtype size (padded blocks)
  virtual std::string str() const = 0;
};

struct TensorDesc {
  Shape shape;
  DType dtype = DType::kF32;
  Device device;
  Layout layout = Layout::kPlain;
  std::shared_ptr<const BackendLayout> backend;  // set exactly when layout == kBackend

  static TensorDesc plain(Shape shape, Device device = Device::cpu(), DType dtype = DType::kF32) {
    return {std::move(shape), dtype, device, Layout::kPlain, nullptr};
  }
  int64_t numel() const { return shape_numel(shape); }
  // Bytes a buffer of this layout needs.
  std::size_t nbytes() const;
  bool operator==(const TensorDesc& other) const;
  bool operator!=(const TensorDesc& other) const { return !(*this == other); }
  std::string str() const;
};

// An activation or gradient: a TensorDesc and the pointer. data == nullptr means "none"
// (e.g. the input gradient of a model's first layer, which nobody needs).
struct TensorRef {
  TensorDesc desc;
  void* data = nullptr;

  bool empty() const { return data == nullptr; }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

}  // namespace sdp
