#include "optim/sgd.hpp"

#include "core/error.hpp"
#include "optim/dense_update_kernels.hpp"
#include "optim/multi_tensor.hpp"

namespace sdp {

Sgd::Sgd(ParameterStore& store, const SgdOptions& options)
    : Optimizer(store, options.weight_decay, options.decay_all), options_(options) {
  if (options.momentum < 0 || options.dampening < 0 || options.weight_decay < 0)
    throw InputError("optimizer sgd: momentum, dampening and weight_decay must be >= 0");
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw InputError("optimizer sgd: nesterov needs momentum > 0 and dampening 0");
  if (options.momentum != 0) momentum_ = add_state("momentum_buffer");
}

std::unique_ptr<Sgd> Sgd::create(ParameterStore& store, const SgdOptions& options) {
  return make_for_device<Sgd, SgdCpu, SgdCuda>(store, "optimizer sgd", options);
}

bool SgdCpu::update(float lr, int64_t t) {
  float* p_all = store_.param_arena().data<float>();
  const float* g_all = store_.grad_arena().data<float>();
  float* buf_all = momentum_;
  const float mu = options_.momentum;
  const float keep = 1.0f - options_.dampening;
  const bool nesterov = options_.nesterov;
  const std::vector<multi_tensor::Chunk>& chunks = segment_chunks();
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
  const DenseUpdateKernels& kernels = dense_update_kernels();
  uint32_t non_finite = 0;
#pragma omp parallel for schedule(static) reduction(| : non_finite)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const multi_tensor::Chunk& chunk = chunks[c];
    float* p = p_all + chunk.begin;
    const float* g = g_all + chunk.begin;
    const float wd = segments_[chunk.group].weight_decay;
    non_finite |= buf_all == nullptr ? kernels.sgd(p, g, chunk.count, lr, wd)
                                     : kernels.sgd_momentum(p, g, buf_all + chunk.begin, chunk.count, lr, wd,
                                                            mu, keep, t == 1, nesterov);
  }
  return non_finite == 0;
}

}  // namespace sdp
