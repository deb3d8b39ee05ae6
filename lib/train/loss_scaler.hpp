// LossScaler: dynamic loss scaling for fp16 mixed precision (Micikevicius et al., "Mixed
// Precision Training", 2018; the policy of PyTorch's GradScaler and Apex). Gradients below
// f16's smallest subnormal (6e-8) would flush to zero, so the loss's gradient is multiplied
// by a power of two S before backward and the f32 gradients are divided by S before the
// optimizer. S starts large; a step whose gradients overflow (inf/NaN) is skipped and S
// halves; after `growth_interval` clean steps in a row S doubles.
//
// The decision is made on the averaged gradients, which are bitwise the same on every rank
// after the AllReduce, so every rank skips the same steps and holds the same S with no extra
// communication. bf16 has f32's exponent range and f32 needs none: there the scaler is
// disabled and S stays 1.
#pragma once

#include <cstdint>

namespace sdp {

struct LossScalerOptions {
  float initial_scale = 65536.0f;  // 2^16, GradScaler's default
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(bool enabled, LossScalerOptions options = {});

  bool enabled() const { return enabled_; }
  // The factor backward's gradients carry now (1 when disabled).
  float scale() const { return scale_; }
  // Clean steps in a row since the scale last changed.
  int64_t good_steps() const { return good_steps_; }

  // The gradients overflowed at this scale. true: the step is skipped and the scale backs off.
  // false: the scaler cannot explain it (disabled, or the scale is already 1, where an
  // overflow is no artefact of scaling): the caller's non-finite policy decides.
  bool back_off();
  // A clean step was applied: the scale may grow.
  void step_applied();

  // Checkpoint state (a resumed run continues with the same scale and count).
  void restore(float scale, int64_t good_steps);

 private:
  bool enabled_;
  LossScalerOptions options_;
  float scale_;
  int64_t good_steps_ = 0;
};

}  // namespace sdp
