#include "train/plan_command.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "config/model_names.hpp"
#include "core/device_info.hpp"
#include "core/error.hpp"
#include "ctr/ctr_optimizer.hpp"
#include "distributed/agreement.hpp"
#include "distributed/world.hpp"
#include "io/atomic_file.hpp"
#include "plan/calibration.hpp"
#include "plan/scaling_plan.hpp"
#include "train/ctr_trainer.hpp"
#include "train/layer_bench.hpp"
#include "train/training_setup.hpp"

namespace sdp {

namespace {

// "flat 1.20, ring 2.31, hierarchical 1.45": a figure per algorithm, times `scale`, in `format`.
std::string per_algorithm(const std::map<AllreduceKind, double>& figures, double scale, const char* format) {
  std::string out;
  for (const auto& [kind, value] : figures) {
    char figure[32];
    std::snprintf(figure, sizeof figure, format, value * scale);
    out += (out.empty() ? "" : ", ") + to_string(kind) + " " + figure;
  }
  return out;
}

// How this job's communication runs beside its backward (plan/cost_model.hpp), and the plan's
// line saying why.
plan::Overlap overlap_of(const DeviceAssignment& device, const plan::Network& network, std::string* note) {
  const bool gpu = device.device.is_cuda();
  const plan::Overlap overlap = plan::which_overlap(gpu, device.threads, device.cpus, network);
  const std::string threads = std::to_string(device.threads) + " compute thread(s)",
                    cpus = std::to_string(device.cpus) + " CPU(s)";
  const std::string costs = "each message waiting " + std::to_string(std::lround(network.shared_core.latency_s * 1e6)) +
                            " us more, each MB AllReduced taking " + per_algorithm(network.shared_core.s_per_byte, 1e9, "%.2f") +
                            " ms from it, the link at " + per_algorithm(network.shared_core.link_share, 100, "%.0f %%") +
                            " of its rate";
  switch (overlap) {
    case plan::Overlap::kOwnCore:
      *note = gpu ? "communication overlaps backward (the GPU computes; the host's cores are free)"
                  : "communication overlaps backward (" + threads + " leave CPUs of the rank's " + cpus + " free)";
      break;
    case plan::Overlap::kSharedCore:
      *note = "communication overlaps backward on the cores it computes on (the rank's " + threads + " fill its " +
              cpus + "), " + costs + " (calibrated with those cores busy)";
      break;
    case plan::Overlap::kAfterBackward:
      *note = "no overlap of communication and backward: the rank's " + threads + " fill its " + cpus +
              ", which the communication thread shares, at a cost no calibration measured (fewer threads would "
              "leave it one; `plan --calibrate` measures the cost)";
      break;
  }
  return overlap;
}

using plan::ComputeProfile;
using plan::Network;

std::vector<std::string> split_csv(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream in(csv);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int> parse_nodes(const std::string& csv) {
  std::vector<int> nodes;
  for (const std::string& item : split_csv(csv)) {
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size()) throw InputError("--nodes: '" + item + "' is not a whole number");
    if (value < 1) throw InputError("--nodes: a node count must be at least 1, got " + item);
    nodes.push_back(static_cast<int>(value));
  }
  if (nodes.empty()) throw InputError("--nodes: give at least one node count, e.g. --nodes 1,2,4");
  return nodes;
}

std::vector<double> parse_buckets(const std::string& csv) {
  std::vector<double> out;
  for (const std::string& item : split_csv(csv)) {
    try {
      std::size_t used = 0;
      const double mb = std::stod(item, &used);
      if (used == item.size() && mb >= 0) {
        out.push_back(mb);
        continue;
      }
    } catch (const std::exception&) {
    }
    throw InputError("--bucket-mb: '" + item + "' is not a size in MB (0 = one bucket)");
  }
  if (out.empty()) throw InputError("--bucket-mb: give at least one size");
  return out;
}

std::vector<AllreduceKind> parse_algorithms(const std::string& csv) {
  std::vector<AllreduceKind> out;
  for (const std::string& item : split_csv(csv)) {
    try {
      out.push_back(parse_choice<AllreduceKind>(item));
    } catch (const InputError& e) {
      throw InputError("--algorithms: " + std::string(e.what()));
    }
  }
  if (out.empty()) throw InputError("--algorithms: give at least one algorithm");
  return out;
}

// configs/plan/instances.yaml of the tree the binary was built in or installed with.
std::string default_instances_file() {
  if (const char* env = std::getenv("SDP_INSTANCES"); env && *env) return env;
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error)
    for (const auto& dir : {exe.parent_path(), exe.parent_path().parent_path()}) {
      const std::filesystem::path candidate = dir / "configs" / "plan" / "instances.yaml";
      if (std::filesystem::exists(candidate)) return candidate.string();
    }
  return "configs/plan/instances.yaml";
}

// GPU buffers reduce over NCCL, flat or hierarchical; the ring is host-only (allreduce.cpp).
const std::vector<AllreduceKind> kGpuAlgorithms = {AllreduceKind::kFlat, AllreduceKind::kHierarchical};

// What a GPU's cast kernels are assumed to reach for f32 <-> 16-bit gradients (not measured:
// an A100 has 1.6-2.0 TB/s of memory bandwidth, an H100 3.35 TB/s).
constexpr double kGpuCastBytesPerS = 600e9;

// What the device's own transport changes in the network: a GPU job casts on the GPU and
// crosses nodes through NCCL; a host job's flat and ring cross through MPI, whose TCP
// transport sends a message above its eager limit by rendezvous, and its gradients sit in
// node-shared memory (what the runner's auto decides on).
void apply_transport(plan::Network& network, const Device& device) {
  if (device.is_cuda()) {
    network.convert_bytes_per_s = kGpuCastBytesPerS;
    network.rendezvous_above_bytes = 0;
  } else {
    network.rendezvous_above_bytes = plan::kMpiTcpEagerBytes;
    network.host_gradients = true;
  }
}

// The plan takes the step as measured: say so when the instance's GPU is not the one it was
// measured on (an H100's step planned for A100 nodes is too fast), "" when it is or nothing
// names one.
std::string compute_against_instance(const ComputeProfile& compute, const std::string& instance_accelerator) {
  if (instance_accelerator.empty()) return "";
  const std::string model = instance_accelerator.substr(0, instance_accelerator.find(' '));  // "H100 80GB" -> H100
  if (compute.measured_on.find(model) != std::string::npos) return "";
  return "the step as measured (" + compute.measured_on + "), though the instance's GPU is " + instance_accelerator +
         ": measure on one (--save-compute there) for its own step";
}

// Every rank measures at once (ranks of one machine share it as in the job); the slowest
// rank's figure for each part of the timeline paces a synchronous step.
ComputeProfile measure_compute(const JobSpec& spec, const DeviceAssignment& device, const World& world,
                               const PlanCommandOptions& options) {
  LayerBenchOptions bench;
  bench.steps = options.steps;
  bench.warmup = options.warmup;
  bench.profile_layers = false;
  LayerBenchResult result;
  run_on_all_ranks(world.comm(), [&] {
    result = run_layer_benchmark(spec, device.device, device.threads, bench);
  });
  ComputeProfile compute = result.compute;
  std::vector<double> figures = {compute.forward_s, compute.backward_s, compute.optimizer_s};
  figures.insert(figures.end(), compute.ready_s.begin(), compute.ready_s.end());
  MPI_Allreduce(MPI_IN_PLACE, figures.data(), static_cast<int>(figures.size()), MPI_DOUBLE, MPI_MAX, world.comm());
  compute.forward_s = figures[0];
  compute.backward_s = figures[1];
  compute.optimizer_s = figures[2];
  std::copy(figures.begin() + 3, figures.end(), compute.ready_s.begin());
  if (world.size() > 1)
    compute.measured_on += ", slowest of " + std::to_string(world.size()) + " ranks running at once";
  if (const std::string shared = plan::shared_machines(plan::machines_of(world), world.nodes()); !shared.empty())
    compute.measured_on += ", " + shared;
  return compute;
}

ComputeProfile read_compute(const JobSetup& setup, const std::string& path) {
  ComputeProfile compute = plan::read_compute_profile(path);
  const JobSpec& spec = setup.spec;
  if (compute.model != spec.model.name)
    throw InputError("--compute: " + path + " was measured for model '" + compute.model + "', the job trains '" +
                     spec.model.name + "'");
  if (compute.batch_per_rank != spec.data.batch_size)
    throw InputError("--compute: " + path + " was measured at batch " + std::to_string(compute.batch_per_rank) +
                     " per rank, the job's data.batch_size is " + std::to_string(spec.data.batch_size));
  if (compute.precision != to_string(spec.precision))
    throw InputError("--compute: " + path + " was measured in " + compute.precision + ", the job's precision is " +
                     to_string(spec.precision));
  compute.measured_on = "from " + path + " (" + compute.measured_on + ")";
  return compute;
}

std::string gbit(double bytes_per_s) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3g Gbit/s", bytes_per_s * 8 / 1e9);
  return text;
}
std::string micros(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  return text;
}

std::string dollars(double usd) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", usd);
  return text;
}

std::string describe_calibration(const plan::Calibration& c) {
  std::ostringstream out;
  out << "# calibration on " << c.nodes << " node(s) x " << c.ranks_per_node << " rank(s) (" << c.hosts << "), "
      << c.date << "\n";
  if (const std::string shared = plan::shared_machines(c.machines, c.nodes); !shared.empty())
    out << "# machines: " << shared << " (simulated hosts: plans from this file say so)\n";
  if (c.link_measured)
    out << "# link: " << gbit(c.network.link_bytes_per_s) << " each way, latency " << micros(c.network.latency_s)
        << " one way\n";
  else
    out << "# link: not measured (one node; launch over 2 nodes or more to measure it)\n";
  // A measured curve's points, " 4KiB=12.3 us" each (bytes below 1 KiB as "8B").
  const auto points = [](const plan::Curve& curve) {
    std::string text;
    for (const auto& [bytes, seconds] : curve.points())
      text += " " + (bytes < 1024 ? std::to_string(static_cast<long long>(bytes)) + "B"
                                  : std::to_string(static_cast<long long>(bytes / 1024)) + "KiB") +
              "=" + micros(seconds);
    return text;
  };
  if (!c.network.mpi_message.empty()) out << "# MPI message one way:" << points(c.network.mpi_message.curve) << "\n";
  if (!c.network.socket_step.empty())
    out << "# socket ring step, by bytes a node sends:" << points(c.network.socket_step.curve) << "\n";
  if (!c.network.ring_step.empty())
    out << "# ring step, by bytes a rank sends:" << points(c.network.ring_step.curve) << "\n";
  if (!c.network.flat_step.empty())
    out << "# MPI_Allreduce step, by bytes a rank sends:" << points(c.network.flat_step.curve) << "\n";
  if (c.intra_measured) {
    out << "# node AllReduce among " << c.network.intra_ranks << " ranks:" << points(c.network.intra) << "\n";
  } else {
    out << "# node AllReduce: not measured (one rank per node)\n";
  }
  out << "# f32<->fp16 casts: " << gbit(c.network.convert_bytes_per_s) << "\n";
  if (c.network.shared_core.measured) {
    out << "# on cores busy computing: " << std::lround(c.network.shared_core.latency_s * 1e6)
        << " us more a message; ms of compute lost per MB AllReduced: "
        << per_algorithm(c.network.shared_core.s_per_byte, 1e9, "%.2f")
        << "; the link's rate reached: " << per_algorithm(c.network.shared_core.link_share, 100, "%.0f %%") << "\n";
  } else {
    out << "# on cores busy computing: not measured (one rank)\n";
  }
  return out.str();
}

std::string bucket_words(double mb) {
  if (mb == 0) return "one bucket";
  char text[48];
  std::snprintf(text, sizeof text, "buckets of %g MB", mb);
  return text;
}

// A plan file (compute profile, calibration) as `plan` writes it: indented JSON, replaced whole.
void write_plan_file(const std::string& path, const nlohmann::json& doc) {
  const std::string text = doc.dump(2) + "\n";
  write_file_atomically(path, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
}

// A CTR job's plan (ctr_plan.hpp) on the network and nodes the options gave: its step and
// unique ids read from --compute FILE, or measured here on every rank of the launch.
// Collective; rank 0's table.
std::string plan_ctr_job(const JobSetup& setup, const PlanCommandOptions& options, const plan::PlanSetup& plan_setup,
                         const plan::Network& network, const CtrProfile* from_file) {
  const JobSpec& spec = setup.spec;
  const CtrProfile profile = from_file ? *from_file : measure_ctr_step(setup, options.steps, options.warmup);
  if (setup.world->rank() != 0) return "";
  if (!options.save_compute.empty()) write_plan_file(options.save_compute, plan::ctr_profile_to_json(profile));
  CtrPlanSetup ctr;
  ctr.unique_source = from_file ? "from " + options.compute : "measured from the training set";
  ctr.nodes = plan_setup.nodes;
  ctr.ranks_per_node = plan_setup.ranks_per_node;
  ctr.exchange = spec.distributed.embedding_exchange;
  ctr.sharding = spec.model.embedding_sharding;
  ctr.state_floats = CtrOptimizer::table_state_floats(spec.optimizer);
  ctr.rank_memory_bytes = static_cast<double>(usable_memory_bytes()) / std::max(1, plan_setup.ranks_per_node);
  ctr.table_algorithm = spec.distributed.allreduce;
  ctr.compression = plan_setup.compression;
  ctr.assumed = plan_setup.assumed;
  ctr.measured = plan_setup.measured;
  ctr.samples_per_epoch = plan_setup.samples_per_epoch > 0 ? plan_setup.samples_per_epoch : profile.samples;
  ctr.epoch_source = plan_setup.samples_per_epoch > 0 ? "--samples-per-epoch"
                     : from_file ? "the set " + options.compute + " was measured on; --samples-per-epoch for the job's"
                                 : "the training set";
  ctr.usd_per_node_hour = plan_setup.usd_per_node_hour;
  return format_ctr_plan(profile, ctr, make_ctr_plan(profile, network, ctr));
}

}  // namespace

StartupAllreduce choose_allreduce_at_start(const JobSpec& spec, const World& world, const DeviceAssignment& device,
                                           const std::vector<int64_t>& input_shape) {
  const DistributedSpec& d = spec.distributed;
  const bool auto_algorithm = d.allreduce == AllreduceKind::kAuto, auto_bucket = d.bucket_mb == kAutoBucketMb;
  StartupAllreduce choice{d.allreduce, auto_bucket ? 25.0 : d.bucket_mb, ""};
  if (world.size() <= 1 || (!auto_algorithm && !auto_bucket)) return choice;
  if (d.calibration.empty()) {
    if (auto_bucket) choice.reason = "bucket_mb auto without distributed.calibration: 25 MB";
    return choice;
  }
  plan::Calibration calibration;
  run_on_all_ranks(world.comm(), [&] {
    try {
      calibration = plan::read_calibration(d.calibration);
    } catch (const InputError& e) {
      throw InputError("key 'distributed.calibration': " + std::string(e.what()));
    }
  });
  if (world.nodes() > 1 && !calibration.link_measured) {
    choice.reason = d.calibration + " has no link measured (calibrated on one node): the runner's own rules";
    return choice;
  }
  // The step on synthetic data of the model's input shape: the job's own data is not read.
  JobSpec measured = spec;
  measured.data.format = DataFormat::kSynthetic;
  measured.data.batch_size = spec.data.batch_size;
  measured.data.synthetic.train_samples = measured.data.synthetic.test_samples = spec.data.batch_size;
  measured.data.synthetic.channels = static_cast<int>(input_shape.at(0));
  measured.data.synthetic.height = static_cast<int>(input_shape.at(1));
  measured.data.synthetic.width = static_cast<int>(input_shape.at(2));
  PlanCommandOptions measure;
  measure.steps = 5;
  measure.warmup = 2;
  // A second model beside the job's may not fit a GPU's memory: then the runner's own rules,
  // on every rank (the failure is agreed), and the log says why.
  ComputeProfile compute;
  try {
    compute = measure_compute(measured, device, world, measure);
  } catch (const CollectiveFailure& e) {
    if (e.code() != ExitCode::kRuntime) throw;
    choice.reason = "the measured steps failed (" + std::string(e.what()) + "): the runner's own rules";
    return choice;
  }

  plan::PlanSetup setup;
  setup.nodes = {world.nodes()};
  setup.ranks_per_node = world.local_size();
  if (!auto_algorithm)
    setup.algorithms = {d.allreduce};
  else if (device.device.is_cuda())
    setup.algorithms = kGpuAlgorithms;  // else PlanSetup's candidates
  if (!auto_bucket) setup.bucket_mb = {d.bucket_mb};
  setup.compression = resolve_compression(d.compression, spec.precision);
  setup.job_algorithm = d.allreduce;
  setup.job_bucket_mb = choice.bucket_mb;
  Network network = calibration.network;
  apply_transport(network, device.device);
  std::string overlap_note;
  setup.overlap = overlap_of(device, network, &overlap_note);
  double chosen[2] = {0, 0};
  std::string reason;
  if (world.rank() == 0) {
    const plan::Plan plan = plan::make_plan(compute, network, setup);
    const plan::PlanRow& row = plan.rows.front();
    chosen[0] = static_cast<double>(static_cast<int>(row.best.algorithm));
    chosen[1] = row.best.bucket_mb;
    char figures[160];
    std::snprintf(figures, sizeof figures, "predicted %.3f ms a step against %.3f ms for %s with %s",
                  row.best.step.step_s * 1e3, row.job.step.step_s * 1e3, to_string(d.allreduce).c_str(),
                  bucket_words(choice.bucket_mb).c_str());
    reason = to_string(row.best.algorithm) + ", " + bucket_words(row.best.bucket_mb) + ": " + figures + " (" +
             d.calibration + " of " + calibration.date + ", " + std::to_string(measure.steps) + " measured steps" +
             (setup.overlap == plan::Overlap::kOwnCore ? std::string(")") : "; " + overlap_note + ")");
  }
  MPI_Bcast(chosen, 2, MPI_DOUBLE, 0, world.comm());
  choice.algorithm = static_cast<AllreduceKind>(static_cast<int>(chosen[0]));
  choice.bucket_mb = chosen[1];
  choice.reason = reason;
  return choice;
}

std::string run_plan_command(const JobSetup& setup, const PlanCommandOptions& options) {
  const World& world = *setup.world;
  if (!options.calibrate.empty()) {
    plan::Calibration calibration;
    run_on_all_ranks(world.comm(), [&] { calibration = plan::calibrate(world, setup.device.threads); });
    if (world.rank() != 0) return "";
    write_plan_file(options.calibrate, plan::calibration_to_json(calibration));
    return describe_calibration(calibration) + "# written to " + options.calibrate + "\n";
  }

  // Every input is checked on every rank before the measured step, so a bad option ends the
  // launch at once with exit 2.
  const bool ctr = is_ctr_model(setup.spec.model.name);
  plan::PlanSetup plan_setup;
  std::string computed_text;
  plan::Network network;
  ComputeProfile compute;
  CtrProfile ctr_profile;  // --compute FILE of a CTR job
  std::string instance_accelerator;  // the instance's GPU, "" for a CPU instance or none
  run_on_all_ranks(world.comm(), [&] {
    plan_setup.nodes = parse_nodes(options.nodes);
    if (!options.buckets.empty()) plan_setup.bucket_mb = parse_buckets(options.buckets);
    if (!options.algorithms.empty())
      plan_setup.algorithms = parse_algorithms(options.algorithms);
    else if (setup.device.device.is_cuda())
      plan_setup.algorithms = kGpuAlgorithms;
    if (options.gpus_per_node < 0) throw InputError("--gpus-per-node: must be at least 1");
    const JobSpec& spec = setup.spec;
    plan_setup.compression = resolve_compression(spec.distributed.compression, spec.precision);
    plan_setup.job_algorithm = spec.distributed.allreduce;
    plan_setup.job_bucket_mb = spec.distributed.bucket_mb == kAutoBucketMb ? 25.0 : spec.distributed.bucket_mb;
    plan_setup.epochs = spec.train.epochs;

    int ranks_per_node = options.gpus_per_node;
    bool have_link = false;
    if (!options.instance.empty()) {
      const plan::InstanceTable table =
          plan::read_instance_table(options.instances_file.empty() ? default_instances_file() : options.instances_file);
      const plan::InstanceType& type = plan::find_instance(table, options.instance);
      plan_setup.instance = type.name;
      if (type.accelerators > 0) instance_accelerator = type.accelerator;
      plan_setup.usd_per_node_hour = type.usd_per_hour;
      network.link_bytes_per_s = type.network_gbps * 1e9 / 8 * table.link_efficiency;
      network.latency_s = type.latency_us * 1e-6;
      network.intra_bytes_per_s = type.node_busbw_gbs * 1e9;
      have_link = true;
      if (ranks_per_node == 0 && type.accelerators > 0) ranks_per_node = type.accelerators;
      plan_setup.assumed.push_back("instance " + type.name + " from " + table.path + " (" + table.source + ", " +
                                   table.date + ", " + table.region + "): " +
                                   (type.accelerators > 0 ? std::to_string(type.accelerators) + " x " + type.accelerator
                                                          : std::to_string(type.vcpus) + " vCPUs, no GPU") +
                                   ", " + gbit(network.link_bytes_per_s) + " (" +
                                   std::to_string(static_cast<int>(100 * table.link_efficiency + 0.5)) + " % of " +
                                   std::to_string(static_cast<int>(type.network_gbps)) + " Gbit/s), latency " +
                                   micros(network.latency_s) + ", node AllReduce bus bandwidth " +
                                   std::to_string(static_cast<int>(type.node_busbw_gbs)) + " GB/s, $" +
                                   dollars(type.usd_per_hour) + " per node-hour");
    }
    if (!options.calibration.empty()) {
      const plan::Calibration c = plan::read_calibration(options.calibration);
      if (c.link_measured) {
        network.link_bytes_per_s = c.network.link_bytes_per_s;
        network.latency_s = c.network.latency_s;
        for (const auto& [key, times] : plan::kMeasuredLinkTimes) network.*times = c.network.*times;
        have_link = true;
        plan_setup.measured.push_back(
            "link " + gbit(network.link_bytes_per_s) + ", latency " + micros(network.latency_s) +
            (network.mpi_message.empty() ? std::string() : ", MPI messages by size (host jobs' flat and ring)") +
            (network.socket_step.empty() ? std::string()
                                         : ", socket ring steps by size (host jobs' hierarchical across nodes)") +
            (network.ring_step.empty() ? std::string() : ", ring and MPI_Allreduce steps by size (host jobs)") +
            " (" + options.calibration + ", " + c.date + ")");
      }
      if (c.intra_measured) {
        network.intra = c.network.intra;
        network.intra_ranks = c.network.intra_ranks;
        plan_setup.measured.push_back("node AllReduce curve for " + std::to_string(c.network.intra_ranks) +
                                      " ranks per node (" + options.calibration + ")");
      }
      network.convert_bytes_per_s = c.network.convert_bytes_per_s;
      if (c.convert_measured && !setup.device.device.is_cuda())
        plan_setup.measured.push_back("f32<->16-bit casts " + gbit(network.convert_bytes_per_s) + " (" +
                                      options.calibration + ")");
      if (ranks_per_node == 0) ranks_per_node = c.ranks_per_node;
      network.shared_core = c.network.shared_core;
      if (const std::string shared = plan::shared_machines(c.machines, c.nodes); !shared.empty())
        plan_setup.assumed.push_back(
            "nodes on machines of their own, though " + options.calibration + " was measured with " + shared +
            ": its figures hold what those nodes share there (" +
            (c.machines.ranks > c.machines.cpus ? "CPUs, fewer than their ranks" : "memory, the kernel's network stack") +
            "), which the model does not price (docs/records/plan-record.md, \"Where it stands\")");
    }
    if (options.link_gbps > 0 || options.link_latency_us >= 0) {
      if (options.link_gbps <= 0) throw InputError("--link-latency-us needs --link-gbps too");
      network.link_bytes_per_s = options.link_gbps * 1e9 / 8;
      network.latency_s = std::max(0.0, options.link_latency_us) * 1e-6;
      for (const auto& [key, times] : plan::kMeasuredLinkTimes) network.*times = {};  // measured on another link
      have_link = true;
      plan_setup.assumed.push_back("link " + gbit(network.link_bytes_per_s) + ", latency " +
                                   micros(network.latency_s) + " (--link-gbps, --link-latency-us)");
    }
    // A GPU job casts its gradients for compression on the GPU, not at the host's (calibrated)
    // rate: 4 GB/s would put 51 ms of casts into ResNet-50's step.
    apply_transport(network, setup.device.device);
    std::string overlap_note;
    plan_setup.overlap = overlap_of(setup.device, network, &overlap_note);
    if (!ctr)  // a CTR step overlaps nothing (ctr_plan.hpp)
      (plan_setup.overlap == plan::Overlap::kSharedCore ? plan_setup.measured : plan_setup.assumed)
          .push_back(overlap_note);
    if (setup.device.device.is_cuda() &&
        (plan_setup.compression == Compression::kFp16 || plan_setup.compression == Compression::kBf16))
      plan_setup.assumed.push_back("f32<->16-bit casts on the GPU at " + gbit(kGpuCastBytesPerS) +
                                   " (a third of an A100's or H100's memory bandwidth)");
    bool multi_node = false;
    for (int n : plan_setup.nodes) multi_node |= n > 1;
    if (multi_node && !have_link)
      throw InputError("plan: no network for more than one node: give --instance TYPE, --link-gbps B "
                       "[--link-latency-us L], or --calibration FILE (made by `sdp-train plan --calibrate FILE` "
                       "on the cluster)");
    if (ranks_per_node == 0) ranks_per_node = world.local_size();
    plan_setup.ranks_per_node = ranks_per_node;
    if (ranks_per_node > 1 && (network.intra.empty() || network.intra_ranks != ranks_per_node))
      plan_setup.assumed.push_back("node AllReduce at " + std::to_string(static_cast<int>(network.intra_bytes_per_s / 1e9)) +
                                   " GB/s bus bandwidth for " + std::to_string(ranks_per_node) +
                                   " ranks per node (no calibration for that many)");
    if (ctr && options.json) throw InputError("--json: a CTR job's plan prints a table");
    if (ctr && options.compute != "measured")
      ctr_profile = read_ctr_profile_for(spec, options.compute);
    else if (options.compute != "measured")
      compute = read_compute(setup, options.compute);
    if (options.samples_per_epoch > 0 || ctr) {
      plan_setup.samples_per_epoch = options.samples_per_epoch;  // CTR: 0 here, the set's below
    } else {
      const DataSplits data = load_data(spec);
      plan_setup.samples_per_epoch = std::max<int64_t>(0, data.train->count());
    }
  });
  if (ctr) return plan_ctr_job(setup, options, plan_setup, network, options.compute != "measured" ? &ctr_profile : nullptr);
  if (options.compute == "measured") compute = measure_compute(setup.spec, setup.device, world, options);
  if (world.rank() != 0) return "";
  if (!options.save_compute.empty()) write_plan_file(options.save_compute, plan::compute_profile_to_json(compute));
  if (const std::string note = compute_against_instance(compute, instance_accelerator); !note.empty())
    plan_setup.assumed.push_back(note);
  const plan::Plan plan = plan::make_plan(compute, network, plan_setup);
  return options.json ? plan::plan_to_json(plan) : plan::format_plan(plan);
}

}  // namespace sdp
