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
//
// Stream-ordered buckets (distributed.stream_ordered: on, GPU gradients over NCCL alone, one
// micro-batch a step): the training thread starts each bucket as backward reports its last
// gradient, ordered after it on the GPU's streams (GradientReducer::order_on_device), and
// join_on_device(), queued after backward (recordable), orders the compute stream after them.
// No host wait inside the step: a step's CUDA graph holds its collectives, and finish_step()
// waits once for the step's end, through the watchdog, asking NCCL at each poll whether a peer
// failed (no bucket is named then: they are one piece of device work).
//
// The step's agreement (the mean loss, and whether any rank asked to stop) rides in the last
// bucket where it can: a host job without wire compression keeps a few floats in front of
// its gradient arena, inside the last bucket's slice, so the ranks agree on them without a
// collective of their own (one latency-bound round trip per step fewer; on 2 ms links, 2 x
// log2(nodes) one-way latencies). The training loop writes them after the last forward
// (set_step_agreement) and reads the means after finish_step (step_agreement). Elsewhere
// (GPU jobs, whose loss is read at the step's end, and 16-bit wires, which would round the
// loss) carries_step_agreement() is false and the loop agrees over MPI as before.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/job_spec.hpp"
#include "core/tensor.hpp"
#include "distributed/communicator.hpp"
#include "distributed/world.hpp"
#include "nn/model.hpp"

namespace sdp {

class GradReadyEvents;
class NcclCommunicator;
class GradientAccumulator;
class GradientReducer;
class SharedArena;
class Timeline;
class Watchdog;

// Whether a job's last gradient bucket carries the step's agreement (see above): host
// gradients without wire compression (`compression` resolved).
bool step_agreement_in_last_bucket(const Device& device, Compression compression);

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
  // distributed.stream_ordered (see the header): whether this job's buckets are, and why not
  // where asked (empty when they are or were not asked).
  bool stream_ordered() const { return stream_ordered_; }
  const std::string& stream_order_obstacle() const { return stream_order_obstacle_; }
  // Stream-ordered: after the last micro-batch's backward, the compute stream waits for every
  // bucket (device work only; a recording holds it).
  void join_on_device();
  // Stream-ordered: a recording that failed midway; the step is launched again from its start.
  void abandon_step();
  // Communication not hidden behind backward in the last step.
  double exposed_comm_seconds() const;
  // Gradient buckets reduced per step (0 with one rank).
  int bucket_count() const;
  // Bytes the buckets reduce per step: the gradients, and the agreement where carried (one
  // rank: the gradients' bytes, though nothing is reduced).
  int64_t reduced_bytes() const { return reduced_bytes_; }
  // Whether the last bucket carries the step's agreement (see the header).
  bool carries_step_agreement() const { return agreement_.data != nullptr; }
  // Before the last micro-batch's backward: this rank's loss (mean over its micro-batches)
  // and its stop request.
  void set_step_agreement(double loss, bool stop);
  // After finish_step: the mean loss over the ranks (NaN if any rank's was not finite) and
  // whether any rank asked to stop.
  struct StepAgreement {
    double mean_loss = 0;
    bool stop = false;
  };
  StepAgreement step_agreement() const;
  // distributed.check_every_steps: replicas must hold bitwise equal parameters.
  void check_replicas(int64_t step);

 private:
  // The agreement's floats in the shared arena; logic_error where the job agrees over MPI.
  float* agreement_head() const;

  const World& world_;
  int64_t check_every_;
  Tensor params_;
  std::vector<char> host_params_;  // a GPU replica's parameters, copied for the replica check
  std::shared_ptr<SharedArena> shared_;
  int64_t reduced_bytes_ = 0;
  CommBuffer agreement_;  // in front of the gradients, in the last bucket; empty: none
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<GradReadyEvents> grad_events_;  // before reducer_: it waits on them
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<GradientAccumulator> accumulator_;
  bool stream_ordered_ = false;
  std::string stream_order_obstacle_;
  Stream* compute_ = nullptr;  // the model's stream
  int64_t step_ = 0;
  std::vector<std::weak_ptr<NcclCommunicator>> nccl_;  // polled for failures at the step's end
};

}  // namespace sdp
