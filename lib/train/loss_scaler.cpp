#include "train/loss_scaler.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace sdp {

LossScaler::LossScaler(bool enabled, LossScalerOptions options)
    : enabled_(enabled), options_(options), scale_(enabled ? options.initial_scale : 1.0f) {
  if (!(options_.initial_scale >= 1.0f) || !(options_.growth_factor > 1.0f) ||
      !(options_.backoff_factor > 0.0f && options_.backoff_factor < 1.0f) || options_.growth_interval < 1)
    throw std::invalid_argument("LossScaler: initial scale >= 1, growth factor > 1, backoff in (0, 1), "
                                "growth interval >= 1");
}

bool LossScaler::back_off() {
  if (!enabled_ || scale_ <= 1.0f) return false;
  scale_ = std::fmax(1.0f, scale_ * options_.backoff_factor);
  good_steps_ = 0;
  return true;
}

void LossScaler::step_applied() {
  if (!enabled_) return;
  if (++good_steps_ < options_.growth_interval) return;
  good_steps_ = 0;
  const float grown = scale_ * options_.growth_factor;
  // Past f32's range the gradients would all overflow: keep the scale where it is.
  if (std::isfinite(grown)) scale_ = grown;
}

void LossScaler::restore(float scale, int64_t good_steps) {
  if (!enabled_) return;
  if (!(scale >= 1.0f) || !std::isfinite(scale) || good_steps < 0)
    throw std::invalid_argument("loss scale " + std::to_string(scale) + " with " + std::to_string(good_steps) +
                                " good steps is no scaler state");
  scale_ = scale;
  good_steps_ = good_steps;
}

}  // namespace sdp
