// optimizer.lr_scaling: how the single-rank learning rate grows with the number of ranks. The
// global batch is world * batch_size, so the LR is scaled with it (Goyal et al. 2017 use
// linear). A value type of the job spec (parsed in choices.cpp); LrSchedule applies it.
#pragma once

#include <string>

namespace sdp {

struct LrScaling {
  enum class Kind { kNone, kLinear, kSqrt, kFactor };
  Kind kind = Kind::kLinear;
  double factor = 1.0;  // kFactor only: lr * factor, whatever the world size

  static LrScaling none() { return {Kind::kNone, 1.0}; }
  static LrScaling linear() { return {Kind::kLinear, 1.0}; }
  static LrScaling sqrt() { return {Kind::kSqrt, 1.0}; }
  static LrScaling explicit_factor(double f) { return {Kind::kFactor, f}; }

  double multiplier(int world_size) const;
  double scaled(double base_lr, int world_size) const { return base_lr * multiplier(world_size); }
  std::string str() const;  // for the plan: "linear", ..., "factor 1.5"

  bool operator==(const LrScaling& other) const {
    return kind == other.kind && (kind != Kind::kFactor || factor == other.factor);
  }
  bool operator!=(const LrScaling& other) const { return !(*this == other); }
};

}  // namespace sdp
