#include "train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <thread>
#include <unordered_map>

#include "config/job_spec_loader.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/cifar10.hpp"
#include "data/data_loader.hpp"
#include "data/mnist.hpp"
#include "data/synthetic.hpp"
#include "distributed/agreement.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/collectives.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/gradient_reducer.hpp"
#include "distributed/replica_check.hpp"
#include "distributed/shared_arena.hpp"
#include "distributed/watchdog.hpp"
#include "io/safetensors.hpp"
#include "models/registry.hpp"
#include "nn/threads.hpp"
#include "obs/metrics.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer_factory.hpp"

namespace sdp {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct DataSplits {
  Dataset train, test;
};

DataSplits load_data(const JobSpec& spec) {
  const DataSpec& d = spec.data;
  if (d.format == "mnist") return {load_mnist(d.train, Split::kTrain), load_mnist(d.test, Split::kTest)};
  if (d.format == "cifar10") return {load_cifar10(d.train, Split::kTrain), load_cifar10(d.test, Split::kTest)};
  SyntheticSpec s;
  s.channels = d.synthetic.channels;
  s.height = d.synthetic.height;
  s.width = d.synthetic.width;
  s.num_classes = spec.model.num_classes;
  s.seed = spec.seed;
  s.noise = d.synthetic.noise;
  s.count = d.synthetic.train_samples;
  Dataset train = make_synthetic(s, Split::kTrain);
  s.count = d.synthetic.test_samples;
  return {std::move(train), make_synthetic(s, Split::kTest)};
}

std::unique_ptr<nn::Model> build_model(const JobSpec& spec, const Dataset& data) {
  if (data.num_classes > spec.model.num_classes)
    throw InputError("key 'model.num_classes' is " + std::to_string(spec.model.num_classes) + " but the " +
                     data.name + " data has " + std::to_string(data.num_classes) + " classes");
  models::ModelOptions options;
  options.name = spec.model.name;
  options.num_classes = spec.model.num_classes;
  options.in_channels = data.channels;
  options.height = data.height;
  options.width = data.width;
  options.hidden = spec.model.hidden;
  options.dropout = static_cast<float>(spec.model.dropout);
  options.seed = spec.seed;
  return models::make_model(options);
}

OptimizerOptions optimizer_options(const OptimizerSpec& o) {
  OptimizerOptions options;
  options.name = o.name;
  options.momentum = static_cast<float>(o.momentum);
  options.nesterov = o.nesterov;
  options.beta1 = static_cast<float>(o.beta1);
  options.beta2 = static_cast<float>(o.beta2);
  options.eps = static_cast<float>(o.eps);
  options.weight_decay = static_cast<float>(o.weight_decay);
  return options;
}

LrSchedule make_schedule(const OptimizerSpec& o, int world_size, int64_t steps_per_epoch, int64_t total_steps) {
  LrScheduleOptions options;
  options.base_lr = o.lr;
  options.scaling = LrScaling::parse(o.lr_scaling);
  options.world_size = world_size;
  options.warmup_steps = std::llround(o.warmup_epochs * static_cast<double>(steps_per_epoch));
  options.kind = LrScheduleOptions::parse_kind(o.schedule);
  options.milestones.assign(o.milestones.begin(), o.milestones.end());
  options.gamma = o.gamma;
  options.min_lr = o.min_lr;
  options.steps_per_epoch = steps_per_epoch;
  options.total_steps = total_steps;
  return LrSchedule(options);
}

struct EvalResult {
  double loss = 0, accuracy = 0;
};

EvalResult evaluate(nn::Model& model, const Dataset& test, const JobSpec& spec, const World& world,
                    Communicator& comm) {
  // BatchNorm running statistics were gathered from each rank's own batches; their mean
  // is what the global model has seen, and it keeps the replicas identical.
  comm.allreduce(CommBuffer::of(model.store().buffer_arena()), {ReduceOp::kAvg})->wait();

  EvalLoader loader(test, spec.data.batch_size, world.rank(), world.size(), spec.data.prefetch);
  loader.start();
  double totals[3] = {0, 0, 0};  // loss sum, correct, samples
  while (const Batch* batch = loader.next()) {
    int64_t correct = 0;
    float loss = model.forward(batch->images, batch->labels.data(), /*training=*/false, &correct);
    totals[0] += static_cast<double>(loss) * batch->size();
    totals[1] += static_cast<double>(correct);
    totals[2] += static_cast<double>(batch->size());
  }
  allreduce_sum(world.comm(), totals, 3);
  return {totals[0] / totals[2], totals[1] / totals[2]};
}

void save_model(const nn::Model& model, const JobSpec& spec, const World& world, const TrainResult& result,
                int64_t epoch) {
  std::vector<NamedTensor> tensors;
  for (const Param& p : model.store().params()) tensors.push_back({p.name, p.value});
  for (const Buffer& b : model.store().buffers()) tensors.push_back({b.name, b.value});
  Shape input = model.input_shape();
  std::map<std::string, std::string> metadata = {
      {"format", "sdp-train model"},
      {"model", spec.model.name},
      {"num_classes", std::to_string(model.num_classes())},
      {"input_shape", shape_str(input)},
      {"step", std::to_string(result.steps)},
      {"epoch", std::to_string(epoch)},
      {"world_size", std::to_string(world.size())},
      {"test_accuracy", std::to_string(result.test_accuracy)},
      {"job_spec", job_spec_to_yaml(spec)},
  };
  save_safetensors((std::filesystem::path(spec.output.model_dir) / "model.safetensors").string(), tensors,
                   metadata);
}

// Gradient averaging over the ranks (DESIGN.md §5): the gradient arena lives in node-shared
// memory so ranks of a node reduce from each other's buffers; buckets (slices of the arena,
// in reverse layer order) start their AllReduce on the communication thread as soon as
// backward has produced them; a watchdog reports and ends collectives that never finish.
class DataParallel {
 public:
  DataParallel(nn::Model& model, const DistributedSpec& spec, const World& world)
      : world_(world), check_every_(spec.check_every_steps) {
    if (world.size() == 1) return;
    ParameterStore& store = model.store();
    auto shared = SharedArena::create(world.intra(), static_cast<int64_t>(store.grad_arena().nbytes()));
    store.rebind_grad_arena(shared->owner(), shared->data());
    std::shared_ptr<AllreduceAlgorithm> algorithm = make_allreduce(world, {spec.allreduce, spec.compression, shared});
    watchdog_ = std::make_unique<Watchdog>(WatchdogOptions{spec.stall_warning_s, spec.timeout_s}, world.rank(),
                                           ProgressBoard::create(world));
    GradientReducerOptions options;
    options.bucket_mb = spec.bucket_mb;
    Tensor grads = store.grad_arena();
    reducer_ = std::make_unique<GradientReducer>(CommBuffer::host(grads.data<float>(), grads.numel()),
                                                 param_extents(store), algorithm, options, watchdog_.get());
    std::unordered_map<const Param*, int> index;
    for (const Param& p : store.params()) index.emplace(&p, static_cast<int>(index.size()));
    model.set_grad_ready_hook([this, index = std::move(index)](const Param& p) {
      reducer_->on_grad_ready(index.at(&p));
    });
    params_ = store.param_arena();
    shared_ = std::move(shared);
  }
  ~DataParallel() {
    reducer_.reset();  // joins the communication thread before the window goes away
    watchdog_.reset();
  }

  void begin_step(int64_t step) {
    if (reducer_) reducer_->begin_step(step);
  }
  // Until this returns the communication thread owns MPI (MPI_THREAD_SERIALIZED).
  void finish_step() {
    if (reducer_) reducer_->wait_all();
  }
  double exposed_comm_seconds() const { return reducer_ ? reducer_->last_step().exposed_s : 0.0; }

  // distributed.check_every_steps: replicas must hold bitwise equal parameters.
  void check_replicas(int64_t step) {
    if (!reducer_ || check_every_ <= 0 || step % check_every_ != 0) return;
    std::vector<int> drifted = sdp::check_replicas(world_.comm(), params_.raw(), params_.nbytes());
    if (drifted.empty()) return;
    std::string ranks;
    for (int r : drifted) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    throw CollectiveFailure(ExitCode::kRuntime,
                            "step " + std::to_string(step) + ": the parameters of rank(s) " + ranks +
                                " differ from rank 0's: the replicas drifted apart",
                            world_.rank() == 0);
  }

 private:
  const World& world_;
  int64_t check_every_;
  Tensor params_;
  std::shared_ptr<SharedArena> shared_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<GradientReducer> reducer_;
};

// Keys the spec accepts whose feature has not landed yet: refuse them loudly rather than
// train differently from what the user asked for.
void reject_unimplemented(const JobSpec& spec, const World& world) {
  run_on_all_ranks(world.comm(), [&] {
    auto refuse = [](const std::string& key, const std::string& value) {
      throw InputError("key '" + key + "': " + value + " is not implemented in this version of sdp-train");
    };
    if (spec.device == "cuda") refuse("device", "cuda training");
    if (spec.data.shard != "rank") refuse("data.shard", spec.data.shard);
    if (spec.distributed.backend == "nccl") refuse("distributed.backend", "nccl");
    if (!spec.output.timeline.empty()) refuse("output.timeline", "a timeline");
  });
}

}  // namespace

TrainResult train(JobSetup& setup) {
  const JobSpec& spec = setup.spec;
  const World& world = *setup.world;
  nn::set_num_threads(setup.device.threads);
  reject_unimplemented(spec, world);

  DataSplits data;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<TrainLoader> loader;
  run_on_all_ranks(world.comm(), [&] {
    data = load_data(spec);
    model = build_model(spec, data.train);
    optimizer = make_optimizer(optimizer_options(spec.optimizer), model->store());
    LoaderOptions loader_options;
    loader_options.batch_size = spec.data.batch_size;
    loader_options.seed = spec.seed;
    loader_options.rank = world.rank();
    loader_options.world = world.size();
    loader_options.prefetch = spec.data.prefetch;
    loader_options.augment.enabled =
        spec.data.augment == "crop-flip" || (spec.data.augment == "auto" && spec.data.format == "cifar10");
    if (data.train.count < static_cast<int64_t>(spec.data.batch_size) * world.size())
      throw InputError("key 'data.batch_size': " + std::to_string(spec.data.batch_size) + " x " +
                       std::to_string(world.size()) + " rank(s) is more than the " +
                       std::to_string(data.train.count) + " training samples: not one step per epoch");
    loader = std::make_unique<TrainLoader>(data.train, loader_options);
  });
  const int64_t steps_per_epoch = loader->steps_per_epoch();
  if (int r = first_rank_differing(world.comm(), static_cast<uint64_t>(steps_per_epoch)); r >= 0)
    run_on_all_ranks(world.comm(), [&] {
      throw InputError("rank " + std::to_string(r) + " computed a different number of steps per epoch than "
                       "rank 0 (" + std::to_string(steps_per_epoch) + "): all ranks must read the same data");
    });

  // Every rank must have built the same model, or the gradient mean mixes unrelated
  // tensors; then all start from rank 0's weights (and buffers).
  ParameterStore& store = model->store();
  if (int r = first_rank_differing(world.comm(), store.fingerprint()); r >= 0)
    run_on_all_ranks(world.comm(), [&] {
      throw InputError("rank " + std::to_string(r) + " built a different model than rank 0 "
                       "(parameter names or shapes differ); all ranks must run the same job spec");
    });
  // Model state moves over a Communicator (the gradients' backend), not the control plane.
  const std::shared_ptr<Communicator> world_comm = make_communicator(CommBackend::kMpi, world.comm());
  world_comm->broadcast(CommBuffer::of(store.param_arena()), {0})->wait();
  world_comm->broadcast(CommBuffer::of(store.buffer_arena()), {0})->wait();
  DataParallel parallel(*model, spec.distributed, world);

  int64_t total_steps = steps_per_epoch * spec.train.epochs;
  if (spec.train.max_steps > 0 && (total_steps == 0 || spec.train.max_steps < total_steps))
    total_steps = spec.train.max_steps;
  const int64_t epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  const LrSchedule schedule = make_schedule(spec.optimizer, world.size(), steps_per_epoch, total_steps);

  MetricsLog metrics(world.rank() == 0, spec.output.metrics);
  const int64_t global_batch = static_cast<int64_t>(spec.data.batch_size) * world.size();
  metrics.emit("start", "start",
               {{"world_size", world.size()},
                {"batch_per_rank", spec.data.batch_size},
                {"global_batch", static_cast<double>(global_batch)},
                {"base_lr", spec.optimizer.lr},
                {"peak_lr", schedule.peak_lr()},
                {"steps_per_epoch", static_cast<double>(steps_per_epoch)},
                {"total_steps", static_cast<double>(total_steps)},
                {"parameters", static_cast<double>(store.num_parameters())}});

  TrainResult result;
  int64_t step = 0, window_steps = 0;
  double window_loss = 0, window_seconds = 0, window_exposed_comm = 0;
  bool evaluated_last = false;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    loader->start(SampleCursor{epoch, 0}, std::min(steps_per_epoch, total_steps - step));
    while (const Batch* batch = loader->next()) {
      const auto step_start = Clock::now();
      const double lr = schedule.lr_at(step);
      if (test_stall_requested(world.rank(), step)) {
        log_warn("test hook SDP_TEST_STALL_RANK: rank " + std::to_string(world.rank()) + " stops taking part at step " +
                 std::to_string(step));
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      parallel.begin_step(step);
      float loss = model->forward(batch->images, batch->labels.data(), /*training=*/true);
      model->backward();
      parallel.finish_step();  // every gradient bucket averaged over the ranks
      // Every rank learns whether any rank's loss went bad, so all stop at the same step.
      double loss_sum = loss;
      if (world.size() > 1) allreduce_sum(world.comm(), &loss_sum, 1);
      if (!std::isfinite(loss_sum))
        throw CollectiveFailure(ExitCode::kRuntime,
                                "step " + std::to_string(step) + " (epoch " + std::to_string(epoch) +
                                    "): the training loss is not finite (lr " + std::to_string(lr) +
                                    "); lower optimizer.lr or add warm-up",
                                world.rank() == 0);
      optimizer->step(static_cast<float>(lr));
      parallel.check_replicas(step + 1);
      window_exposed_comm += parallel.exposed_comm_seconds();
      const double step_seconds = seconds_since(step_start);
      window_seconds += step_seconds;
      result.train_seconds += step_seconds;
      window_loss += loss_sum / world.size();
      ++window_steps;
      ++step;
      if (step % spec.train.log_every == 0 || step == total_steps) {
        std::vector<std::pair<std::string, double>> values = {
            {"epoch", static_cast<double>(epoch + 1)},
            {"step", static_cast<double>(step)},
            {"train_loss", window_loss / window_steps},
            {"lr", lr},
            {"images_per_sec", static_cast<double>(window_steps * global_batch) / window_seconds}};
        if (world.size() > 1) values.push_back({"exposed_comm_ms", 1e3 * window_exposed_comm / window_steps});
        metrics.emit("train", "step " + std::to_string(step), values);
        window_steps = 0;
        window_loss = window_seconds = window_exposed_comm = 0;
      }
    }
    const bool last = epoch + 1 == epochs;
    evaluated_last = spec.train.eval_every_epochs > 0 && ((epoch + 1) % spec.train.eval_every_epochs == 0 || last);
    if (evaluated_last) {
      EvalResult eval = evaluate(*model, data.test, spec, world, *world_comm);
      result.test_loss = eval.loss;
      result.test_accuracy = eval.accuracy;
      metrics.emit("eval", "epoch " + std::to_string(epoch + 1),
                   {{"epoch", static_cast<double>(epoch + 1)},
                    {"step", static_cast<double>(step)},
                    {"test_loss", eval.loss},
                    {"test_accuracy", eval.accuracy}});
    }
  }
  if (!evaluated_last) {  // keep buffers averaged (and the replicas identical) for the saved model
    world_comm->allreduce(CommBuffer::of(store.buffer_arena()), {ReduceOp::kAvg})->wait();
  }
  result.steps = step;
  result.images_per_sec = result.train_seconds > 0 ? static_cast<double>(step * global_batch) / result.train_seconds : 0;
  if (world.rank() == 0) save_model(*model, spec, world, result, epochs);
  std::vector<std::pair<std::string, double>> summary = {{"steps", static_cast<double>(step)},
                                                         {"train_seconds", result.train_seconds},
                                                         {"images_per_sec", result.images_per_sec}};
  if (evaluated_last) summary.push_back({"test_accuracy", result.test_accuracy});
  metrics.emit("done", "done", summary);
  return result;
}

}  // namespace sdp
