#include "train/layer_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <unordered_map>

#include "core/clock.hpp"
#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/floating_point.hpp"
#include "core/tensor.hpp"
#include "distributed/gradient_reducer.hpp"
#include "nn/layer_profile.hpp"
#include "nn/threads.hpp"
#include "optim/capturable_update.hpp"
#include "train/training_setup.hpp"

namespace sdp {

namespace {

// Random images already on the model's device, and labels (host memory, as the loss takes them).
struct BenchBatch {
  Tensor images;
  std::vector<int32_t> labels;
};

BenchBatch random_batch(nn::Model& model, int64_t batch, uint64_t seed) {
  Shape shape = {batch};
  const Shape image = model.input_shape();
  shape.insert(shape.end(), image.begin(), image.end());
  Tensor host(shape, DType::kF32, Device::cpu());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  float* p = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i) p[i] = pixel(rng);
  BenchBatch out;
  std::uniform_int_distribution<int32_t> label(0, model.num_classes() - 1);
  for (int64_t i = 0; i < batch; ++i) out.labels.push_back(label(rng));
  if (model.device().is_cpu()) {
    out.images = std::move(host);
  } else {
    out.images = Tensor(shape, DType::kF32, model.device());
    model.context().stream->copy_from_host(out.images.raw(), host.raw(), host.nbytes());
    model.context().stream->synchronize();
  }
  return out;
}

// The memory line: the step's planned buffers (one arena, or each layer's own) and the most
// memory the runner's allocations held at once on the model's device (the host's: oneDNN's
// own scratch not counted), with what it was for at that moment.
std::string describe_memory_use(const JobSpec& spec, const nn::Model& model) {
  const nn::GradientPlan& plan = model.gradient_plan();
  const auto mb = format_megabytes;
  std::string line = "memory plan ";
  if (uses_memory_plan(spec, model.device()))
    line += "shared, " + mb(plan.arena_bytes()) + " in one arena (" + mb(plan.peak_live_bytes()) +
            " alive at the peak) for " + mb(plan.separate_bytes()) + " of " + std::to_string(plan.buffer_count()) +
            " buffers";
  else
    line += "per_layer (model.memory_plan)";
  const DeviceKind kind = model.device().is_cuda() ? DeviceKind::kCuda : DeviceKind::kCpu;
  line += std::string(kind == DeviceKind::kCuda ? "; GPU" : "; host") + " peak " + mb(memory_use(kind).peak) +
          " allocated by sdp-train (" + describe_memory_at_peak(kind) + ")";
  return line;
}

}  // namespace

LayerBenchResult run_layer_benchmark(const JobSpec& spec, const Device& device, int threads,
                                     const LayerBenchOptions& options) {
  if (options.steps < 1) throw InputError("bench layers: --steps must be >= 1");
  if (options.warmup < 0) throw InputError("bench layers: --warmup must be >= 0");
  nn::set_num_threads(std::max(1, threads));
  set_flush_denormals(spec.numerics.flush_denormals);
  const DataSplits data = load_data(spec);
  std::unique_ptr<nn::Model> model = build_model(spec, *data.train, device);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(optimizer_options(spec.optimizer), model->store());
  Stream& stream = *model->context().stream;
  optimizer->set_stream(&stream);
  const int64_t batch = spec.data.batch_size;
  const BenchBatch input = random_batch(*model, batch, spec.seed);
  // A small learning rate: the weights stay in range over the steps, whatever the recipe's.
  const float lr = 1e-4f;
  // One step, timed on the host once the device is done with it; `profiled`: the update is
  // bracketed by timed events too. Unprofiled steps mark the plan's timeline instead: the
  // step's start, the end of forward, each gradient's production (the data-parallel hook's
  // moment), the end of backward and of the update.
  const std::unique_ptr<TimedEvent> update_start = stream.make_timed_event(), update_end = stream.make_timed_event();
  const std::unique_ptr<TimedEvent> step_start = stream.make_timed_event(), forward_end = stream.make_timed_event();
  std::vector<std::unique_ptr<TimedEvent>> grad_ready;
  std::unordered_map<const Param*, std::size_t> param_index;
  for (const Param& p : model->store().params()) {
    param_index.emplace(&p, grad_ready.size());
    grad_ready.push_back(stream.make_timed_event());
  }
  model->set_grad_ready_hook([&](const Param& p) { grad_ready[param_index.at(&p)]->record(); });
  // The loss is read as the trainer reads it (train.loss_read).
  const bool loss_at_step_end = reads_loss_at_step_end(spec, device);
  const auto step = [&](bool profiled) {
    const auto start = std::chrono::steady_clock::now();
    if (!profiled) step_start->record();
    if (loss_at_step_end)
      model->forward_deferred(input.images, input.labels.data());
    else
      model->forward(input.images, input.labels.data(), /*training=*/true);
    if (!profiled) forward_end->record();
    model->backward();
    update_start->record();
    optimizer->step(lr);
    update_end->record();
    if (loss_at_step_end) model->take_loss();
    stream.synchronize();
    return seconds_since(start);
  };

  for (int64_t i = 0; i < options.warmup; ++i) step(false);
  std::vector<double> plain, profiled, updates, forwards, backwards, plain_updates;
  std::vector<std::vector<double>> ready(grad_ready.size());
  for (int64_t i = 0; i < options.steps; ++i) {
    plain.push_back(step(false));
    forwards.push_back(forward_end->seconds_since(*step_start));
    backwards.push_back(update_start->seconds_since(*forward_end));
    plain_updates.push_back(update_end->seconds_since(*update_start));
    for (std::size_t p = 0; p < grad_ready.size(); ++p) ready[p].push_back(grad_ready[p]->seconds_since(*forward_end));
  }
  model->set_grad_ready_hook({});
  LayerBenchResult result;
  // train.cuda_graphs (on, auto on a GPU): the same step again, forward and backward replayed from one
  // recording (made at the third of these steps), against the launches above.
  std::vector<double> graphed;
  if (wants_cuda_graphs(spec, model->device())) {
    result.graphs_asked = true;
    result.graph_note = loss_at_step_end ? model->step_graph_obstacle() : "train.loss_read: forward";
    model->set_step_graphs(result.graph_note.empty());
    // The update after the replay as the trainer makes it: on the device, in the recording
    // (optimizer.capturable: on), or after the host's two waits (the loss, the gradients' check).
    std::unique_ptr<CapturableUpdate> capturable;
    if (uses_capturable_update(spec, model->device(), 1)) {
      capturable = std::make_unique<CapturableUpdate>(*optimizer, stream);
      model->set_step_tail([&] { queue_capturable_update(*capturable, *model, /*with_loss=*/true); });
    }
    result.update_on_device = capturable != nullptr;
    const auto graphed_step = [&] {
      const auto start = std::chrono::steady_clock::now();
      if (capturable) capturable->stage(lr);
      model->forward_backward_deferred(input.images, input.labels.data());
      if (capturable) capturable->queue_read();
      model->take_loss();
      if (capturable)
        capturable->applied();
      else if (model->store().grad_arena().all_finite(&stream))
        optimizer->step(lr);
      stream.synchronize();
      return seconds_since(start);
    };
    for (int64_t i = 0; result.graph_note.empty() && i < options.warmup + 3; ++i) graphed_step();
    const int64_t replayed_before = model->replayed_steps();
    for (int64_t i = 0; result.graph_note.empty() && i < options.steps; ++i) graphed.push_back(graphed_step());
    result.graph_replays = model->replayed_steps() - replayed_before;
    if (result.graph_note.empty()) result.graph_note = model->step_graph_failure();
    model->set_step_graphs(false);
    model->set_step_tail({});
    capturable.reset();  // the steps below launch the host's update
  }
  nn::LayerProfile profile(stream);
  model->context().profile = &profile;
  for (int64_t i = 0; options.profile_layers && i < options.steps; ++i) {
    profiled.push_back(step(true));
    updates.push_back(update_end->seconds_since(*update_start));
    profile.collect();
  }
  model->context().profile = nullptr;

  result.graphed_step_seconds = nn::median_seconds(graphed);
  result.model = spec.model.name;
  result.device = device.str();
  result.precision = to_string(spec.precision);
  result.layout = describe_memory_format(spec, device);
  result.batchnorm = describe_batchnorm(spec, device);
  if (const nn::Context::BatchNormFolding& folding = model->batchnorm_folding(); folding.requested)
    result.batchnorm = spec.model.batchnorm + ": " + folding.summary();
  result.grad_sum = describe_grad_sum(spec, device);
  if (const nn::Context::GradSumFusion& sums = model->grad_sum_fusion(); sums.requested)
    result.grad_sum = "fused: " + sums.summary();
  result.math = describe_compute_rules(spec, device);
  result.memory = describe_memory_use(spec, *model);
  result.optimizer = optimizer->name();
  result.batch = batch;
  result.threads = nn::num_threads();
  result.options = options;
  result.step_seconds = nn::median_seconds(plain);
  result.profiled_step_seconds = nn::median_seconds(profiled);
  result.optimizer_seconds = nn::median_seconds(updates);
  for (const nn::LayerProfile::Unit& unit : profile.units()) {
    LayerBenchRow row{unit.name, unit.kind, nn::median_seconds(unit.forward_seconds),
                      nn::median_seconds(unit.backward_seconds), !unit.forward_seconds.empty(),
                      !unit.backward_seconds.empty()};
    result.rows.push_back(std::move(row));
  }
  plan::ComputeProfile& compute = result.compute;
  compute.model = spec.model.name;
  compute.precision = result.precision;
  compute.device = result.device;
  // The GPU's name says which instance types the step stands for (plan's check).
  std::string device_name = result.device;
  if (model->device().is_cuda())
    for (const GpuDescription& gpu : describe_gpus())
      if (gpu.index == model->device().index) device_name += " (" + gpu.name + ")";
  compute.measured_on = "measured: " + host_name() + ", " + device_name + ", " + std::to_string(result.threads) +
                        " thread(s), " + utc_date();
  compute.batch_per_rank = batch;
  compute.forward_s = nn::median_seconds(forwards);
  compute.backward_s = nn::median_seconds(backwards);
  compute.optimizer_s = nn::median_seconds(plain_updates);
  compute.params = param_extents(model->store());
  compute.arena_elements = model->store().grad_arena().numel();
  compute.element_size = static_cast<int64_t>(dtype_size(model->store().grad_arena().dtype()));
  for (const std::vector<double>& samples : ready) compute.ready_s.push_back(nn::median_seconds(samples));
  return result;
}

namespace {

std::string milliseconds(double seconds, bool present) {
  if (!present) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds * 1e3);
  return text;
}

}  // namespace

std::string format_layer_bench(const LayerBenchResult& r) {
  double layers = 0;
  for (const LayerBenchRow& row : r.rows) layers += row.forward_seconds + row.backward_seconds;
  const double share_base = layers > 0 ? layers : 1;
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line,
                "# bench layers: %s on %s, %s, batch %lld, %d thread(s), optimizer %s; medians of %lld steps "
                "after %lld warm-up\n",
                r.model.c_str(), r.device.c_str(), r.precision.c_str(), static_cast<long long>(r.batch), r.threads,
                r.optimizer.c_str(), static_cast<long long>(r.options.steps), static_cast<long long>(r.options.warmup));
  out << line;
  out << "# layout: " << r.layout << "\n# batchnorm: " << r.batchnorm << "\n# grad sum: " << r.grad_sum
      << "\n# math: " << r.math
      << "\n# memory: " << r.memory << "\n";
  std::snprintf(line, sizeof line,
                "# step %.3f ms (%.0f images/s); with the events %.3f ms: layers %.3f ms + optimizer %.3f ms + "
                "the rest %.3f ms\n",
                r.step_seconds * 1e3, r.step_seconds > 0 ? r.batch / r.step_seconds : 0.0,
                r.profiled_step_seconds * 1e3, layers * 1e3, r.optimizer_seconds * 1e3,
                (r.profiled_step_seconds - layers - r.optimizer_seconds) * 1e3);
  out << line;
  if (r.graphs_asked && r.graph_replays > 0) {
    std::snprintf(line, sizeof line,
                  "# step with CUDA graphs %.3f ms (%.0f images/s, %.2fx the launches): %lld of %lld steps replayed, "
                  "%s\n",
                  r.graphed_step_seconds * 1e3, r.graphed_step_seconds > 0 ? r.batch / r.graphed_step_seconds : 0.0,
                  r.graphed_step_seconds > 0 ? r.step_seconds / r.graphed_step_seconds : 0.0,
                  static_cast<long long>(r.graph_replays), static_cast<long long>(r.options.steps),
                  r.update_on_device ? "the update recorded with them (optimizer.capturable: on)"
                                     : "the update decided on the host and launched");
    out << line;
  } else if (r.graphs_asked) {
    out << "# step with CUDA graphs: none replayed (" << (r.graph_note.empty() ? "no recording" : r.graph_note)
        << ")\n";
  }
  std::snprintf(line, sizeof line, "%-32s %-10s %11s %11s %10s %7s\n", "layer", "kind", "forward_ms", "backward_ms",
                "total_ms", "share");
  out << line;
  struct KindTotal {
    int layers = 0;
    double forward = 0, backward = 0;
  };
  std::map<std::string, KindTotal> kinds;
  for (const LayerBenchRow& row : r.rows) {
    const double total = row.forward_seconds + row.backward_seconds;
    std::snprintf(line, sizeof line, "%-32s %-10s %11s %11s %10.3f %6.1f%%\n", row.name.c_str(), row.kind.c_str(),
                  milliseconds(row.forward_seconds, row.has_forward).c_str(),
                  milliseconds(row.backward_seconds, row.has_backward).c_str(), total * 1e3,
                  100.0 * total / share_base);
    out << line;
    KindTotal& k = kinds[row.kind];
    ++k.layers;
    k.forward += row.forward_seconds;
    k.backward += row.backward_seconds;
  }
  std::vector<std::pair<std::string, KindTotal>> by_total(kinds.begin(), kinds.end());
  std::stable_sort(by_total.begin(), by_total.end(), [](const auto& a, const auto& b) {
    return a.second.forward + a.second.backward > b.second.forward + b.second.backward;
  });
  out << "# by kind\n";
  std::snprintf(line, sizeof line, "%-32s %-10s %11s %11s %10s %7s\n", "kind", "layers", "forward_ms", "backward_ms",
                "total_ms", "share");
  out << line;
  for (const auto& [kind, k] : by_total) {
    const double total = k.forward + k.backward;
    std::snprintf(line, sizeof line, "%-32s %-10d %11.3f %11.3f %10.3f %6.1f%%\n", kind.c_str(), k.layers,
                  k.forward * 1e3, k.backward * 1e3, total * 1e3, 100.0 * total / share_base);
    out << line;
  }
  return out.str();
}

}  // namespace sdp
