// LayerProfile: where a model's step spends its time, layer by layer. Each leaf layer's
// forward and backward (inside a residual block: each convolution, BatchNorm, the add and the
// ReLU on their own), the input's staging and the loss are bracketed by timed events of the
// model's stream (core/stream.hpp). On the CPU they read the steady clock; on a GPU they are
// CUDA events, so the times are the device's own and the step gains no synchronisation: the
// events are read in collect(), after the step.
//
// Attached through Context::profile (nn/context.hpp); null, the default, costs one pointer
// test per layer and pass: no event, no clock read. `sdp-train bench layers` prints its table.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "core/stream.hpp"

namespace sdp::nn {

enum class Pass { kForward = 0, kBackward = 1 };

class LayerProfile {
 public:
  explicit LayerProfile(Stream& stream) : stream_(stream) {}
  LayerProfile(const LayerProfile&) = delete;
  LayerProfile& operator=(const LayerProfile&) = delete;

  // One timed part of the model, in the order its forward first ran.
  struct Unit {
    std::string name;  // the layer's name ("layer1.0.conv1"), "input" or "loss"
    std::string kind;  // conv, batchnorm, relu, add, pool, linear, ..., input, loss
    // One sample per collected step that ran this pass; empty for a pass the unit does not
    // have (the input's backward, a block's input-gradient sum's forward).
    std::vector<double> forward_seconds, backward_seconds;
  };

  // Times the work queued between its construction and its destruction as `key`'s `pass`.
  class Scope {
   public:
    Scope(LayerProfile& profile, const void* key, const std::string& name, const char* kind, Pass pass);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TimedEvent& end_;
  };

  // Marks the start of a step: collect() then also places each pass in time, from here.
  void begin_step();
  // After a step: waits for its work, then appends each pass recorded since the last collect
  // to its unit's samples.
  void collect();
  // Units keep their addresses (a timeline holds their names' characters).
  const std::deque<Unit>& units() const { return units_; }

  // A pass the last collect() took: when it started after begin_step()'s mark (0 without one)
  // and how long it took, in the device's time.
  struct TimedPass {
    const Unit* unit;
    Pass pass;
    double start_seconds, seconds;
  };
  const std::vector<TimedPass>& last_step() const { return last_step_; }

 private:
  struct Marks {
    std::unique_ptr<TimedEvent> start, end;
    bool recorded = false;
  };
  std::size_t unit_index(const void* key, const std::string& name, const char* kind);

  Stream& stream_;
  std::unordered_map<const void*, std::size_t> index_;
  std::deque<Unit> units_;
  std::vector<Marks> marks_;  // two per unit: [2 i] forward, [2 i + 1] backward
  std::unique_ptr<TimedEvent> step_mark_;  // begin_step's; null until the first
  bool step_marked_ = false;
  std::vector<TimedPass> last_step_;
};

// work(), timed as `key`'s `pass` when `profile` is not null.
template <typename Work>
decltype(auto) timed(LayerProfile* profile, const void* key, const std::string& name, const char* kind, Pass pass,
                     Work&& work) {
  if (profile == nullptr) return work();
  LayerProfile::Scope scope(*profile, key, name, kind, pass);
  return work();
}

using ::sdp::median_seconds;  // core/clock.hpp

}  // namespace sdp::nn
