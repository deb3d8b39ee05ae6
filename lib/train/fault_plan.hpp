// Faults the end-to-end tests inject into a run, named by SDP_TEST_* variables. The
// environment is read once, when the trainer starts, into this plan for the rank; the step
// consults the plan and makes no system call. Unset variables inject nothing.
//
//   SDP_TEST_STALL_RANK=r [SDP_TEST_STALL_STEP=s]    rank r stops taking part at step s (at
//                                                    its first step when s is unset), so the
//                                                    other ranks' watchdogs must end the job
//   SDP_TEST_STALL_RANK=r SDP_TEST_STALL_IN=place   rank r stops taking part right before a
//                                                    collective outside the step instead:
//                                                    place = evaluation | checkpoint_broadcast
//                                                    | rows_exchange (a CTR model's step)
//   SDP_TEST_NAN_RANK=r SDP_TEST_NAN_STEP=s          rank r's input is NaN at step s: its loss
//                                                    and gradients are not finite there
//   SDP_TEST_OVERFLOW_RANK=r SDP_TEST_OVERFLOW_STEP=s  rank r scales its loss by 1e30 at step
//                                                    s, so its f16 gradients overflow there
// Steps are 0-based.
#pragma once

#include <cstdint>
#include <string>

namespace sdp {

class FaultPlan {
 public:
  FaultPlan() = default;  // no fault
  static FaultPlan from_environment(int rank);

  bool stalls_at(int64_t step) const { return stall_.fires_at(step); }
  bool nan_input_at(int64_t step) const { return nan_input_.fires_at(step); }
  bool loss_overflow_at(int64_t step) const { return loss_overflow_.fires_at(step); }
  // SDP_TEST_STALL_IN names `place` for this rank.
  bool stalls_in(const std::string& place) const { return !stall_place_.empty() && stall_place_ == place; }

  // What a stall fault does: says so, then never returns (the other ranks' watchdogs must end
  // the job).
  [[noreturn]] static void stall(int rank, const std::string& where);

 private:
  struct Trigger {
    bool armed = false;
    int64_t step = -1;  // -1: any step
    bool fires_at(int64_t s) const { return armed && (step < 0 || step == s); }
  };
  Trigger stall_, nan_input_, loss_overflow_;
  std::string stall_place_;
};

}  // namespace sdp
