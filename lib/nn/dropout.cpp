#include "nn/dropout.hpp"

#include <functional>
#include <stdexcept>

#include "nn/dropout_cpu.hpp"
#include "nn/dropout_cuda.hpp"
#include "nn/dropout_rule.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

std::unique_ptr<Dropout> Dropout::create(Context& ctx, std::string name, float p) {
  return make_for_device<Dropout, DropoutCpu, DropoutCuda>(ctx, "Dropout", std::move(name), p);
}

Dropout::Dropout(Context& ctx, std::string name, float p)
    : Layer(ctx, std::move(name)), p_(p), layer_seed_(ctx.seed ^ std::hash<std::string>{}(name_)) {
  if (!(p >= 0.0f && p < 1.0f))
    throw std::invalid_argument("Dropout " + name_ + ": p must be in [0, 1)");
}

void Dropout::follow_random_position() {
  if (ctx_.random_step == seeded_step_ && ctx_.random_stream == seeded_stream_) return;
  seeded_step_ = ctx_.random_step;
  seeded_stream_ = ctx_.random_stream;
  const uint64_t step = static_cast<uint64_t>(seeded_step_);
  std::seed_seq seq{
      static_cast<uint32_t>(layer_seed_),    static_cast<uint32_t>(layer_seed_ >> 32),
      static_cast<uint32_t>(seeded_stream_), static_cast<uint32_t>(seeded_stream_ >> 32),
      static_cast<uint32_t>(step),           static_cast<uint32_t>(step >> 32)};
  rng_.seed(seq);
}

bool Dropout::draw_mask() {
  if (fixed_mask_ && mask_ready_) return false;
  follow_random_position();
  const float scale = 1.0f / (1.0f - p_);
  const uint64_t threshold = dropout_threshold(p_);
  for (float& m : mask_) m = dropout_mask_value(rng_(), threshold, scale);
  mask_ready_ = true;
  return true;
}

}  // namespace sdp::nn
