#include "train/data_parallel.hpp"

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "distributed/agreement.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/grad_ready.hpp"
#include "distributed/nccl_communicator.hpp"
#include "distributed/gradient_reducer.hpp"
#include "distributed/replica_check.hpp"
#include "distributed/shared_arena.hpp"
#include "distributed/watchdog.hpp"
#include "obs/timeline.hpp"
#include "train/gradient_accumulator.hpp"

namespace sdp {

namespace {

// The step's agreement in front of a host job's gradients: 16 floats (2 used), so the
// gradients keep the 64-byte alignment the kernels' vector loads want.
constexpr int64_t kAgreementElements = 16;

// Stream-ordered: the step's device work, complete with an event after it. A replayed graph's
// collectives have no Work of their own, so each poll also asks NCCL whether a peer failed: a
// lost rank ends the job as a bucket's Work would, not at the watchdog's timeout.
class DeviceStepWork final : public Work {
 public:
  DeviceStepWork(std::shared_ptr<Work> done, const std::vector<std::weak_ptr<NcclCommunicator>>& comms)
      : done_(std::move(done)), comms_(comms) {}
  void wait() override {
    while (!wait(std::chrono::milliseconds(100))) {
    }
  }
  bool wait(std::chrono::nanoseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!test()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
  }
  bool test() override {
    for (const auto& weak : comms_)
      if (auto comm = weak.lock()) comm->check_health("the step's gradient buckets (distributed.stream_ordered)");
    return done_->test();
  }

 private:
  std::shared_ptr<Work> done_;
  const std::vector<std::weak_ptr<NcclCommunicator>>& comms_;
};

}  // namespace

bool step_agreement_in_last_bucket(const Device& device, Compression compression) {
  return device.is_cpu() && compression == Compression::kNone;  // a 16-bit wire would round the loss
}

// Why a job's buckets cannot be stream-ordered (distributed.stream_ordered: on), or empty.
static std::string why_not_stream_ordered(const DistributedSpec& spec, const Device& device, int accumulate_steps,
                                          const Timeline* timeline,
                                          const std::vector<std::weak_ptr<Communicator>>& comms) {
  if (!device.is_cuda()) return "the gradients are reduced in host memory";
  if (accumulate_steps > 1) return "train.accumulate_steps sums the micro-batches' gradients as backward makes them";
  if (spec.allreduce == AllreduceKind::kRing) return "distributed.allreduce: ring runs its steps from the host";
  if (timeline != nullptr) return "output.timeline times each bucket from the host";
  for (const auto& weak : comms)
    if (auto comm = weak.lock(); comm && !std::dynamic_pointer_cast<NcclCommunicator>(comm))
      return "a collective over " + comm->name() + " (host memory), not NCCL";
  return "";
}

DataParallel::DataParallel(nn::Model& model, const DistributedSpec& spec, const World& world,
                           int accumulate_steps, Timeline* timeline)
    : world_(world), check_every_(spec.check_every_steps) {
  ParameterStore& store = model.store();
  const Device device = store.device();
  Stream& stream = *model.context().stream;
  reduced_bytes_ = static_cast<int64_t>(store.grad_arena().nbytes());
  if (world.size() > 1) {
    // Host gradients live in node-shared memory (the node phase reads its peers' directly);
    // GPU gradients stay in device memory, and NCCL moves them.
    std::shared_ptr<SharedArena> shared;
    CommBuffer reduced = CommBuffer::of(store.grad_arena());
    std::vector<ParamExtent> extents = param_extents(store);
    if (device.is_cpu()) {
      const bool agree_in_bucket = step_agreement_in_last_bucket(device, spec.compression);
      const int64_t head = agree_in_bucket ? kAgreementElements : 0;
      shared = SharedArena::create(world.intra(), head * static_cast<int64_t>(sizeof(float)) + reduced.nbytes());
      float* window = static_cast<float*>(shared->data());
      store.rebind_grad_arena(shared->owner(), window + head);
      // The reducer sees the head and the gradients as one buffer: plan_buckets' last bucket
      // starts at its offset 0, so the head travels with the first layers' gradients.
      reduced = CommBuffer::host(window, head + store.grad_arena().numel());
      for (ParamExtent& e : extents) e.offset += head;
      if (agree_in_bucket) agreement_ = reduced.slice(0, 2);
    }
    std::vector<std::weak_ptr<Communicator>> communicators;
    std::shared_ptr<AllreduceAlgorithm> algorithm = make_allreduce(
        world, {spec.allreduce, spec.compression, shared, spec.backend, device, spec.inter_node, &communicators});
    // A bucket past distributed.timeout_s ends the job (exit 3); NCCL's communicators are
    // aborted first, which stops their kernels and frees the thread waiting on them.
    std::vector<std::weak_ptr<NcclCommunicator>> nccl;
    for (const auto& weak : communicators)
      if (auto comm = std::dynamic_pointer_cast<NcclCommunicator>(weak.lock())) nccl.push_back(comm);
    if (spec.stream_ordered == "on") {
      stream_order_obstacle_ = why_not_stream_ordered(spec, device, accumulate_steps, timeline, communicators);
      stream_ordered_ = stream_order_obstacle_.empty();
      nccl_ = nccl;
      compute_ = &stream;
    }
    Watchdog::Handler on_timeout;  // empty: abort_on_timeout
    if (!nccl.empty())
      on_timeout = abort_nccl_then(std::move(nccl), [timeout_s = spec.timeout_s](const StallReport& report) {
        abort_on_timeout(report, timeout_s);
      });
    watchdog_ = std::make_unique<Watchdog>(WatchdogOptions{spec.stall_warning_s, spec.timeout_s}, world.rank(),
                                           ProgressBoard::create(world), Watchdog::Handler{}, std::move(on_timeout));
    GradientReducerOptions options;
    options.bucket_mb = spec.bucket_mb;
    if (timeline)
      options.on_bucket_reduced = [timeline](const BucketReduction& r) {
        timeline->record(TraceTrack::kComm, "allreduce", r.start, r.end, r.step, r.bytes, r.bucket);
      };
    reduced_bytes_ = reduced.nbytes();
    reducer_ = std::make_unique<GradientReducer>(reduced, std::move(extents), algorithm, options, watchdog_.get());
    if (stream_ordered_) reducer_->order_on_device(stream);
    grad_events_ = std::make_unique<GradReadyEvents>(stream, static_cast<int>(store.params().size()));
    params_ = store.param_arena();
    shared_ = std::move(shared);
  }
  if (accumulate_steps > 1)
    accumulator_ = std::make_unique<GradientAccumulator>(store, accumulate_steps, &stream);
  if (!reducer_ && !accumulator_) return;
  std::unordered_map<const Param*, int> index;
  for (const Param& p : store.params()) index.emplace(&p, static_cast<int>(index.size()));
  model.set_grad_ready_hook(
      [this, index = std::move(index)](const Param& p) {
        // Before the last micro-batch a gradient only joins the sum: nothing to communicate yet.
        if (accumulator_ && !accumulator_->add(p)) return;
        if (!reducer_) return;
        const int i = index.at(&p);
        // On a GPU the gradient is only enqueued: its event orders the bucket's collective after
        // it (stream-ordered: the compute stream's position when the bucket starts does).
        reducer_->on_grad_ready(i, stream_ordered_ ? nullptr : grad_events_->record(i));
      },
      /*recordable=*/stream_ordered_);
}

DataParallel::~DataParallel() {
  reducer_.reset();  // joins the communication thread before the window goes away
  watchdog_.reset();
}

void DataParallel::begin_step(int64_t step) {
  step_ = step;
  if (reducer_) reducer_->begin_step(step);
}

void DataParallel::join_on_device() {
  if (!stream_ordered_) throw std::logic_error("DataParallel::join_on_device: the buckets are not stream-ordered");
  reducer_->join_on_device();
}

void DataParallel::abandon_step() {
  if (stream_ordered_) reducer_->abandon_step();
}

void DataParallel::begin_micro_batch(int micro) {
  if (accumulator_) accumulator_->begin_micro_batch(micro);
}

void DataParallel::finish_step() {
  if (stream_ordered_) {
    // The step's one host wait, watched: its end (the buckets, the update after them).
    DeviceStepWork work(work_after(*compute_), nccl_);
    watchdog_->wait(work, watchdog_->issue(step_, -1, "the step's gradient buckets (distributed.stream_ordered)"));
    return;
  }
  if (reducer_) reducer_->wait_all();
  if (accumulator_) accumulator_->check_complete();
}

double DataParallel::exposed_comm_seconds() const {
  return reducer_ ? reducer_->last_step().exposed_s : 0.0;
}

int DataParallel::bucket_count() const {
  return reducer_ ? static_cast<int>(reducer_->buckets().size()) : 0;
}

float* DataParallel::agreement_head() const {
  if (agreement_.data == nullptr) throw std::logic_error("DataParallel: this job agrees over MPI, not in its last bucket");
  return static_cast<float*>(agreement_.data);
}

void DataParallel::set_step_agreement(double loss, bool stop) {
  float* head = agreement_head();
  head[0] = static_cast<float>(loss);
  head[1] = stop ? 1.0f : 0.0f;
}

DataParallel::StepAgreement DataParallel::step_agreement() const {
  const float* head = agreement_head();
  // Averaged like the gradients: a NaN anywhere stays NaN, and a stop flag of 1 from any
  // rank leaves a mean above zero.
  return {static_cast<double>(head[0]), head[1] > 0.0f};
}

void DataParallel::check_replicas(int64_t step) {
  if (!reducer_ || check_every_ <= 0 || step % check_every_ != 0) return;
  const void* params = params_.raw();
  if (!params_.device().is_cpu()) {  // compared on the host (the copy waits for the device)
    host_params_.resize(params_.nbytes());
    copy_bytes(Device::cpu(), host_params_.data(), params_.device(), params_.raw(), params_.nbytes());
    params = host_params_.data();
  }
  std::vector<int> drifted = sdp::check_replicas(world_.comm(), params, params_.nbytes());
  if (drifted.empty()) return;
  std::string ranks;
  for (int r : drifted) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  throw CollectiveFailure(ExitCode::kRuntime,
                          "step " + std::to_string(step) + ": the parameters of rank(s) " + ranks +
                              " differ from rank 0's: the replicas drifted apart",
                          world_.rank() == 0);
}

}  // namespace sdp
