// optimizer.lr_scaling: how the learning rate grows with the global batch. optimizer.lr is
// stated for a reference global batch (optimizer.reference_batch; unset: data.batch_size, one
// rank's micro-batch); a job whose global batch (batch_size x ranks x accumulate_steps) is
// `ratio` times larger gets lr x multiplier(ratio) (Goyal et al. 2017 use linear). A value
// type of the job spec (parsed in choices.cpp); LrSchedule applies it.
#pragma once

#include <string>

namespace sdp {

struct LrScaling {
  enum class Kind { kNone, kLinear, kSqrt, kFactor };
  Kind kind = Kind::kLinear;
  double factor = 1.0;  // kFactor only: lr * factor, whatever the global batch

  static LrScaling none() { return {Kind::kNone, 1.0}; }
  static LrScaling linear() { return {Kind::kLinear, 1.0}; }
  static LrScaling sqrt() { return {Kind::kSqrt, 1.0}; }
  static LrScaling explicit_factor(double f) { return {Kind::kFactor, f}; }

  // batch_ratio: global batch / reference batch (the world size when the reference is one
  // rank's batch). linear: batch_ratio, sqrt: its square root, none: 1, factor: the factor.
  double multiplier(double batch_ratio) const;
  double scaled(double base_lr, double batch_ratio) const {
    return base_lr * multiplier(batch_ratio);
  }
  std::string str() const;  // for the plan: "linear", ..., "factor 1.5"

  bool operator==(const LrScaling& other) const {
    return kind == other.kind && (kind != Kind::kFactor || factor == other.factor);
  }
  bool operator!=(const LrScaling& other) const { return !(*this == other); }
};

}  // namespace sdp
