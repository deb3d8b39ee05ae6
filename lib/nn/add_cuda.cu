// CUDA kernel and layer of add_cuda.hpp.
#include <cstdint>
#include <stdexcept>

#include "nn/add_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/elementwise_rule.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {
// What a sum kernel writes: the sum; relu(sum), a residual block's output (ReLUCuda's forward
// on the rounded sum); or the sum gated by a ReLU's output (ReLUCuda's backward on it). Each is
// the separate kernels' result bit for bit.
enum class SumOp { kPlain, kRelu, kGated };

template <SumOp op, class T>
__device__ __forceinline__ T sum_of(T a, T b, T gate) {
  T t = cuda::store_as<T>(residual_add(cuda::load_f32(a), cuda::load_f32(b)));
  if constexpr (op == SumOp::kRelu) t = cuda::store_as<T>(relu_forward(cuda::load_f32(t)));
  if constexpr (op == SumOp::kGated)
    t = cuda::store_as<T>(relu_backward_from_output(cuda::load_f32(gate), cuda::load_f32(t)));
  return t;
}

// y may be a (in place): each element is read before it is written by the same thread.
template <SumOp op, class T>
__global__ void add_kernel(const T* a, const T* b, const T* gate, T* y, int64_t n) {
  SDP_GRID_STRIDE(i, n)
  y[i] = sum_of<op>(a[i], b[i], op == SumOp::kGated ? gate[i] : T{});
}

// The same sum, 16 bytes of each operand a thread (8 16-bit values, or 4 f32): one load
// instruction where add_kernel issues 8, which is what keeps a 16-bit sum from the memory's
// speed. Operands 16-byte aligned; `vectors` = n / V, the tail is add_kernel's.
template <SumOp op, class T>
__global__ void add_vector_kernel(const T* a, const T* b, const T* gate, T* y, int64_t vectors) {
  constexpr int V = static_cast<int>(16 / sizeof(T));
  SDP_GRID_STRIDE(v, vectors) {
    const uint4 ra = reinterpret_cast<const uint4*>(a)[v];
    const uint4 rb = reinterpret_cast<const uint4*>(b)[v];
    uint4 rg{};
    if constexpr (op == SumOp::kGated) rg = reinterpret_cast<const uint4*>(gate)[v];
    uint4 ry;
    const T* ea = reinterpret_cast<const T*>(&ra);
    const T* eb = reinterpret_cast<const T*>(&rb);
    const T* eg = reinterpret_cast<const T*>(&rg);
    T* ey = reinterpret_cast<T*>(&ry);
#pragma unroll
    for (int k = 0; k < V; ++k) ey[k] = sum_of<op>(ea[k], eb[k], eg[k]);
    reinterpret_cast<uint4*>(y)[v] = ry;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <SumOp op, class T>
void launch_sum(const T* a, const T* b, const T* gate, T* y, int64_t n, cudaStream_t stream) {
  int64_t done = 0;
  if (aligned16(a) && aligned16(b) && aligned16(y) && (op != SumOp::kGated || aligned16(gate))) {
    constexpr int64_t V = 16 / sizeof(T);
    const int64_t vectors = n / V;
    if (vectors > 0)
      add_vector_kernel<op, T><<<cuda::grid_for(vectors), cuda::kThreads, 0, stream>>>(a, b, gate, y, vectors);
    done = vectors * V;
  }
  if (done < n)
    add_kernel<op, T><<<cuda::grid_for(n - done), cuda::kThreads, 0, stream>>>(
        a + done, b + done, op == SumOp::kGated ? gate + done : nullptr, y + done, n - done);
}
}  // namespace

TensorDesc AddCuda::configure(const TensorDesc& a, const TensorDesc& b, AddOutput output) {
  if (a.shape != b.shape || a.dtype != b.dtype)
    throw std::invalid_argument("Add: operands " + a.str() + " and " + b.str() + " differ");
  require_cuda_layout(a, "Add");
  require_cuda_layout(b, "Add");
  output_ = output;
  // Planned (a training configure with the plan on): the sum, whether an activation or a
  // gradient, its operand's conversion, and backward_b's.
  const bool planned = ctx_.planned_backward;
  b_to_a_.configure(b, a, planned);
  diff_b_.configure(a, b, planned);
  out_ = {a, nullptr};
  if (output_ != AddOutput::kInPlace) dst_.configure(a.device, a.nbytes(), planned);
  diff_b_out_ = {b, nullptr};
  return out_.desc;
}

const TensorRef& AddCuda::forward(const TensorRef& a, const TensorRef& b) {
  const TensorRef& b_as_a = b_to_a_.convert(ctx_, b);
  return sum(a, b_as_a, nullptr);
}

const TensorRef& AddCuda::forward_gated(const TensorRef& a, const TensorRef& b, const TensorRef& relu_output) {
  if (output_ != AddOutput::kGradient || relu_output.desc != a.desc)
    throw std::logic_error("Add: a gated sum is a gradient sum gated by a tensor of its own layout");
  const TensorRef& b_as_a = b_to_a_.convert(ctx_, b);
  return sum(a, b_as_a, relu_output.data);
}

const TensorRef& AddCuda::sum(const TensorRef& a, const TensorRef& b, const void* gate) {
  out_.data = output_ == AddOutput::kInPlace ? a.data : dst_.get();
  const int64_t n = a.desc.numel();
  cudaStream_t stream = cuda::stream_of(ctx_);
  cuda::with_storage_type(a.desc.dtype, [&](auto tag) {
    using T = cuda::storage_t<decltype(tag)>;
    const T* pa = a.as<const T>();
    const T* pb = b.as<const T>();
    T* py = out_.as<T>();
    if (gate != nullptr)
      launch_sum<SumOp::kGated>(pa, pb, static_cast<const T*>(gate), py, n, stream);
    else if (relu_fused_ && output_ != AddOutput::kGradient)
      launch_sum<SumOp::kRelu>(pa, pb, static_cast<const T*>(nullptr), py, n, stream);
    else
      launch_sum<SumOp::kPlain>(pa, pb, static_cast<const T*>(nullptr), py, n, stream);
  });
  cuda::check_launch("add_kernel");
  return out_;
}

const TensorRef& AddCuda::backward_b(const TensorRef& diff_dst) {
  diff_b_out_.data = diff_b_.convert(ctx_, diff_dst).data;
  return diff_b_out_;
}

GradientPlan::Buffer* AddCuda::plan_backward_b(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  // Without a conversion backward_b hands diff_dst itself through.
  GradientPlan::Buffer* diff_b = diff_b_.plan(plan, diff_dst);
  plan.next();
  return diff_b;
}

GradientPlan::Buffer* AddCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* a, GradientPlan::Buffer* b) {
  plan.read(a);
  plan.read(b);
  b_to_a_.plan(plan, b);
  GradientPlan::Buffer* sum = output_ == AddOutput::kInPlace ? a : dst_.write(plan);
  plan.next();
  return sum;
}

}  // namespace sdp::nn
