#include "train/model_evaluation.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
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
#include "train/model_output.hpp"
#include "train/training_setup.hpp"

namespace sdp {

namespace {

// Rank 0: copies every parameter and buffer of `store` from the file's tensor of the same
// name (final models and checkpoints both keep them under their layer names); returns the
// file's metadata.
std::map<std::string, std::string> load_into(ParameterStore& store, const std::string& path) {
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
  return content.metadata;
}

// The per-class table of `evaluate --per-class`: label, name (the model's own class names, else
// the test set's, else none), samples and top-1 accuracy.
std::string per_class_table(const EvalResult& r, const std::vector<std::string>& names) {
  std::size_t width = 4;
  for (const std::string& n : names) width = std::max(width, n.size());
  std::ostringstream out;
  out << "# per class\n" << std::left << std::setw(7) << "label" << std::setw(static_cast<int>(width) + 2) << "name"
      << std::right << std::setw(9) << "samples" << std::setw(10) << "accuracy" << "\n";
  for (std::size_t c = 0; c < r.class_samples.size(); ++c) {
    const int64_t n = r.class_samples[c];
    out << std::left << std::setw(7) << c << std::setw(static_cast<int>(width) + 2)
        << (c < names.size() ? names[c] : std::string("-")) << std::right << std::setw(9) << n << std::setw(10);
    if (n > 0)
      out << std::fixed << std::setprecision(4) << static_cast<double>(r.class_hits[c]) / static_cast<double>(n);
    else
      out << "-";
    out << "\n";
  }
  return out.str();
}

}  // namespace

EvalResult evaluate_model_file(JobSetup& setup, const std::string& model_path, bool per_class) {
  const JobSpec& spec = setup.spec;
  const World& world = *setup.world;
  nn::set_num_threads(setup.device.threads);
  set_flush_denormals(spec.numerics.flush_denormals);
  std::unique_ptr<DataSplits> data;
  std::unique_ptr<nn::Model> model;
  run_on_all_ranks(world.comm(), [&] {
    data = std::make_unique<DataSplits>(load_data(spec, {}, setup.device.device));
    model = build_model(spec, *data->train, Device::cpu());
  });
  ParameterStore& store = model->store();
  std::map<std::string, std::string> metadata;
  run_on_all_ranks(world.comm(), [&] {
    if (world.rank() == 0) metadata = load_into(store, model_path);
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
      world.comm(), [&] { return evaluate(*model, *data->test, spec, world, *comm, &watch, 0, per_class); });
  MetricsLog metrics(world.rank() == 0, "");
  metrics.emit("eval", "eval", {{"test_loss", result.loss}, {"test_accuracy", result.accuracy},
                                {"test_samples", static_cast<double>(data->test->count())}});
  if (per_class && world.rank() == 0) {
    std::vector<std::string> names = model_class_names(metadata);
    if (names.empty()) names = data->test->class_names();
    std::cout << per_class_table(result, names) << std::flush;
  }
  return result;
}

}  // namespace sdp
