#include "train/fault_plan.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/log.hpp"

namespace sdp {

namespace {

// Armed when RANK_VAR names `rank`; the step from STEP_VAR (unset: any step, where allowed).
void read_trigger(const char* rank_var, const char* step_var, bool step_required, int rank, bool& armed,
                  int64_t& step) {
  const char* r = std::getenv(rank_var);
  const char* s = std::getenv(step_var);
  if (r == nullptr || std::atoi(r) != rank || (step_required && s == nullptr)) return;
  armed = true;
  step = s != nullptr ? std::atoll(s) : -1;
}

}  // namespace

FaultPlan FaultPlan::from_environment(int rank) {
  FaultPlan plan;
  const char* place = std::getenv("SDP_TEST_STALL_IN");
  if (place != nullptr && *place != '\0') {
    const char* r = std::getenv("SDP_TEST_STALL_RANK");
    if (r != nullptr && std::atoi(r) == rank) plan.stall_place_ = place;
  } else {
    read_trigger("SDP_TEST_STALL_RANK", "SDP_TEST_STALL_STEP", false, rank, plan.stall_.armed, plan.stall_.step);
  }
  read_trigger("SDP_TEST_NAN_RANK", "SDP_TEST_NAN_STEP", true, rank, plan.nan_input_.armed, plan.nan_input_.step);
  read_trigger("SDP_TEST_OVERFLOW_RANK", "SDP_TEST_OVERFLOW_STEP", true, rank, plan.loss_overflow_.armed,
               plan.loss_overflow_.step);
  return plan;
}

void FaultPlan::stall(int rank, const std::string& where) {
  log_warn("test hook SDP_TEST_STALL_RANK: rank " + std::to_string(rank) + " stops taking part " + where);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace sdp
