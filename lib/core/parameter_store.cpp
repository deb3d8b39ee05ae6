#include "core/parameter_store.hpp"

#include <stdexcept>

#include "core/device_memory.hpp"

namespace sdp {

namespace {
int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

void fnv1a(uint64_t& h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
}
}  // namespace

Param& ParameterStore::add_parameter(const std::string& name, const Shape& shape,
                                     bool weight_decay) {
  if (finalized_) throw std::logic_error("ParameterStore: add_parameter after finalize: " + name);
  Param& p = params_.emplace_back();
  p.name = name;
  p.shape = shape;
  p.weight_decay = weight_decay;
  p.offset = param_elements_;
  param_elements_ = align_up(param_elements_ + shape_numel(shape), kAlignElements);
  return p;
}

Buffer& ParameterStore::add_buffer(const std::string& name, const Shape& shape) {
  if (finalized_) throw std::logic_error("ParameterStore: add_buffer after finalize: " + name);
  Buffer& b = buffers_.emplace_back();
  b.name = name;
  b.shape = shape;
  b.offset = buffer_elements_;
  buffer_elements_ = align_up(buffer_elements_ + shape_numel(shape), kAlignElements);
  return b;
}

void ParameterStore::finalize(Device device) {
  if (finalized_) return;
  device_ = device;
  const MemoryPurposeScope purpose(MemoryPurpose::kParameters);
  param_arena_ = Tensor({param_elements_}, DType::kF32, device);
  grad_arena_ = Tensor({param_elements_}, DType::kF32, device);
  buffer_arena_ = Tensor({buffer_elements_}, DType::kF32, device);
  for (Param& p : params_) {
    int64_t n = shape_numel(p.shape);
    p.value = param_arena_.slice(p.offset, n).reshaped(p.shape);
    p.grad = grad_arena_.slice(p.offset, n).reshaped(p.shape);
  }
  for (Buffer& b : buffers_)
    b.value = buffer_arena_.slice(b.offset, shape_numel(b.shape)).reshaped(b.shape);
  finalized_ = true;
}

void ParameterStore::rebind_grad_arena(std::shared_ptr<void> owner, void* data) {
  if (!finalized_) throw std::logic_error("ParameterStore: rebind_grad_arena before finalize");
  Tensor arena = Tensor::view_of(std::move(owner), data, {param_elements_}, DType::kF32, device_);
  arena.copy_from(grad_arena_);
  grad_arena_ = arena;
  for (Param& p : params_) p.grad = grad_arena_.slice(p.offset, shape_numel(p.shape)).reshaped(p.shape);
}

int64_t ParameterStore::num_parameters() const {
  int64_t n = 0;
  for (const Param& p : params_) n += shape_numel(p.shape);
  return n;
}

uint64_t ParameterStore::fingerprint() const {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](const std::string& name, const Shape& shape) {
    fnv1a(h, name.data(), name.size());
    for (int64_t d : shape) fnv1a(h, &d, sizeof d);
  };
  for (const Param& p : params_) mix(p.name, p.shape);
  for (const Buffer& b : buffers_) mix(b.name, b.shape);
  return h;
}

}  // namespace sdp
