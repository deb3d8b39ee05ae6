#include "nn/layer_profile.hpp"

#include <algorithm>

namespace sdp::nn {

std::size_t LayerProfile::unit_index(const void* key, const std::string& name, const char* kind) {
  const auto [it, added] = index_.try_emplace(key, units_.size());
  if (added) {
    units_.push_back(Unit{name, kind, {}, {}});
    for (int pass = 0; pass < 2; ++pass)
      marks_.push_back(Marks{stream_.make_timed_event(), stream_.make_timed_event(), false});
  }
  return it->second;
}

LayerProfile::Scope::Scope(LayerProfile& profile, const void* key, const std::string& name, const char* kind,
                           Pass pass)
    : end_([&]() -> TimedEvent& {
        Marks& marks = profile.marks_[2 * profile.unit_index(key, name, kind) + static_cast<int>(pass)];
        marks.start->record();
        marks.recorded = true;
        return *marks.end;
      }()) {}

LayerProfile::Scope::~Scope() { end_.record(); }

void LayerProfile::begin_step() {
  if (!step_mark_) step_mark_ = stream_.make_timed_event();
  step_mark_->record();
  step_marked_ = true;
}

void LayerProfile::collect() {
  stream_.synchronize();
  last_step_.clear();
  for (std::size_t i = 0; i < units_.size(); ++i) {
    for (int pass = 0; pass < 2; ++pass) {
      Marks& marks = marks_[2 * i + pass];
      if (!marks.recorded) continue;
      const double seconds = marks.end->seconds_since(*marks.start);
      (pass == 0 ? units_[i].forward_seconds : units_[i].backward_seconds).push_back(seconds);
      const double start = step_marked_ ? marks.start->seconds_since(*step_mark_) : 0.0;
      last_step_.push_back(TimedPass{&units_[i], static_cast<Pass>(pass), start, seconds});
      marks.recorded = false;
    }
  }
  step_marked_ = false;
}

}  // namespace sdp::nn
