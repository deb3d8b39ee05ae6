// DataParallel: what makes one replica part of a synchronous data-parallel job — the
// PyTorch DDP / Horovod equivalent (docs/architecture.md, "Communicators").
// Gradient averaging over the ranks: on the CPU the gradient arena lives in node-shared
// memory so ranks of a node reduce from each other's buffers (on a GPU, in device memory,
// reduced over NCCL); buckets (slices of the arena,
// in reverse layer order) start their AllReduce on the communication thread as soon as
// backward has produced them; a watchdog reports and ends collectives that never finish.
//
// Gradient accumulation (train.accumulate_steps = k, gradient_accumulator.hpp): k forward and
// backward passes per step, their gradients summed in a second arena and averaged; only the
// last micro-batch's backward hands gradients to the reducer, so the ranks communicate once
// per step, overlapped with that backward.
//
// Contract for the training loop, once per step: begin_step(step), then for each micro-batch
// m = 0 .. k-1: begin_micro_batch(m), forward, backward (the model's grad-ready hook feeds the
// accumulator and the reducer); then finish_step(), after which every gradient holds the mean
// over the micro-batches and the ranks; check_replicas(step) after the update.
// With one rank and k = 1 it does nothing and costs nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/job_spec.hpp"
#include "core/tensor.hpp"
#include "distributed/world.hpp"
#include "nn/model.hpp"

namespace sdp {

class GradReadyEvents;
class GradientAccumulator;
class GradientReducer;
class SharedArena;
class Timeline;
class Watchdog;

class DataParallel {
 public:
  // `accumulate_steps`: micro-batches per step (train.accumulate_steps). `timeline`
  // (optional, must outlive this): each bucket's AllReduce is recorded on its comm track.
  DataParallel(nn::Model& model, const DistributedSpec& spec, const World& world,
               int accumulate_steps = 1, Timeline* timeline = nullptr);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  void begin_step(int64_t step);
  // Before micro-batch `micro`'s forward (0 .. accumulate_steps - 1).
  void begin_micro_batch(int micro);
  // Until this returns the communication thread owns MPI (MPI_THREAD_SERIALIZED).
  void finish_step();
  // Communication not hidden behind backward in the last step.
  double exposed_comm_seconds() const;
  // Gradient buckets reduced per step (0 with one rank).
  int bucket_count() const;
  // distributed.check_every_steps: replicas must hold bitwise equal parameters.
  void check_replicas(int64_t step);

 private:
  const World& world_;
  int64_t check_every_;
  Tensor params_;
  std::vector<char> host_params_;  // a GPU replica's parameters, copied for the replica check
  std::shared_ptr<SharedArena> shared_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<GradReadyEvents> grad_events_;  // before reducer_: it waits on them
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<GradientAccumulator> accumulator_;
};

}  // namespace sdp
