#include "train/model_evaluation.hpp"

#include <map>
#include <memory>

#include "core/error.hpp"
#include "core/floating_point.hpp"
#include "core/log.hpp"
#include "distributed/agreement.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/inter_node.hpp"
#include "distributed/watchdog.hpp"
#include "io/safetensors.hpp"
#include "nn/threads.hpp"
#include "obs/metrics.hpp"
#include "train/training_setup.hpp"

namespace sdp {

namespace {

// Rank 0: copies every parameter and buffer of `store` from the file's tensor of the same
// name (final models and checkpoints both keep them under their layer names).
void load_into(ParameterStore& store, const std::string& path) {
  const SafetensorsContent content = load_safetensors(path);
  if (!content.checksummed)
    log_info("note: " + path + " carries no checksums (written before sdp-train checked them): loaded unverified");
  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& t : content.tensors) by_name[t.name] = &t.tensor;
  auto copy = [&](const std::string& name, Tensor& dst) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      throw InputError(path + ": tensor '" + name + "' of the job's model is missing: not a model of this job (model.name, model.num_classes and the data's image shape must match the file's)");
    const Tensor& src = *it->second;
    if (src.shape() != dst.shape() || src.dtype() != dst.dtype())
      throw InputError(path + ": tensor '" + name + "' is " + shape_str(src.shape()) + " " + dtype_name(src.dtype()) +
                       ", the job's model has " + shape_str(dst.shape()) + " " + dtype_name(dst.dtype()));
    dst.copy_from(src);
  };
  for (Param& p : store.params()) copy(p.name, p.value);
  for (Buffer& b : store.buffers()) copy(b.name, b.value);
}

}  // namespace

EvalResult evaluate_model_file(JobSetup& setup, const std::string& model_path) {
  const JobSpec& spec = setup.spec;
  const World& world = *setup.world;
  nn::set_num_threads(setup.device.threads);
  set_flush_denormals(spec.numerics.flush_denormals);
  std::unique_ptr<DataSplits> data;
  std::unique_ptr<nn::Model> model;
  run_on_all_ranks(world.comm(), [&] {
    data = std::make_unique<DataSplits>(load_data(spec));
    model = build_model(spec, *data->train, Device::cpu());
  });
  ParameterStore& store = model->store();
  run_on_all_ranks(world.comm(), [&] {
    if (world.rank() == 0) load_into(store, model_path);
  });
  CommunicatorOptions options;
  options.device = store.device();
  const std::shared_ptr<Communicator> comm = make_communicator(
      world_backend(spec.distributed.backend, setup.inter_node, options.device, world.nodes()), world.comm(),
      options);
  // Watched as in training: a rank that stops taking part ends the command with a report.
  Watchdog watch(WatchdogOptions{spec.distributed.stall_warning_s, spec.distributed.timeout_s}, world.rank(),
                 ProgressBoard::create(world));
  watch.watch(0, "model broadcast", [&] {
    comm->broadcast(CommBuffer::of(store.param_arena()), {0})->wait();
    comm->broadcast(CommBuffer::of(store.buffer_arena()), {0})->wait();
  });
  // A sample this rank alone cannot read ends the job now (see end_job_from_this_rank).
  const EvalResult result = end_job_on_local_error(
      world.comm(), [&] { return evaluate(*model, *data->test, spec, world, *comm, &watch, 0); });
  MetricsLog metrics(world.rank() == 0, "");
  metrics.emit("eval", "eval", {{"test_loss", result.loss}, {"test_accuracy", result.accuracy},
                                {"test_samples", static_cast<double>(data->test->count())}});
  return result;
}

}  // namespace sdp
