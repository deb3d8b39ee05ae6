// CUDA kernels of the optimizers (cuda_updates.hpp). The arithmetic per element is
// update_rules.hpp's, shared with the CPU; this file only decides the launch shapes.
//
// Layout: grid.y indexes the range (a segment of one weight decay, or one parameter tensor),
// grid.x blocks stride over that range. Norms (LARS, LAMB) are one block per range summing
// in double in a fixed order (strided partial sums, then a fixed tree), so every GPU computes
// the same bits from the same inputs and the replicas of all ranks stay identical; atomics
// would not.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check_cuda.hpp"
#include "core/error.hpp"
#include "core/cuda_casts.hpp"
#include "optim/cuda_updates.hpp"
#include "optim/update_rules.hpp"
#include "core/grid_stride_cuda.hpp"
#include "core/stream_cuda.hpp"

namespace sdp::cuda_updates {

namespace {

constexpr int kThreads = 256;       // elementwise kernels
constexpr int kNormThreads = 512;   // one block per tensor for the norms
constexpr int kMaxBlocksPerRange = 1024;

void check(cudaError_t status, const char* what) { check_cuda(status, what, "optimizer on the GPU"); }

cudaStream_t as_stream(Stream* stream) { return cuda_stream_of(stream); }

// Sum of value(i)^2 over [0, n) by one block, in double; every thread gets the result.
template <typename Value>
__device__ double block_sum_squares(int64_t n, Value value, double* shared) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double x = value(i);
    s += x * x;
  }
  shared[threadIdx.x] = s;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shared[threadIdx.x] += shared[threadIdx.x + width];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // `shared` may be reused right after
  return total;
}

// The launch's scalars (ScalarSource): the same for every thread, so a skipped launch returns
// before any barrier.
__device__ StepScalars scalars_of(const ScalarSource& source) {
  return source.on_device != nullptr ? *source.on_device : source.value;
}
__device__ bool skipped(const ScalarSource& source) { return source.skip != nullptr && *source.skip != 0; }

__global__ void check_loss_kernel(const double* loss_sum, double batch, int32_t* skip) {
  if (!isfinite(static_cast<float>(*loss_sum / batch))) *skip = 1;
}

// ---- SGD ----

__global__ void sgd_kernel(const Range* ranges, float* p, const float* g, ScalarSource source) {
  if (skipped(source)) return;
  const float lr = scalars_of(source).lr;
  const Range r = ranges[blockIdx.y];
  SDP_GRID_STRIDE(i, r.count) {
    const int64_t k = r.begin + i;
    p[k] = update_rules::sgd(p[k], g[k], lr, r.weight_decay);
  }
}

__global__ void sgd_momentum_kernel(const Range* ranges, float* p, const float* g, float* buf, ScalarSource source,
                                    float mu, float keep, bool nesterov) {
  if (skipped(source)) return;
  const StepScalars s = scalars_of(source);
  const float lr = s.lr;
  const bool first = s.first != 0;
  const Range r = ranges[blockIdx.y];
  SDP_GRID_STRIDE(i, r.count) {
    const int64_t k = r.begin + i;
    const float wd = r.weight_decay;
    const float b = first ? update_rules::sgd_momentum_first(g[k], p[k], wd)
                          : update_rules::sgd_momentum(buf[k], g[k], p[k], mu, keep, wd);
    buf[k] = b;
    p[k] = nesterov ? update_rules::sgd_nesterov(p[k], g[k], b, lr, mu, wd) : update_rules::sgd_heavy_ball(p[k], b, lr);
  }
}

// ---- Adam / AdamW ----

__global__ void adam_kernel(const Range* ranges, float* p, const float* g, float* m, float* v, ScalarSource source,
                            float b1, float b2, float eps, bool decoupled) {
  if (skipped(source)) return;
  const StepScalars s = scalars_of(source);
  const float lr = s.lr, step_size = s.step_size, bias2_sqrt = s.bias2_sqrt;
  const Range r = ranges[blockIdx.y];
  const float l2 = decoupled ? 0.0f : r.weight_decay;
  const float shrink = 1.0f - lr * r.weight_decay;
  SDP_GRID_STRIDE(i, r.count) {
    const int64_t k = r.begin + i;
    float pk = p[k];
    if (decoupled && r.weight_decay != 0) pk = update_rules::decoupled_decay(pk, shrink);
    const float gk = update_rules::decayed(g[k], pk, l2);
    const float mk = update_rules::first_moment(m[k], gk, b1);
    const float vk = update_rules::second_moment(v[k], gk, b2);
    m[k] = mk;
    v[k] = vk;
    p[k] = update_rules::adam_step(pk, mk, vk, step_size, bias2_sqrt, eps);
  }
}

// ---- LARS ----

// norms[2 r] = ||p||, norms[2 r + 1] = ||g|| of range r.
__global__ void lars_norms_kernel(const Range* ranges, const float* p, const float* g, double* norms,
                                  ScalarSource source) {
  __shared__ double shared[kNormThreads];
  const Range r = ranges[blockIdx.x];
  if (!r.adapt || skipped(source)) return;  // uniform per block: no thread reaches a barrier the others skip
  const float* pr = p + r.begin;
  const float* gr = g + r.begin;
  const double w = block_sum_squares(r.count, [pr](int64_t i) { return pr[i]; }, shared);
  const double d = block_sum_squares(r.count, [gr](int64_t i) { return gr[i]; }, shared);
  if (threadIdx.x == 0) {
    norms[2 * blockIdx.x] = sqrt(w);
    norms[2 * blockIdx.x + 1] = sqrt(d);
  }
}

__global__ void lars_step_kernel(const Range* ranges, const double* norms, float* p, const float* g, float* v,
                                 ScalarSource source, float mu, float trust, float eps) {
  if (skipped(source)) return;
  const float lr = scalars_of(source).lr;
  const Range r = ranges[blockIdx.y];
  float scale = lr;
  if (r.adapt) {
    const double local_lr = update_rules::lars_local_lr(norms[2 * blockIdx.y], norms[2 * blockIdx.y + 1], trust,
                                                        r.weight_decay, eps);
    scale = static_cast<float>(double{lr} * local_lr);
  }
  SDP_GRID_STRIDE(i, r.count) {
    const int64_t k = r.begin + i;
    const float vk = update_rules::lars_velocity(v[k], g[k], p[k], mu, scale, r.weight_decay);
    v[k] = vk;
    p[k] -= vk;
  }
}

// ---- LAMB ----

__global__ void lamb_moments_kernel(const Range* ranges, const float* g, float* m, float* v, float b1, float b2,
                                    ScalarSource source) {
  if (skipped(source)) return;
  const Range r = ranges[blockIdx.y];
  SDP_GRID_STRIDE(i, r.count) {
    const int64_t k = r.begin + i;
    m[k] = update_rules::first_moment(m[k], g[k], b1);
    v[k] = update_rules::second_moment(v[k], g[k], b2);
  }
}

// norms[2 r] = ||p||, norms[2 r + 1] = ||direction|| of range r.
__global__ void lamb_norms_kernel(const Range* ranges, const float* p, const float* m, const float* v,
                                  ScalarSource source, float eps, double* norms) {
  __shared__ double shared[kNormThreads];
  const Range r = ranges[blockIdx.x];
  if (!r.adapt || skipped(source)) return;
  const StepScalars s = scalars_of(source);
  const float bias1 = s.bias1, bias2 = s.bias2;
  const float* pr = p + r.begin;
  const float* mr = m + r.begin;
  const float* vr = v + r.begin;
  const float wd = r.weight_decay;
  const double w = block_sum_squares(r.count, [pr](int64_t i) { return pr[i]; }, shared);
  const double d = block_sum_squares(
      r.count, [=](int64_t i) { return update_rules::lamb_direction(mr[i], vr[i], pr[i], bias1, bias2, eps, wd); },
      shared);
  if (threadIdx.x == 0) {
    norms[2 * blockIdx.x] = sqrt(w);
    norms[2 * blockIdx.x + 1] = sqrt(d);
  }
}

__global__ void lamb_step_kernel(const Range* ranges, const double* norms, float* p, const float* m,
                                 const float* v, ScalarSource source, float eps) {
  if (skipped(source)) return;
  const StepScalars s = scalars_of(source);
  const float lr = s.lr, bias1 = s.bias1, bias2 = s.bias2;
  const Range r = ranges[blockIdx.y];
  const float ratio = r.adapt ? update_rules::lamb_ratio(norms[2 * blockIdx.y], norms[2 * blockIdx.y + 1]) : 1.0f;
  const float step = lr * ratio;
  SDP_GRID_STRIDE(i, r.count) {
    const int64_t k = r.begin + i;
    const float d = update_rules::lamb_direction(m[k], v[k], p[k], bias1, bias2, eps, r.weight_decay);
    p[k] = update_rules::lamb_step(p[k], d, step);
  }
}

}  // namespace

struct RangeTable {
  Range* ranges = nullptr;   // device
  double* norms = nullptr;   // device, 2 per range
  int count = 0;
  int64_t max_count = 0;     // longest range: sizes grid.x

  RangeTable() = default;
  RangeTable(const RangeTable&) = delete;
  RangeTable& operator=(const RangeTable&) = delete;
  ~RangeTable() {
    cudaFree(ranges);
    cudaFree(norms);
  }

  dim3 grid() const {
    const int64_t blocks = (max_count + kThreads - 1) / kThreads;
    return dim3(static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocksPerRange)), static_cast<unsigned>(count));
  }
};

std::shared_ptr<const RangeTable> make_range_table(const std::vector<Range>& ranges, int device_ordinal) {
  if (ranges.size() > 65535)
    throw RuntimeError("optimizer on the GPU: " + std::to_string(ranges.size()) +
                       " parameter ranges exceed one grid's 65535 rows");
  auto table = std::make_shared<RangeTable>();
  table->count = static_cast<int>(ranges.size());
  for (const Range& r : ranges) table->max_count = std::max(table->max_count, r.count);
  check(cudaSetDevice(device_ordinal), "cudaSetDevice");
  const std::size_t n = std::max<std::size_t>(ranges.size(), 1);
  check(cudaMalloc(&table->ranges, n * sizeof(Range)), "cudaMalloc (ranges)");
  check(cudaMalloc(&table->norms, 2 * n * sizeof(double)), "cudaMalloc (norms)");
  if (!ranges.empty())
    check(cudaMemcpy(table->ranges, ranges.data(), ranges.size() * sizeof(Range), cudaMemcpyHostToDevice),
          "cudaMemcpy (ranges)");
  return table;
}

void check_step(const float* g, int64_t count, const double* loss_sum, int64_t batch, int32_t* skip, Stream* stream) {
  const cudaStream_t s = as_stream(stream);
  check(cudaMemsetAsync(skip, 0, sizeof(int32_t), s), "cudaMemsetAsync (the update's skip flag)");
  static_assert(sizeof(int32_t) == sizeof(int), "flag_nonfinite writes an int");
  cuda_casts::flag_nonfinite(g, count, reinterpret_cast<int*>(skip), stream);
  if (loss_sum != nullptr) {
    check_loss_kernel<<<1, 1, 0, s>>>(loss_sum, static_cast<double>(batch), skip);
    check(cudaGetLastError(), "the loss check kernel launch");
  }
}

void sgd(const RangeTable& t, float* p, const float* g, float* buf, const ScalarSource& scalars, float momentum,
         float keep, bool nesterov, Stream* stream) {
  if (t.count == 0) return;
  if (buf == nullptr)
    sgd_kernel<<<t.grid(), kThreads, 0, as_stream(stream)>>>(t.ranges, p, g, scalars);
  else
    sgd_momentum_kernel<<<t.grid(), kThreads, 0, as_stream(stream)>>>(t.ranges, p, g, buf, scalars, momentum, keep,
                                                                      nesterov);
  check(cudaGetLastError(), "the SGD kernel launch");
}

void adam(const RangeTable& t, float* p, const float* g, float* m, float* v, const ScalarSource& scalars, float beta1,
          float beta2, float eps, bool decoupled, Stream* stream) {
  if (t.count == 0) return;
  adam_kernel<<<t.grid(), kThreads, 0, as_stream(stream)>>>(t.ranges, p, g, m, v, scalars, beta1, beta2, eps,
                                                            decoupled);
  check(cudaGetLastError(), "the Adam kernel launch");
}

void lars(const RangeTable& t, float* p, const float* g, float* v, const ScalarSource& scalars, float momentum,
          float trust_coefficient, float eps, Stream* stream) {
  if (t.count == 0) return;
  lars_norms_kernel<<<t.count, kNormThreads, 0, as_stream(stream)>>>(t.ranges, p, g, t.norms, scalars);
  lars_step_kernel<<<t.grid(), kThreads, 0, as_stream(stream)>>>(t.ranges, t.norms, p, g, v, scalars, momentum,
                                                                 trust_coefficient, eps);
  check(cudaGetLastError(), "the LARS kernel launches");
}

void lamb(const RangeTable& t, float* p, const float* g, float* m, float* v, const ScalarSource& scalars, float beta1,
          float beta2, float eps, Stream* stream) {
  if (t.count == 0) return;
  lamb_moments_kernel<<<t.grid(), kThreads, 0, as_stream(stream)>>>(t.ranges, g, m, v, beta1, beta2, scalars);
  lamb_norms_kernel<<<t.count, kNormThreads, 0, as_stream(stream)>>>(t.ranges, p, m, v, scalars, eps, t.norms);
  lamb_step_kernel<<<t.grid(), kThreads, 0, as_stream(stream)>>>(t.ranges, t.norms, p, m, v, scalars, eps);
  check(cudaGetLastError(), "the LAMB kernel launches");
}

}  // namespace sdp::cuda_updates
