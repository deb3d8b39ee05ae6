// Checkpoints of a training run (docs/guides/failures.md): what one holds and how a run resumes.
//
// A checkpoint (io/checkpoint.hpp) holds the model's parameters and buffers under their layer
// names (as the final model: PyTorch-loadable), the optimizer state under "optimizer."
// ("optimizer.<param>.momentum_buffer", ...), on several ranks the other ranks' own BatchNorm
// running statistics under "ranks.<r>." (each rank keeps its own between evaluations; a
// resume on the same world size gives each its own back), and metadata: the step, the global sample
// cursor (epoch + offset in the epoch's global permutation: not per-rank positions, so a job
// resumes on any world size), the optimizer's update count, the LR schedule position, world
// size, accumulate_steps, global and reference batch, model name + parameter fingerprint, the
// resolved job spec, the version.
//
// Rank 0 alone writes: it copies the arenas (the only time the step loop waits) and a
// background thread writes the copy. Resume is collective: rank 0 reads the file and every
// rank receives the state from it over the world Communicator (nodes need not share a disk).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "data/loading/sampler.hpp"
#include "distributed/communicator.hpp"
#include "distributed/watchdog.hpp"
#include "distributed/world.hpp"
#include "io/checkpoint.hpp"
#include "nn/model.hpp"
#include "train/fault_plan.hpp"
#include "train/loss_scaler.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer.hpp"

namespace sdp {

// Where a run stands between two steps.
struct TrainPosition {
  int64_t step = 0;     // steps done
  SampleCursor cursor;  // the first sample of the next step
};

// What the step loop needs to know about the run it continues.
struct ResumePoint {
  TrainPosition position;
  std::string path;
  int64_t checkpoint_step = 0;
};

// The job's state as a checkpoint holds it, arena by arena: parameters, buffers, optimizer
// state (live views, under their checkpoint names).
std::vector<ArenaViews> state_groups(const nn::Model& model, const Optimizer& optimizer);

class Checkpointer {
 public:
  // `scaler` (may be null): mixed precision's loss scale, saved and restored with the state.
  Checkpointer(const JobSpec& spec, const World& world, nn::Model& model, Optimizer& optimizer,
               LossScaler* scaler = nullptr);

  // Collective (every rank's buffers go to rank 0 over `comm`). Rank 0 snapshots the state
  // now and writes it on the background thread (`wait`: returns once it is on disk); a failed
  // earlier write throws here, on rank 0.
  void save(const TrainPosition& at, const LrSchedule& schedule, int64_t steps_per_epoch,
            int64_t total_steps, bool wait, Communicator& comm);
  // Rank 0: until every write is on disk; rethrows a failed write (RuntimeError).
  void wait();
  // Step-loop time spent in save() so far (snapshot copies, waiting for an earlier write).
  double blocked_seconds() const { return blocked_seconds_; }
  int64_t last_saved_step() const { return last_saved_step_; }
  // The checkpoint of `step` is already on disk (the one just resumed from).
  void note_on_disk(int64_t step) { last_saved_step_ = step; }
  std::string last_path() const;

  // Collective, before the first step, after every rank built the same model. Chooses the
  // checkpoint checkpoint.resume names (auto: the newest complete one in checkpoint.dir,
  // skipping unreadable ones with a warning), restores parameters, buffers and optimizer
  // state on every rank (rank 0 reads, `comm` carries it) and returns where to continue.
  // `steps_per_epoch` and `schedule`: this run's (they change with the global batch: world
  // size, accumulate_steps). No checkpoint: nullopt. Another model or optimizer: InputError on
  // every rank (exit 2).
  std::optional<ResumePoint> resume(Communicator& comm, int64_t steps_per_epoch,
                                    const LrSchedule& schedule);
  // Collective, after rank 0's parameters and buffers were broadcast: on the checkpoint's world
  // size, gives every rank its own saved buffers back (else nothing to do).
  void restore_rank_buffers(Communicator& comm);

  // From now on resume's and restore_rank_buffers' collectives run under `watch`; `faults`
  // (the e2e tests' SDP_TEST_STALL_IN=checkpoint_broadcast) may stall this rank before one.
  void set_watch(Watchdog* watch, const FaultPlan* faults) {
    watch_ = watch;
    faults_ = faults;
  }

 private:
  const JobSpec& spec_;
  const World& world_;
  nn::Model& model_;
  Optimizer& optimizer_;
  LossScaler* scaler_;
  // Rank 0 at resume: keeps the other ranks' saved buffers for restore_rank_buffers().
  bool stash_rank_buffers(const Checkpoint& c);
  // Rank 0 at resume: finds and reads the checkpoint, restores its own state from it, notes
  // the keys of its job spec this job changed (spec_changes_), and returns the metadata the
  // other ranks need as JSON ("" when there is none to resume).
  std::string read_on_rank0();
  // Where the run continues, re-derived for this run's global batch, and rank 0's line saying so.
  ResumePoint resume_point(const std::map<std::string, std::string>& meta, int64_t steps_per_epoch,
                           const LrSchedule& schedule) const;

  Watchdog* watch_ = nullptr;
  const FaultPlan* faults_ = nullptr;

  std::unique_ptr<CheckpointWriter> writer_;  // rank 0 only
  // Rank 0: host copies of the arenas, kept between checkpoints (see add_to_snapshot):
  // one model's parameters, buffers and optimizer state of host memory for the whole run.
  std::vector<Tensor> copies_;
  // Every rank's buffer arena, rank after rank (rank 0 fills it at resume; empty if unused).
  Tensor rank_buffers_;
  bool rank_buffers_pending_ = false;
  // Rank 0 at resume: "resume: key 'optimizer.lr' was 0.1 in the checkpoint, now 0.2", one per key.
  std::vector<std::string> spec_changes_;
  double blocked_seconds_ = 0;
  int64_t last_saved_step_ = -1;
};

}  // namespace sdp
