#include "core/tensor.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "core/cuda_casts.hpp"
#include "core/tensor_kernels.hpp"

namespace sdp {

namespace {
// Whole-arena passes split into parts of this many elements over the threads (smaller arenas
// take one thread: starting the others costs more than they save).
constexpr int64_t kParallelElements = int64_t{1} << 18;
}  // namespace

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

Tensor::Tensor(Shape shape, DType dtype, Device device)
    : shape_(std::move(shape)), dtype_(dtype), device_(device) {
  owner_ = allocate(device_, nbytes());
  data_ = owner_.get();
}

Tensor Tensor::view_of(std::shared_ptr<void> owner, void* data, Shape shape, DType dtype,
                       Device device) {
  Tensor t;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::reinterpreted(Shape shape, DType dtype) const {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (bytes > nbytes())
    throw std::invalid_argument("Tensor::reinterpreted: " + shape_str(shape) + " " + dtype_name(dtype) + " needs " +
                                std::to_string(bytes) + " bytes of " + std::to_string(nbytes()));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel())
    throw std::invalid_argument("Tensor::reshaped: " + shape_str(shape_) + " -> " +
                                shape_str(shape) + " changes the element count");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin + count > numel())
    throw std::out_of_range("Tensor::slice: [" + std::to_string(begin) + ", +" +
                            std::to_string(count) + ") outside " + shape_str(shape_));
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + begin * static_cast<int64_t>(dtype_size(dtype_));
  t.shape_ = {count};
  return t;
}

void Tensor::zero() {
  zero_bytes(device_, data_, nbytes());
}

void Tensor::fill(float value) {
  if (dtype_ != DType::kF32) throw std::invalid_argument("Tensor::fill: f32 only");
  if (!device_.is_cpu())
    throw std::invalid_argument("Tensor::fill: needs a CPU tensor, this one is on " +
                                device_.str());
  float* p = data<float>();
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
}

bool Tensor::all_finite(Stream* stream) const {
  if (dtype_ != DType::kF32) throw std::invalid_argument("Tensor::all_finite: f32 only");
  if (!device_.is_cpu()) {
#ifdef SDP_HAVE_CUDA
    if (device_.is_cuda())
      return cuda_casts::all_finite(data<float>(), numel(), device_.index, stream);
#endif
    throw std::invalid_argument("Tensor::all_finite: no check for tensors on " + device_.str());
  }
  (void)stream;
  // An OR does not depend on the order the threads combine in, so the pass runs at the memory
  // speed of all threads: it runs on the gradients every training step (11.7M of them for
  // ResNet-18).
  const float* p = data<float>();
  const int64_t n = numel();
  const TensorKernels& kernels = tensor_kernels();
  if (n < kParallelElements) return kernels.non_finite(p, n) == 0;
  uint32_t non_finite = 0;
#pragma omp parallel for schedule(static) reduction(| : non_finite)
  for (int64_t b = 0; b < n; b += kParallelElements)
    non_finite |= kernels.non_finite(p + b, std::min(kParallelElements, n - b));
  return non_finite == 0;
}

void Tensor::scale(float factor, Stream* stream) {
  if (dtype_ != DType::kF32) throw std::invalid_argument("Tensor::scale: f32 only");
  if (!device_.is_cpu()) {
#ifdef SDP_HAVE_CUDA
    if (device_.is_cuda()) return cuda_casts::to_f32(DType::kF32, data<float>(), raw(), numel(), factor, stream);
#endif
    throw std::invalid_argument("Tensor::scale: no kernel for tensors on " + device_.str());
  }
  (void)stream;
  float* p = data<float>();
  const int64_t n = numel();
  const TensorKernels& kernels = tensor_kernels();
  if (n < kParallelElements) return kernels.scale(p, n, factor);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n; b += kParallelElements) kernels.scale(p + b, std::min(kParallelElements, n - b), factor);
}

void Tensor::copy_from(const Tensor& other) {
  if (other.numel() != numel() || other.dtype() != dtype_)
    throw std::invalid_argument("Tensor::copy_from: " + shape_str(other.shape()) + " into " +
                                shape_str(shape_));
  copy_bytes(device_, data_, other.device(), other.raw(), nbytes());
}

}  // namespace sdp
