#include "train/job_setup.hpp"

#include "config/model_names.hpp"
#include "train/ctr_trainer.hpp"

#include <mpi.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <sstream>

#include "config/experimental.hpp"
#include "config/job_spec_loader.hpp"
#include "core/device_info.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/images/nvjpeg_offload.hpp"
#include "data/sets/open_data.hpp"
#include "distributed/agreement.hpp"
#include "distributed/collectives.hpp"
#include "distributed/comm_backend.hpp"
#include "distributed/inter_node.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/mpi_communicator.hpp"
#include "obs/timeline.hpp"
#include "train/data_parallel.hpp"
#include "train/global_batch.hpp"
#include "train/training_setup.hpp"

namespace sdp {

namespace {

// The plan's decode line: where the JPEGs are decoded (decodes_on_gpu), and why.
std::string describe_decode(const JobSpec& spec, const Device& device, int compute_threads) {
  const DataSpec& data = spec.data;
  const NvjpegStatus& nvjpeg = nvjpeg_status();
  const int readers = loader_workers(data, compute_threads, /*gpu_decode=*/true);
  const std::string normalize =
      data.normalize_on == "cpu" ? "; they normalise the crops into the batch (data.normalize_on)"
                                 : "; the decoder's kernel writes the batch's normalised values (data.normalize_on" +
                                       std::string(data.normalize_on == "auto" ? ": auto)" : ")");
  const std::string regions =
      decodes_regions(spec) ? "; the hardware decoder decodes each crop's region alone (data.decode_roi: on)"
                            : std::string("; whole images (data.decode_roi") +
                                  (data.decode_roi == "auto" ? ": auto, until a GPU run has checked regions)" : ")");
  const std::string backend =
      data.nvjpeg_backend == "auto" ? "the hardware decoder where the GPU has one (data.nvjpeg_backend: auto)"
                                    : "data.nvjpeg_backend: " + data.nvjpeg_backend;
  const std::string gpu = "nvJPEG " + nvjpeg.version + " on " + device.str() + " (" + backend +
                          "; what it refuses is decoded on the CPU); " +
                          std::to_string(readers) + " loader thread(s) read and parse" +
                          (data.workers > 0 ? std::string(" (data.workers)")
                                            : " (at most " + std::to_string(kGpuDecodeWorkers) + " by default)") +
                          normalize + regions;
  switch (data.decode) {
    case DecodeChoice::kGpu:
      return "gpu: " + gpu;
    case DecodeChoice::kCpu:
      return "cpu: libjpeg-turbo on the loader's workers";
    case DecodeChoice::kAuto:
      break;
  }
  if (decodes_on_gpu(spec, device)) return "gpu (auto): " + gpu;
  return "cpu (auto): libjpeg-turbo on the loader's workers (" +
         (!device.is_cuda() ? std::string("this rank computes on the CPU")
                            : "nvJPEG: " + nvjpeg.reason) + ")";
}

// A double as `<<` prints it (25, 2.5).
std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// precision: tf32 on a GPU without TF32 tensor cores (before Ampere) would train plain fp32
// while the job says tf32.
void require_tf32_gpu(const JobSetup& setup) {
  const int index = setup.device.device.index;
  for (const GpuDescription& g : describe_gpus()) {
    if (g.index != index || g.compute_capability >= 80) continue;
    throw InputError("key 'precision': tf32 needs TF32 tensor cores (an Ampere or newer GPU, compute capability 8.0), "
                     "but rank " + std::to_string(setup.world->rank()) + "'s GPU " + std::to_string(index) + " (" +
                     g.name + ") has " + std::to_string(g.compute_capability / 10) + "." +
                     std::to_string(g.compute_capability % 10) + "; use precision: fp32");
  }
}

// Device of every rank as "cpu" / "cuda:N", gathered to all ranks.
std::vector<std::string> gather_devices(const JobSetup& setup) {
  return allgather_strings(setup.world->comm(), setup.device.device.str());
}

}  // namespace

std::string resolved_allreduce(const DistributedSpec& distributed, const World& world) {
  if (world.size() == 1) return "none (1 rank)";
  if (distributed.allreduce != AllreduceKind::kAuto) return to_string(distributed.allreduce);
  // What AutoAllreduce picks for a gradient arena in node-shared memory.
  return world.local_size() > 1 ? "hierarchical" : "flat";
}

std::string resource_config_file(const JobSources& sources) {
  if (!sources.resource_config_path.empty()) return sources.resource_config_path;
  return file_exists(kDefaultResourceConfigPath) ? kDefaultResourceConfigPath : "";
}

JobSpec load_job_spec(const JobSources& sources, std::string* hyperparameters_path) {
  JobSpecLoader loader;
  if (!sources.config_path.empty()) loader.apply_yaml_file(sources.config_path);
  std::string hyperparameters = sources.hyperparameters_path;
  if (hyperparameters.empty() && file_exists(kDefaultHyperparametersPath))
    hyperparameters = kDefaultHyperparametersPath;
  if (!hyperparameters.empty()) loader.apply_hyperparameters_file(hyperparameters);
  for (const auto& o : sources.overrides) loader.apply_override(o);
  if (hyperparameters_path) *hyperparameters_path = hyperparameters;
  return loader.finish();
}

int requested_threads_before_mpi(const JobSources& sources) {
  try {
    const int threads = load_job_spec(sources, nullptr).threads;
    if (threads > 0) return threads;
  } catch (const std::exception&) {
    return 0;  // set_up_job reports it, on every rank
  }
  for (const char* var : {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"})
    if (const char* v = std::getenv(var); v && std::atoi(v) > 0) return std::atoi(v);
  return 0;
}

namespace {

// A GPU job planned from another machine's compute file: its devices are named, not opened.
bool names_gpu_without_opening(const JobSpec& spec, DeviceUse device_use) {
  if (device_use != DeviceUse::kNamed) return false;
  return spec.device == DevicePreference::kCuda ||
         (spec.device == DevicePreference::kAuto && spec.precision != Precision::kFp32);
}

}  // namespace

JobSetup set_up_job(const JobSources& sources, DeviceUse device_use) {
  JobSetup setup;
  run_on_all_ranks(MPI_COMM_WORLD, [&] {
    const std::string rc_file = resource_config_file(sources);
    setup.resource_config =
        rc_file.empty() ? resource_config_from_env() : load_resource_config(rc_file);
    setup.spec = load_job_spec(sources, &setup.hyperparameters_path);
    setup.sagemaker_outputs = find_sagemaker_outputs(rc_file);
    resolve_output_locations(setup.spec, setup.sagemaker_outputs);
  });

  run_on_all_ranks(MPI_COMM_WORLD, [&] {
    TopologyOptions topology;
    topology.ranks_per_node = setup.spec.distributed.ranks_per_node;
    topology.resource_config = setup.resource_config;
    setup.world = std::make_unique<World>(World::create(topology));
  });

  MachineShare share;
  run_on_all_ranks(MPI_COMM_WORLD, [&] { share = share_machine(setup.world->comm()); });
  run_on_all_ranks(MPI_COMM_WORLD, [&] {
    DistributedSpec& distributed = setup.spec.distributed;
    if (names_gpu_without_opening(setup.spec, device_use)) {
      setup.device.device = Device::cuda(setup.world->local_rank());
      setup.device.threads = std::max(1, setup.spec.threads);
      return;
    }
    setup.device = assign_device(setup.spec.device, setup.spec.threads, *setup.world, share, distributed.share_gpus);
    if (distributed.share_gpus && setup.device.device.is_cuda()) {
      // NCCL refuses two ranks on one GPU of one host; MPI through host memory does not mind.
      // NCCL stays possible with one rank per node where no NCCL communicator spans two of
      // them (nodes joined through the hosts), or where NCCL_HOSTID gives each rank a host of
      // its own (NCCL then joins the nodes over its network transport: tests on one GPU).
      const bool nccl_alone = setup.world->local_size() == 1 &&
                              (distributed.inter_node == InterNode::kHost || std::getenv("NCCL_HOSTID") != nullptr);
      if (distributed.backend == CommBackend::kNccl && !nccl_alone)
        throw InputError("distributed.share_gpus: true needs distributed.backend: mpi or auto, not nccl "
                         "(NCCL runs one rank per GPU), unless every node has one rank and "
                         "distributed.inter_node is host (or NCCL_HOSTID differs from rank to rank)");
      if (!nccl_alone) distributed.backend = CommBackend::kMpi;
    }
    // Mixed precision is a GPU feature: a rank that computes on the CPU must not train fp32
    // while the job says amp (device: auto on a machine without a usable GPU).
    if (setup.spec.precision != Precision::kFp32) {
      const std::string amp = to_string(setup.spec.precision);
      if (setup.device.device.is_cpu()) {
        const std::string why = cuda_unavailable_reason();
        throw InputError("key 'precision': " + amp + " needs a GPU, but rank " +
                         std::to_string(setup.world->rank()) + " computes on the CPU (" +
                         (why.empty() ? "device: cpu" : why) + "); use precision: fp32");
      }
      if (setup.spec.precision == Precision::kTf32) require_tf32_gpu(setup);
    }
  });
  warn_if_cpus_oversubscribed(setup.world->comm(), share, setup.device.threads);

  // distributed.inter_node: auto follows NCCL's network on this machine (inter_node.hpp).
  InterNode inter_node = InterNode::kHost;
  run_on_all_ranks(MPI_COMM_WORLD, [&] {
    const DistributedSpec& distributed = setup.spec.distributed;
    const Device& device = setup.device.device;
    setup.nccl_network = probe_nccl_network();  // for the choice, the plan and `sdp-train env`
    inter_node = choose_inter_node(distributed.inter_node, device,
                                   resolve_comm_backend(distributed.backend, device), setup.nccl_network);
  });
  // Every rank must build the same communicators: one rank without RDMA puts the job on the hosts.
  int nccl = inter_node == InterNode::kNccl, all_nccl = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&nccl, &all_nccl, 1, MPI_INT, MPI_MIN, setup.world->comm()));
  setup.inter_node = all_nccl ? InterNode::kNccl : InterNode::kHost;
  if (setup.world->rank() == 0 && setup.world->nodes() > 1 && setup.device.device.is_cuda())
    if (const std::string efa = setup.nccl_network.efa_warning(); !efa.empty()) log_warn(efa);

  // SageMaker names the network interface the hosts talk over; NCCL must use it too.
  if (setup.resource_config && !setup.resource_config->network_interface_name.empty())
    setenv("NCCL_SOCKET_IFNAME", setup.resource_config->network_interface_name.c_str(), 0);

  // The default follows the launcher's binding; say when unbinding would give more threads.
  const int unbound_threads = std::max(1, cpu_core_count() / std::max(1, share.machine_ranks));
  // A cgroup quota below the binding (a container's --cpus) is no launcher's doing.
  const int quota = cgroup_cpu_quota();
  if (default_mpi_wait() == MpiWait::kNap && setup.world->rank() == 0 && setup.world->size() > 1 &&
      setup.device.device.is_cpu())
    log_info("this rank's cgroup grants " + std::to_string(quota) +
             " CPU(s) (a CPU quota): its waits for MPI's messages nap between tests rather than spin, "
             "leaving the quota to the compute");
  if (setup.device.device.is_cpu() && setup.spec.threads <= 0 &&
      setup.device.threads_source == kThreadsFromShare && setup.device.threads < unbound_threads) {
    if (quota > 0 && quota < cpu_affinity_count())
      log_warn("this rank's cgroup grants " + std::to_string(quota) + " CPU(s) (its CPU quota: a container's " +
               "--cpus, a CPU limit), so it uses " + std::to_string(setup.device.threads) +
               " thread(s); raise the quota to give it more");
    else
      log_warn("this rank is bound to " + std::to_string(share.usable_cpus) +
               " CPU(s) by the launcher, so it uses " + std::to_string(setup.device.threads) +
               " thread(s); launch with `mpirun --bind-to none` or `--map-by slot:PE=" +
               std::to_string(unbound_threads) + "` to give each rank " + std::to_string(unbound_threads));
  }
  return setup;
}

std::string describe_slurm_allocation() {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job) return "";
  const auto var = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  std::string text = "job " + std::string(job);
  if (!var("SLURM_STEP_ID").empty()) text += " step " + var("SLURM_STEP_ID");
  if (!var("SLURM_JOB_NODELIST").empty()) text += " on " + var("SLURM_JOB_NODELIST");
  if (!var("SLURM_CPUS_PER_TASK").empty())
    text += ", " + var("SLURM_CPUS_PER_TASK") + " CPU(s) per task";
  if (!var("SLURM_GPUS_PER_TASK").empty())
    text += ", " + var("SLURM_GPUS_PER_TASK") + " GPU(s) per task";
  if (var("SLURM_RESTART_COUNT") != "" && var("SLURM_RESTART_COUNT") != "0")
    text += ", requeued " + var("SLURM_RESTART_COUNT") + " time(s)";
  return text;
}

std::string describe_plan(const JobSetup& setup) {
  const World& w = *setup.world;
  const JobSpec& s = setup.spec;
  const auto devices = gather_devices(setup);
  const auto threads = allgather_ints(w.comm(), setup.device.threads);
  const auto local_ranks = allgather_ints(w.comm(), w.local_rank());
  const auto nodes = allgather_ints(w.comm(), w.node());

  std::ostringstream out;
  out << "plan for job '" << s.name << "'\n";
  out << "  world        : " << w.size() << " rank(s) on " << w.nodes() << " node(s) x "
      << w.local_size() << " rank(s) per node (grouping: " << w.grouping() << ")\n";
  if (const std::string slurm = describe_slurm_allocation(); !slurm.empty())
    out << "  slurm        : " << slurm << "\n";
  out << "  ranks        :\n";
  out << "    rank  node  local_rank  device   threads  host\n";
  for (int r = 0; r < w.size(); ++r)
    out << "    " << std::left << std::setw(6) << r << std::setw(6) << nodes[r] << std::setw(12)
        << local_ranks[r] << std::setw(9) << devices[r] << std::setw(9) << threads[r]
        << w.node_names()[nodes[r]] << "\n";
  out << std::right;
  if (const std::string experimental = describe_experimental_values(s); !experimental.empty())
    out << "  experimental : " << experimental << "\n";
  if (is_ctr_model(s.model.name)) {
    out << describe_ctr_plan(setup);
    return out.str();
  }
  out << "  model        : " << s.model.name << " (" << s.model.num_classes << " classes)\n";
  out << "  layout       : " << describe_memory_format(s, setup.device.device) << "\n";
  out << "  math         : " << describe_compute_rules(s, setup.device.device) << "\n";
  out << "  memory       : " << describe_memory_plan(s, setup.device.device) << "\n";
  // The GPU's choices: on a CPU only those the job sets, to say they do not apply there.
  const bool gpu = setup.device.device.is_cuda();
  if (gpu || s.model.batchnorm != "auto")
    out << "  batchnorm    : " << describe_batchnorm(s, setup.device.device) << "\n";
  if (gpu || s.model.grad_sum != "auto")
    out << "  grad sum     : " << describe_grad_sum(s, setup.device.device) << "\n";
  if (gpu || s.train.loss_read != "auto")
    out << "  loss read    : " << describe_loss_read(s, setup.device.device) << "\n";
  if (gpu || s.train.cuda_graphs != "auto")
    out << "  graphs       : " << describe_cuda_graphs(s, setup.device.device, w.size()) << "\n";
  if (gpu || s.optimizer.capturable != "auto")
    out << "  update       : " << describe_update(s, setup.device.device, w.size()) << "\n";
  out << "  data         : " << to_string(s.data.format);
  if (s.data.format != DataFormat::kSynthetic)
    out << " (train " << s.data.train << ", test " << s.data.test << ")";
  out << "\n";
  if (is_encoded_images(s.data.format))
    out << "  decode       : " << describe_decode(s, setup.device.device, setup.device.threads) << "\n";
  if (is_encoded_images(s.data.format))
    out << "  batches      : " << describe_batch_type(s, setup.device.device) << "\n";
  const GlobalBatch batch = global_batch(s, w.size());
  out << "  batch        : " << batch.per_rank << " per rank, " << batch.size() << " global ("
      << batch.per_rank << " x " << batch.ranks << " rank(s) x " << batch.accumulate
      << " micro-batch(es) per step)\n";
  out << "  learning rate: " << describe_lr_rule(s, w.size());
  if (s.optimizer.warmup_epochs > 0)
    out << ", warm-up " << s.optimizer.warmup_epochs << " epoch(s) from " << s.optimizer.lr;
  if (s.optimizer.warmup_steps > 0)
    out << ", warm-up " << s.optimizer.warmup_steps << " step(s) from " << s.optimizer.lr;
  out << ", schedule " << to_string(s.optimizer.schedule) << "\n";
  out << "  optimizer    : " << to_string(s.optimizer.name) << "\n";
  out << "  allreduce    : " << resolved_allreduce(s.distributed, w)
      << (s.distributed.allreduce == AllreduceKind::kAuto ? " (auto)" : "") << ", buckets of "
      << (s.distributed.bucket_mb == kAutoBucketMb ? std::string("auto") : format_number(s.distributed.bucket_mb) + " MB")
      << (s.distributed.calibration.empty() || (s.distributed.allreduce != AllreduceKind::kAuto &&
                                                s.distributed.bucket_mb != kAutoBucketMb)
              ? std::string()
              : " (auto: the plan's choice at start from " + s.distributed.calibration + ")")
      << ", compression "
      << to_string(resolve_compression(s.distributed.compression, s.precision))
      << (s.distributed.compression == Compression::kAuto ? " (auto)" : "") << ", timeout "
      << s.distributed.timeout_s << " s";
  if (w.size() > 1)  // the gradients' backend: NCCL for GPU memory under auto
  {
    const CommBackend backend = resolve_comm_backend(s.distributed.backend, setup.device.device);
    out << ", over " << to_string(backend)
        << (backend == CommBackend::kMpi && setup.device.device.is_cuda() ? " (GPU memory staged through the host)" : "")
        << (s.distributed.share_gpus && setup.device.device.is_cuda() ? ", ranks share GPUs" : "");
  }
  out << "\n";
  if (w.size() > 1)
    out << "  agreement    : "
        << (step_agreement_in_last_bucket(setup.device.device, resolve_compression(s.distributed.compression, s.precision))
                ? "the loss and stop requests ride in the last gradient bucket"
                : "the loss and stop requests in one 16-byte MPI allreduce per step (GPU gradients or a 16-bit wire)")
        << "\n";
  if (w.nodes() > 1)
    out << "  across nodes : "
        << describe_inter_node(setup.inter_node, s.distributed.inter_node, setup.device.device,
                               setup.nccl_network)
        << "\n";
  out << "  training     : " << s.train.epochs << " epoch(s)";
  if (s.train.max_steps > 0) out << ", at most " << s.train.max_steps << " steps";
  out << "\n";
  out << "  outputs      : model " << s.output.model_dir << ", checkpoints " << s.checkpoint.dir
      << " ("
      << (s.checkpoint.every_steps > 0
              ? "every " + std::to_string(s.checkpoint.every_steps) + " steps and at the end"
              : std::string("at the end"))
      << ", keep " << s.checkpoint.keep_last << ", resume " << s.checkpoint.resume << ")";
  if (!s.output.metrics.empty()) out << ", metrics " << s.output.metrics;
  if (!s.output.timeline.empty())
    out << ", timeline " << s.output.timeline << " (and " << rank_trace_path(s.output.timeline, 0)
        << ", ... per rank)";
  if (const std::string tb = tensorboard_directory(s.output); !tb.empty())
    out << ", tensorboard " << tb;
  out << "\n";
  return out.str();
}

nlohmann::json describe_environment(const JobSetup& setup) {
  const World& w = *setup.world;
  const auto devices = gather_devices(setup);
  const auto threads = allgather_ints(w.comm(), setup.device.threads);
  const auto local_ranks = allgather_ints(w.comm(), w.local_rank());
  const auto nodes = allgather_ints(w.comm(), w.node());
  const auto gpus = allgather_ints(w.comm(), setup.device.gpus_on_node);

  nlohmann::json env;
  env["rank"] = w.rank();
  env["size"] = w.size();
  env["local_rank"] = w.local_rank();
  env["local_size"] = w.local_size();
  env["node"] = w.node();
  env["nodes"] = w.nodes();
  env["grouping"] = w.grouping();
  env["node_names"] = w.node_names();
  env["cuda_backend"] = cuda_backend_built();
  // The GPUs of every node, as the node's first rank sees them, with their peer-to-peer links.
  nlohmann::json my_gpus = nlohmann::json::array();
  for (const GpuDescription& g : describe_gpus())
    my_gpus.push_back({{"index", g.index},
                       {"name", g.name},
                       {"pci_bus_id", g.pci_bus_id},
                       {"memory_bytes", g.memory_bytes},
                       {"compute_capability", g.compute_capability},
                       {"p2p_peers", g.peers},
                       {"p2p_performance_rank", g.peer_performance_rank}});
  const auto all_gpus = allgather_strings(w.comm(), my_gpus.dump());
  env["nodes_gpus"] = nlohmann::json::array();
  for (int node = 0; node < w.nodes(); ++node) {
    const int first = static_cast<int>(std::find(nodes.begin(), nodes.end(), node) - nodes.begin());
    if (first == w.size()) continue;
    env["nodes_gpus"].push_back({{"node", node},
                                 {"node_name", w.node_names()[node]},
                                 {"gpus", nlohmann::json::parse(all_gpus[first])}});
  }
  if (const std::string why = cuda_unavailable_reason(); !why.empty())
    env["cuda_unavailable"] = why;
  // How gradients would cross nodes, and what NCCL would use for it on this machine.
  env["inter_node"] = to_string(setup.inter_node);
  const NcclNetwork& network = setup.nccl_network;
  env["nccl_network"] = {{"transport", network.describe()},
                         {"plugin", network.plugin},
                         {"rdma_devices", network.rdma_devices},
                         {"efa_devices", network.efa_devices}};
  if (const std::string efa = network.efa_warning(); !efa.empty()) env["nccl_network"]["warning"] = efa;
  env["ranks"] = nlohmann::json::array();
  for (int r = 0; r < w.size(); ++r) {
    env["ranks"].push_back({{"rank", r},
                            {"node", nodes[r]},
                            {"node_name", w.node_names()[nodes[r]]},
                            {"host", w.rank_hosts()[r]},
                            {"local_rank", local_ranks[r]},
                            {"device", devices[r]},
                            {"threads", threads[r]},
                            {"gpus_on_node", gpus[r]}});
  }
  if (setup.resource_config) {
    const ResourceConfig& rc = *setup.resource_config;
    env["resource_config"] = {{"source", rc.source},
                              {"current_host", rc.current_host},
                              {"hosts", rc.hosts},
                              {"network_interface_name", rc.network_interface_name}};
    // TF_CONFIG as TensorFlow's MultiWorkerMirroredStrategy expects it, one worker per host.
    nlohmann::json workers = nlohmann::json::array();
    for (const auto& h : rc.hosts) workers.push_back(h + ":2222");
    env["tf_config"] = {{"cluster", {{"worker", workers}}},
                        {"task", {{"type", "worker"}, {"index", rc.host_index()}}}};
  }
  const SageMakerVariables sm = read_sagemaker_variables();
  nlohmann::json channels = nlohmann::json::object();
  for (const auto& [name, path] : sm.channels) channels[name] = path;
  if (!sm.channels.empty() || !sm.model_dir.empty() || sm.num_gpus >= 0) {
    env["sagemaker"] = {{"channels", channels},
                        {"model_dir", sm.model_dir},
                        {"output_data_dir", sm.output_data_dir},
                        {"checkpoint_dir", sm.checkpoint_dir},
                        {"num_gpus", sm.num_gpus}};
  }
  return env;
}

}  // namespace sdp
