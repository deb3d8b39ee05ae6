// `sdp-train bench layers --config JOB`: where the job's training step spends its time, layer
// by layer. The job's model, precision and optimizer on the rank's device, at the job's batch
// per rank, trained on random input already on the device (no loader, no communication); each
// leaf layer's forward and backward timed by nn/layer_profile.hpp's events (CUDA events on a
// GPU), next to the optimizer's update and the step's own time with and without the events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "core/tensor_desc.hpp"
#include "plan/cost_model.hpp"

namespace sdp {

struct LayerBenchOptions {
  int64_t steps = 20;  // timed steps, once without the events and once with them
  int64_t warmup = 3;  // untimed steps first (algorithm choice, caches)
  bool profile_layers = true;  // false: only the plan's timeline (no per-layer events, half the steps)
};

struct LayerBenchRow {
  std::string name, kind;
  double forward_seconds = 0, backward_seconds = 0;  // medians over the profiled steps
  bool has_forward = false, has_backward = false;
};

struct LayerBenchResult {
  std::string model, device, precision, optimizer;
  std::string layout, math;  // the plan's lines: which layout, and which math and algorithm rules
  std::string batchnorm;     // how BatchNorm ran (model.batchnorm): what folded, as the model counted it
  std::string grad_sum;      // how the residual blocks summed their input gradients (model.grad_sum)
  // Where the memory went: the step's shared arena (model.memory_plan) and, on a GPU,
  // the runner's peak device allocation over the benchmark.
  std::string memory;
  int64_t batch = 0;
  int threads = 0;
  LayerBenchOptions options;
  std::vector<LayerBenchRow> rows;  // in the order the forward runs them
  double step_seconds = 0;          // median step, no events
  double profiled_step_seconds = 0; // median step with the events
  // train.cuda_graphs (on, auto on a GPU): the median step with forward and backward replayed from a CUDA
  // graph, how many of the measured steps were replayed, and why none were (if so).
  bool graphs_asked = false;
  double graphed_step_seconds = 0;
  int64_t graph_replays = 0;
  std::string graph_note;
  // optimizer.capturable: on: the replayed step's update was decided and applied on the device
  // (recorded with it); otherwise the host read the loss, checked the gradients and launched it,
  // as the trainer does.
  bool update_on_device = false;
  double optimizer_seconds = 0;     // median update
  // The step as `sdp-train plan` models it, from the steps without the layers' events:
  // forward, each gradient's ready time from the start of backward, the update.
  plan::ComputeProfile compute;
};

// Throws InputError for a job whose data or model cannot be built, or bad options.
LayerBenchResult run_layer_benchmark(const JobSpec& spec, const Device& device, int threads,
                                     const LayerBenchOptions& options);
// The table: one row per layer, then the totals per kind, largest first.
std::string format_layer_bench(const LayerBenchResult& result);

}  // namespace sdp
