// sdp-train: the command line. It parses arguments (CLI11) and calls lib/; nothing of
// substance lives here. Every error ends as one "sdp-train: error: ..." line and an exit
// status (0 ok, 1 runtime failure, 2 bad input, 3 watchdog timeout; docs/architecture.md, "Errors").
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "config/job_spec_yaml.hpp"
#include "config/model_names.hpp"
#include "core/cpu_dispatch.hpp"
#include "core/device_info.hpp"
#include "core/error.hpp"
#include "core/job_failure.hpp"
#include "data/images/nvjpeg_offload.hpp"
#include "data/sets/cifar10.hpp"
#include "data/sets/mnist.hpp"
#include "data/sets/synthetic.hpp"
#include "data/tools/convert.hpp"
#include "data/tools/inspect.hpp"
#include "distributed/agreement.hpp"
#include "distributed/allreduce_bench.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/device_assignment.hpp"
#include "distributed/world.hpp"
#include "nn/gemm_peak.hpp"
#include "nn/library_versions.hpp"
#include "nn/threads.hpp"
#include "train/checkpoint_bench.hpp"
#include "train/ctr_trainer.hpp"
#include "train/data_bench.hpp"
#include "train/layer_bench.hpp"
#include "train/job_setup.hpp"
#include "train/model_evaluation.hpp"
#include "train/plan_command.hpp"
#include "train/interruption.hpp"
#include "train/trainer.hpp"

namespace {

using sdp::ExitCode;

// On SageMaker also the job's FailureReason (core/job_failure.hpp).
void print_error(const std::string& message) { sdp::report_job_error(message); }

// Where a failing run leaves its error for SageMaker: beside the resourceconfig.json it reads
// (or SM_OUTPUT_DIR); no file off SageMaker.
void set_failure_file_for(const sdp::JobSources& sources) {
  sdp::set_failure_file(sdp::find_sagemaker_outputs(sdp::resource_config_file(sources)).failure_file());
}

// This rank alone failed: the others may be inside a collective, so end the whole job.
// Before MPI runs (init_mpi failed) there is no job to end.
void fail_this_rank(int exit_code, const std::string& message) {
  if (!sdp::mpi_is_initialized()) {
    print_error(message);
    return;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  print_error((size > 1 ? "rank " + std::to_string(rank) + ": " : std::string()) + message);
  if (size > 1) sdp::abort_job(exit_code);
}

// CLI11's PositiveNumber and NonNegativeNumber, with a message a person reads ("must be at
// least 1, got 0") instead of the double range they print.
CLI::Validator at_least(long long minimum) {
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        long long value = 0;
        std::size_t used = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "expected a whole number, got '" + text + "'";
        if (value < minimum) return "must be at least " + std::to_string(minimum) + ", got " + text;
        return std::string();
      },
      ">= " + std::to_string(minimum));
}
const CLI::Validator kPositive = at_least(1), kNonNegative = at_least(0);

// The options every job command takes.
void add_job_options(CLI::App& cmd, sdp::JobSources& sources) {
  cmd.add_option("-c,--config", sources.config_path, "YAML job spec");
  cmd.add_option("--resource-config", sources.resource_config_path,
                 std::string("SageMaker resourceconfig.json (default: ") + sdp::kDefaultResourceConfigPath +
                     " when it exists)");
  cmd.add_option("--hyperparameters", sources.hyperparameters_path,
                 std::string("SageMaker hyperparameters.json (default: ") + sdp::kDefaultHyperparametersPath +
                     " when it exists)");
  cmd.add_option("--set", sources.overrides, "override a job key, e.g. --set optimizer.lr=0.1 (repeatable)")
      ->type_name("KEY=VALUE")
      ->take_all()
      ->allow_extra_args(false);
}

// A job is described by a YAML file, or, on SageMaker, by its hyperparameters alone (every
// key has a default); with neither, the defaults are almost surely not what was meant.
void require_job_spec(const sdp::JobSources& sources, const std::string& what) {
  if (sources.config_path.empty() && sources.hyperparameters_path.empty())
    throw CLI::RequiredError(what +
                             " (or --hyperparameters FILE for a job from hyperparameters alone)");
}

int run_validate(const sdp::JobSources& sources) {
  sdp::JobSetup setup = sdp::set_up_job(sources);
  std::string plan = sdp::describe_plan(setup);
  if (setup.world->rank() == 0) {
    std::cout << "# resolved job spec (defaults < " << (sources.config_path.empty() ? "-" : sources.config_path)
              << " < " << (setup.hyperparameters_path.empty() ? "-" : setup.hyperparameters_path)
              << " < --set)\n"
              << sdp::job_spec_to_yaml(setup.spec) << "\n# " << plan;
    std::cout << "# valid\n" << std::flush;
  }
  return 0;
}

int run_env(const sdp::JobSources& sources) {
  sdp::JobSetup setup = sdp::set_up_job(sources);
  nlohmann::json env = sdp::describe_environment(setup);
  if (setup.world->rank() == 0) std::cout << env.dump(2) << std::endl;
  return 0;
}

int run_bench_allreduce(sdp::JobSources sources, sdp::AllreduceBenchOptions options,
                        const std::string& algorithms_csv, const std::string& device) {
  // --device cuda: the job's device key, so the usual pinning and GPU-per-rank checks apply.
  if (device == "cuda") sources.overrides.push_back("device=cuda");
  sdp::JobSetup setup = sdp::set_up_job(sources);
  sdp::AllreduceBenchResult result;
  sdp::run_on_all_ranks(setup.world->comm(), [&] {
    if (!algorithms_csv.empty()) sdp::parse_bench_algorithms(algorithms_csv, options);
    options.device = device == "cuda" ? setup.device.device : sdp::Device::cpu();
    // The job's gradient path (share_gpus: staged MPI) and its inter-node choice.
    options.gpu_backend = sdp::resolve_comm_backend(setup.spec.distributed.backend, options.device);
    options.inter_node = setup.inter_node;
    result = sdp::run_allreduce_benchmark(*setup.world, options);
  });
  if (setup.world->rank() == 0) std::cout << sdp::format_allreduce_table(result) << std::flush;
  return 0;
}

// The commands that model or time an image network's layers.
void require_image_model(const sdp::JobSpec& spec, const std::string& command) {
  if (sdp::is_ctr_model(spec.model.name))
    throw sdp::InputError(command + " models the image networks' steps; a " + spec.model.name +
                          " job's plan is what `sdp-train validate` prints (docs/ctr.md)");
}

// Every rank profiles its own device; rank 0 prints (run it on one rank for a clean table).
int run_bench_layers(const sdp::JobSources& sources, const sdp::LayerBenchOptions& options) {
  sdp::JobSetup setup = sdp::set_up_job(sources);
  require_image_model(setup.spec, "bench layers");
  sdp::LayerBenchResult result;
  sdp::run_on_all_ranks(setup.world->comm(), [&] {
    result = sdp::run_layer_benchmark(setup.spec, setup.device.device, setup.device.threads, options);
  });
  if (setup.world->rank() == 0) std::cout << sdp::format_layer_bench(result) << std::flush;
  return 0;
}

int run_plan(const sdp::JobSources& sources, const sdp::PlanCommandOptions& options) {
  // A compute file made on a GPU machine plans that GPU job here, GPU or not.
  sdp::JobSetup setup = sdp::set_up_job(
      sources, options.compute == "measured" ? sdp::DeviceUse::kOpen : sdp::DeviceUse::kNamed);
  const std::string text = sdp::run_plan_command(setup, options);
  if (setup.world->rank() == 0) std::cout << text << std::flush;
  return 0;
}

// A benchmark of one process without MPI (bench data, bench checkpoint): prints the table
// `run(spec)` makes of the job, or the error with its exit status.
template <class Run>
int print_job_bench(const sdp::JobSources& sources, Run run) {
  try {
    require_job_spec(sources, "--config");
    std::cout << run(sdp::load_job_spec(sources, nullptr)) << std::flush;
    return 0;
  } catch (const CLI::RequiredError& e) {
    print_error(e.what());
    return static_cast<int>(ExitCode::kUsage);
  } catch (const sdp::Error& e) {
    print_error(e.what());
    return static_cast<int>(e.code());
  }
}

// No MPI: it reads files on this machine only. 0 when every record read, 2 at the first defect.
int run_data_inspect(const std::string& path, const sdp::InspectOptions& options) {
  try {
    const sdp::DataInspection inspection = sdp::inspect_data(path, options);
    std::cout << sdp::format_inspection(inspection) << std::flush;
    if (inspection.bad_message.empty()) return 0;
    print_error(inspection.bad_message);
    return static_cast<int>(ExitCode::kUsage);
  } catch (const sdp::Error& e) {
    print_error(e.what());
    return static_cast<int>(e.code());
  }
}

// What `data convert` reads: a data set this build loads into memory.
struct ConvertSource {
  std::string from = "cifar10";  // mnist, cifar10, synthetic, libsvm
  std::string input;             // mnist, cifar10: their directory; libsvm: the file
  std::string split = "train";
  int64_t synthetic_samples = 2048;
};

// No MPI: one process writes the files.
int run_data_convert(const ConvertSource& source, const sdp::ConvertOptions& options) {
  try {
    if (source.from == "libsvm") {
      if (source.input.empty()) throw sdp::InputError("data convert: --input must name the LibSVM file");
      const sdp::ConvertResult result = sdp::convert_libsvm(source.input, options);
      std::printf("converted %lld LibSVM samples into %d tfrecord files under %s (%d fields, %lld rows padded, "
                  "%.1f MB of Examples)\n",
                  static_cast<long long>(result.samples), result.files, options.output.c_str(), result.fields,
                  static_cast<long long>(result.padded), result.bytes / 1e6);
      return 0;
    }
    const sdp::Split split = source.split == "test" ? sdp::Split::kTest : sdp::Split::kTrain;
    if (source.from != "synthetic" && source.input.empty())
      throw sdp::InputError("data convert: --input must name the " + source.from + " directory");
    sdp::Dataset dataset;
    if (source.from == "mnist") {
      dataset = sdp::load_mnist(source.input, split);
    } else if (source.from == "cifar10") {
      dataset = sdp::load_cifar10(source.input, split);
    } else {
      sdp::SyntheticSpec spec;  // colour 32 x 32, CIFAR's shape
      spec.channels = 3;
      spec.height = spec.width = 32;
      spec.count = source.synthetic_samples;
      dataset = sdp::make_synthetic(spec, split);
    }
    const sdp::ConvertResult result = sdp::convert_dataset(dataset, options);
    std::printf("converted %lld %s samples into %d %s under %s (%.1f MB of JPEG, quality %d)\n",
                static_cast<long long>(result.samples), dataset.name.c_str(), result.files,
                options.format == "image-folder" ? "class folders" : (options.format + " files").c_str(),
                options.output.c_str(), result.bytes / 1e6, options.quality);
    return 0;
  } catch (const sdp::Error& e) {
    print_error(e.what());
    return static_cast<int>(e.code());
  }
}

int run_evaluate(const sdp::JobSources& sources, const std::string& model_path, bool per_class) {
  sdp::JobSetup setup = sdp::set_up_job(sources);
  if (sdp::is_ctr_model(setup.spec.model.name))
    sdp::evaluate_ctr_model(setup, model_path);
  else
    sdp::evaluate_model_file(setup, model_path, per_class);
  return 0;
}

int run_predict(const sdp::JobSources& sources, const std::string& model_path, const std::string& input,
                const std::string& output) {
  sdp::JobSetup setup = sdp::set_up_job(sources);
  if (!sdp::is_ctr_model(setup.spec.model.name))
    throw sdp::InputError("predict scores the CTR models (model.name: deepfm, fm or lr), not " +
                          setup.spec.model.name + ": use `sdp-train evaluate` for an image model");
  sdp::predict_ctr(setup, model_path, input.empty() ? setup.spec.data.test : input, output);
  return 0;
}

int run_train(const sdp::JobSources& sources) {
  sdp::JobSetup setup = sdp::set_up_job(sources);
  std::string plan = sdp::describe_plan(setup);
  if (setup.world->rank() == 0) std::cout << plan << std::flush;
  if (sdp::is_ctr_model(setup.spec.model.name))
    sdp::train_ctr(setup);
  else
    sdp::train(setup);
  return 0;
}

// `sdp-train --version`: the program, then each library it runs on with the version it
// loaded and the file that came from, so that an image or a cluster's modules can be checked
// for the libraries a job really uses.
std::string version_text() {
  std::ostringstream out;
  out << "sdp-train " << SDP_VERSION << " (CUDA backend: " << (sdp::cuda_backend_built() ? "built" : "not built")
      << ")";
  out << "\n  "
      << sdp::version_and_file(sdp::mpi_library_version(), reinterpret_cast<const void*>(&MPI_Get_library_version));
  const auto line = [&out](const char* name, const std::string& version) {
    if (!version.empty()) out << "\n  " << name << " " << version;
  };
  line("oneDNN", sdp::nn::onednn_version());
  line("CPU kernels", sdp::cpu_kernel_isa_summary());
  if (sdp::cuda_backend_built()) {
    line("CUDA runtime", sdp::cuda_runtime_version());
    const std::string driver = sdp::cuda_driver_version();
    line("CUDA driver", driver.empty() ? "none (" + sdp::cuda_unavailable_reason() + ")" : driver);
    line("cuDNN", sdp::nn::cudnn_version());
    line("cuBLAS", sdp::nn::cublas_version());
    line("NCCL", sdp::nccl_version());
    const sdp::NvjpegStatus& nvjpeg = sdp::nvjpeg_status();
    line("nvJPEG", nvjpeg.available ? nvjpeg.version + " (" + nvjpeg.path + ")" : "not loaded: " + nvjpeg.reason);
  }
  return out.str();
}

// libgomp (oneDNN's thread pool) reads OMP_WAIT_POLICY once, when it is loaded, before
// main(). Spinning between parallel regions suits a training step of many short kernels:
// measured on 2 cores, quickstart MLP 45k vs 35k images/s (active vs passive), LeNet-5
// 12.4k vs 10.9k; with another process on the cores the default policy collapsed to ~400
// images/s. But when the ranks of a machine ask for more threads than it has cores,
// spinning threads steal the cores the working ones need (LeNet-5 on 2 ranks x 2 threads,
// 2 cores: 45k -> 4.5k images/s), and passive is the policy that does not spin. So unless
// the user chose a policy, start once more with the right one set, before MPI or any
// thread exists.
void reexec_with_omp_wait_policy(char** argv, int requested_threads) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // The resolved path, not /proc/self/exe itself, so ps and top still say "sdp-train".
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  const bool oversubscribed = sdp::threads_oversubscribe_before_mpi(requested_threads);
  ::setenv("OMP_WAIT_POLICY", oversubscribed ? "passive" : "active", 1);
  ::execv(self, argv);  // returns only on failure: then run as we are
}

// What the command line says, filled in by CLI11: the commands, each one's job sources, and
// the benchmarks' and evaluate's own options.
struct CommandLine {
  CLI::App app{"sdp-train: synchronous data-parallel training of convolutional networks, "
               "launched by MPI (one process per GPU or CPU share)."};
  sdp::JobSources top_sources, train_sources, validate_sources, env_sources, bench_sources, evaluate_sources,
      plan_sources, predict_sources;
  CLI::App *train = nullptr, *validate = nullptr, *bench_gemm = nullptr, *bench_allreduce = nullptr,
           *evaluate = nullptr, *env = nullptr, *data_inspect = nullptr, *data_convert = nullptr,
           *bench_data = nullptr, *bench_layers = nullptr, *bench_checkpoint = nullptr, *plan = nullptr,
           *predict = nullptr;
  sdp::PlanCommandOptions plan_options;
  sdp::JobSources bench_data_sources, bench_layers_sources, bench_checkpoint_sources;
  sdp::CheckpointBenchOptions checkpoint_bench_options;
  sdp::LayerBenchOptions layer_bench_options;
  std::vector<int> bench_data_workers{1, 2};
  int64_t bench_data_batches = 50;
  ConvertSource convert_source;
  sdp::ConvertOptions convert_options;
  std::string inspect_path;
  sdp::InspectOptions inspect_options;
  int gemm_size = 2048, gemm_threads = 0;
  sdp::AllreduceBenchOptions allreduce_options;
  std::string algorithms_csv, compression = "none", bench_device = "cpu", evaluate_model;
  bool evaluate_per_class = false;
  std::string predict_model, predict_input, predict_output = "-";

  // The job of the command that runs one (train, evaluate, validate, env, bench layers, or none:
  // train), or null (the other benchmarks).
  const sdp::JobSources* job() const {
    return train->parsed()                 ? &train_sources
           : evaluate->parsed()            ? &evaluate_sources
           : predict->parsed()             ? &predict_sources
           : validate->parsed()            ? &validate_sources
           : env->parsed()                 ? &env_sources
           : bench_layers->parsed()        ? &bench_layers_sources
           : plan->parsed()                ? &plan_sources
           : app.get_subcommands().empty() ? &top_sources
                                           : nullptr;
  }
};

// `sdp-train plan` (docs/guides/plan.md).
void declare_plan(CommandLine& cl) {
  cl.plan = cl.app.add_subcommand(
      "plan", "predict the job's step time, images/s, scaling, best AllReduce and bucket size, and cost on N nodes");
  CLI::App& plan = *cl.plan;
  sdp::PlanCommandOptions& o = cl.plan_options;
  add_job_options(plan, cl.plan_sources);
  plan.add_option("--nodes", o.nodes, "node counts, comma-separated (default 1,2,4,8)");
  plan.add_option("--gpus-per-node,--ranks-per-node", o.gpus_per_node,
                  "ranks per node (default: the instance's GPUs, else the calibration's, else this launch's)")
      ->check(kPositive);
  plan.add_option("--instance", o.instance, "an instance type of configs/plan/instances.yaml (network, GPUs, price)");
  plan.add_option("--instances", o.instances_file, "the instance table (default: configs/plan/instances.yaml; $SDP_INSTANCES)");
  plan.add_option("--link-gbps", o.link_gbps, "the link between nodes, Gbit/s each way (instead of the instance's)");
  plan.add_option("--link-latency-us", o.link_latency_us, "one message's one-way latency, microseconds");
  plan.add_option("--compute", o.compute, "measured (this machine, every rank of this launch at once) or a FILE "
                                           "written by --save-compute");
  plan.add_option("--save-compute", o.save_compute, "write the measured step to FILE (for plans made elsewhere)");
  plan.add_option("--calibration", o.calibration, "a calibration FILE made by --calibrate");
  plan.add_option("--calibrate", o.calibrate,
                  "measure this launch's link and node AllReduce, write them to FILE, and stop (run under mpirun "
                  "over 2 nodes or more)");
  plan.add_option("--bucket-mb", o.buckets, "bucket sizes to try, MB (0 = one bucket; default 1,5,10,25,50,100,0)");
  plan.add_option("--algorithms", o.algorithms, "algorithms to try (default flat,ring,hierarchical)");
  plan.add_option("--samples-per-epoch", o.samples_per_epoch, "instead of the job's training set size")
      ->check(kPositive);
  plan.add_option("--steps", o.steps, "measured steps (default 10)")->check(kPositive);
  plan.add_option("--warmup", o.warmup, "untimed steps first (default 3)")->check(kNonNegative);
  plan.add_flag("--json", o.json, "print the plan as JSON");
}

void declare_commands(CommandLine& cl) {
  CLI::App& app = cl.app;
  app.name("sdp-train");
  app.footer(
      "Examples:\n"
      "  sdp-train --config configs/quickstart.yaml                 train on one rank\n"
      "  mpirun -np 2 sdp-train --config configs/lenet-mnist.yaml   train on 2 ranks\n"
      "  sdp-train validate --config job.yaml --set optimizer.lr=0.1\n"
      "  sdp-train evaluate --config job.yaml --model out/model/model.safetensors\n"
      "  mpirun -np 4 sdp-train env --set distributed.ranks_per_node=2\n"
      "  sdp-train plan --config job.yaml --nodes 1,2,4,8 --instance p4d.24xlarge\n"
      "Exit status: 0 ok, 1 runtime failure, 2 bad input, 3 watchdog timeout.");
  app.set_version_flag("--version", std::function<std::string()>(version_text));
  app.require_subcommand(0, 1);
  add_job_options(app, cl.top_sources);
  cl.train = app.add_subcommand("train", "train the job (the default when no command is given)");
  add_job_options(*cl.train, cl.train_sources);
  cl.validate = app.add_subcommand("validate", "print the fully resolved job and the plan, then exit");
  add_job_options(*cl.validate, cl.validate_sources);
  auto* bench = app.add_subcommand("bench", "micro-benchmarks (see scripts/bench-*.sh for full comparisons)");
  bench->require_subcommand(1);
  cl.bench_data = bench->add_subcommand("data", "the job's input side alone: images/s per decoding worker count");
  add_job_options(*cl.bench_data, cl.bench_data_sources);
  cl.bench_data->add_option("--workers", cl.bench_data_workers, "worker counts to time (default 1 2)")->delimiter(',');
  cl.bench_data->add_option("--batches", cl.bench_data_batches, "timed batches per row")->check(kPositive);
  cl.bench_layers = bench->add_subcommand(
      "layers", "the job's training step layer by layer: forward and backward time of each layer on its device");
  add_job_options(*cl.bench_layers, cl.bench_layers_sources);
  cl.bench_layers->add_option("--steps", cl.layer_bench_options.steps, "timed steps (default 20)")
      ->check(kPositive);
  cl.bench_layers->add_option("--warmup", cl.layer_bench_options.warmup, "untimed steps first (default 3)")
      ->check(kNonNegative);
  cl.bench_checkpoint = bench->add_subcommand(
      "checkpoint", "one checkpoint of the job's model and optimizer state: write and read time on this disk");
  add_job_options(*cl.bench_checkpoint, cl.bench_checkpoint_sources);
  cl.bench_checkpoint->add_option("--repeat", cl.checkpoint_bench_options.repeat, "timed writes and reads (default 5)")
      ->check(kPositive);
  cl.bench_checkpoint->add_option("--dir", cl.checkpoint_bench_options.dir,
                                  "where to write (default: a new directory under the temp dir, removed after)");
  cl.bench_gemm = bench->add_subcommand("gemm", "oneDNN sgemm GFLOP/s: the machine's practical fp32 peak");
  cl.bench_gemm->add_option("--size", cl.gemm_size, "matrix size n (n x n x n)")->check(kPositive);
  cl.bench_gemm->add_option("--threads", cl.gemm_threads, "threads (default: all cores)")->check(kNonNegative);
  CLI::App* allreduce = bench->add_subcommand(
      "allreduce", "AllReduce busbw of every algorithm next to MPI_Allreduce (nccl-tests table; run under mpirun)");
  cl.bench_allreduce = allreduce;
  sdp::AllreduceBenchOptions& options = cl.allreduce_options;
  add_job_options(*allreduce, cl.bench_sources);
  allreduce->add_option("--min-bytes", options.min_bytes, "smallest message")->check(kPositive);
  allreduce->add_option("--max-bytes", options.max_bytes, "largest message")->check(kPositive);
  allreduce->add_option("--factor", options.factor, "size step between rows")->check(CLI::Range(2, 1024));
  allreduce->add_option("--iters", options.iters, "timed iterations per row")->check(kPositive);
  allreduce->add_option("--warmup", options.warmup, "untimed iterations per row")->check(kNonNegative);
  allreduce->add_option("--algorithms", cl.algorithms_csv, "comma-separated subset of mpi,flat,ring,hierarchical,auto");
  allreduce->add_option("--compression", cl.compression, "none | fp16 | bf16 (auto = none here)")
      ->check(CLI::IsMember(sdp::choice_names<sdp::Compression>()));
  allreduce->add_option("--device", cl.bench_device,
                        "cpu (host buffers, MPI) | cuda (GPU buffers of each rank's GPU, NCCL; peer: ncclAllReduce)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  allreduce->add_flag("!--no-shared-memory", options.shared_memory, "keep buffers in private memory (no node-shared window)");
  cl.evaluate = app.add_subcommand(
      "evaluate", "test loss and accuracy of a saved model (final model or checkpoint) on the job's test data");
  add_job_options(*cl.evaluate, cl.evaluate_sources);
  cl.evaluate->add_option("--model", cl.evaluate_model, "model.safetensors or a checkpoint file")->required();
  cl.evaluate->add_flag("--per-class", cl.evaluate_per_class,
                        "also print each class's samples and accuracy (with the class names an image-folder model carries)");
  cl.predict = app.add_subcommand(
      "predict", "a CTR model's click probability for each sample of a file, one a line, in order (docs/ctr.md)");
  add_job_options(*cl.predict, cl.predict_sources);
  cl.predict->add_option("--model", cl.predict_model, "model.safetensors or a checkpoint file")->required();
  cl.predict->add_option("--input", cl.predict_input,
                         "the samples to score, in the job's data.format (default: the job's data.test)");
  cl.predict->add_option("--output", cl.predict_output, "where the probabilities go (default -: stdout)");
  declare_plan(cl);
  cl.env = app.add_subcommand("env", "print ranks, topology, devices and the SageMaker cluster as JSON");
  add_job_options(*cl.env, cl.env_sources);
  auto* data = app.add_subcommand("data", "tools for data sets");
  data->require_subcommand(1);
  cl.data_inspect = data->add_subcommand(
      "inspect", "read every record of a TFRecord or tar-shard data set: records, labels, the first bad record; "
                 "list an image folder's classes with their labels and image counts; sum up CTR samples "
                 "(LibSVM, TFRecord of label, ids, values): fields, ids, labels");
  CLI::App& inspect = *cl.data_inspect;
  inspect.add_option("path", cl.inspect_path, "a data file, a directory of shards, or an image folder")->required();
  inspect.add_option("--format", cl.inspect_options.format,
                     "auto, tfrecord, tar-shards, image-folder, libsvm or ctr-tfrecord (label, ids, values)")
      ->check(CLI::IsMember({"auto", "tfrecord", "tar-shards", "image-folder", "libsvm", "ctr-tfrecord"}));
  inspect.add_option("--image-key", cl.inspect_options.image_key, "tfrecord: the Example's encoded image");
  inspect.add_option("--label-key", cl.inspect_options.label_key,
                     "tfrecord: the Example's int64 label (ctr-tfrecord: default label)");
  inspect.add_option("--ids-key", cl.inspect_options.ids_key, "ctr-tfrecord: the Example's int64 ids");
  inspect.add_option("--values-key", cl.inspect_options.values_key, "ctr-tfrecord: the Example's float values");
  inspect.add_option("--max-records", cl.inspect_options.max_records, "stop after this many (0: all)")
      ->check(kNonNegative);
  cl.data_convert = data->add_subcommand(
      "convert", "write MNIST, CIFAR-10 or the synthetic set as JPEGs: TFRecord shards, an image folder or tar shards; "
                 "or a LibSVM file of CTR samples as TFRecord shards of label, ids, values");
  CLI::App& convert = *cl.data_convert;
  convert.add_option("--from", cl.convert_source.from, "mnist, cifar10, synthetic (colour 32 x 32) or libsvm")
      ->check(CLI::IsMember({"mnist", "cifar10", "synthetic", "libsvm"}));
  convert.add_option("--input", cl.convert_source.input, "the mnist or cifar10 directory, or the LibSVM file");
  convert.add_option("--split", cl.convert_source.split, "train or test")->check(CLI::IsMember({"train", "test"}));
  convert.add_option("--synthetic-samples", cl.convert_source.synthetic_samples, "synthetic: how many")
      ->check(kPositive);
  convert.add_option("--output", cl.convert_options.output, "the directory to write")->required();
  convert.add_option("--format", cl.convert_options.format, "tfrecord, image-folder or tar-shards")
      ->check(CLI::IsMember({"tfrecord", "image-folder", "tar-shards"}));
  convert.add_option("--prefix", cl.convert_options.prefix, "shard file names start with this");
  convert.add_option("--shards", cl.convert_options.shards, "tfrecord, tar-shards: how many files")
      ->check(kPositive);
  convert.add_option("--quality", cl.convert_options.quality, "JPEG quality 1-100")->check(CLI::Range(1, 100));
  convert.add_flag("--full-chroma", cl.convert_options.full_chroma,
                   "colour at full resolution (4:4:4) instead of 4:2:0: for tiny images such as CIFAR's");
  convert.add_option("--resize", cl.convert_options.resize, "colour: scale the shorter side to this (0: keep)")
      ->check(kNonNegative);
  convert.add_option("--limit", cl.convert_options.limit, "the first N samples only (0: all)")
      ->check(kNonNegative);
  convert.add_option("--fields", cl.convert_options.fields,
                     "libsvm: ids per Example, short rows padded (0: the longest row of the input)")
      ->check(kNonNegative);
}

// Parses the command line; an exit status when there is nothing to run (--help, --version, a
// usage error, printed by the launcher's first rank only).
std::optional<int> parse_command_line(CommandLine& cl, int argc, char** argv) {
  const int pre_mpi_rank = sdp::launcher_rank();
  try {
    cl.app.parse(argc, argv);
    if (cl.app.get_subcommands().empty())
      require_job_spec(cl.top_sources, "--config (or a command: train, validate, evaluate, env)");
    if (cl.train->parsed()) require_job_spec(cl.train_sources, "--config");
    if (cl.validate->parsed()) require_job_spec(cl.validate_sources, "--config");
    if (cl.evaluate->parsed() && cl.evaluate_sources.config_path.empty()) throw CLI::RequiredError("--config");
    if (cl.predict->parsed() && cl.predict_sources.config_path.empty()) throw CLI::RequiredError("--config");
    if (cl.bench_layers->parsed()) require_job_spec(cl.bench_layers_sources, "--config");
    if (cl.plan->parsed()) require_job_spec(cl.plan_sources, "--config");
  } catch (const CLI::Success& e) {  // --help, --version
    if (pre_mpi_rank <= 0) cl.app.exit(e);
    return 0;
  } catch (const CLI::ParseError& e) {
    set_failure_file_for(sdp::JobSources{});  // the command line did not say: SageMaker's own files
    if (pre_mpi_rank <= 0) print_error(std::string(e.what()) + " (run `sdp-train --help` for usage)");
    return static_cast<int>(ExitCode::kUsage);
  }
  return std::nullopt;
}

// The command, inside MPI; every error becomes the exit status it carries.
int run_under_mpi(CommandLine& cl, int* argc, char*** argv) {
  int exit_code = 0;
  try {
    sdp::init_mpi(argc, argv);
    if (cl.bench_allreduce->parsed()) {
      // CLI11 has checked the word; this cannot throw. auto follows the job's precision; a
      // benchmark has none: f32.
      cl.allreduce_options.compression =
          sdp::resolve_compression(sdp::parse_choice<sdp::Compression>(cl.compression), sdp::Precision::kFp32);
      exit_code = run_bench_allreduce(cl.bench_sources, cl.allreduce_options, cl.algorithms_csv, cl.bench_device);
    } else if (cl.bench_layers->parsed()) {
      exit_code = run_bench_layers(cl.bench_layers_sources, cl.layer_bench_options);
    } else if (cl.plan->parsed()) {
      exit_code = run_plan(cl.plan_sources, cl.plan_options);
    } else if (cl.validate->parsed()) {
      exit_code = run_validate(cl.validate_sources);
    } else if (cl.env->parsed()) {
      exit_code = run_env(cl.env_sources);
    } else if (cl.evaluate->parsed()) {
      exit_code = run_evaluate(cl.evaluate_sources, cl.evaluate_model, cl.evaluate_per_class);
    } else if (cl.predict->parsed()) {
      exit_code = run_predict(cl.predict_sources, cl.predict_model, cl.predict_input, cl.predict_output);
    } else {
      exit_code = run_train(cl.train->parsed() ? cl.train_sources : cl.top_sources);
    }
  } catch (const sdp::Error& e) {
    exit_code = static_cast<int>(e.code());
    if (const auto* agreed = dynamic_cast<const sdp::CollectiveFailure*>(&e)) {
      // Every rank got here together: report once, then leave MPI in order.
      if (agreed->report_here()) print_error(e.what());
    } else {
      fail_this_rank(exit_code, e.what());
    }
  } catch (const std::exception& e) {
    // Not an sdp::Error: a broken internal contract or the system (bad_alloc).
    exit_code = static_cast<int>(ExitCode::kRuntime);
    fail_this_rank(exit_code, e.what());
  }
  sdp::finalize_mpi();
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CommandLine cl;
  declare_commands(cl);
  if (const std::optional<int> done = parse_command_line(cl, argc, argv)) return *done;
  // Training takes SIGTERM and SIGINT on a watcher thread (train/interruption.hpp): blocked
  // here, before MPI and OpenMP start threads, so that every thread inherits the mask.
  if (cl.train->parsed() || cl.app.get_subcommands().empty()) sdp::block_interruption_signals();
  // Every rank checks it before MPI starts, so a bad value ends each one alike.
  if (const std::string isa_error = sdp::cpu_isa_override_error(); !isa_error.empty()) {
    std::fprintf(stderr, "sdp-train: error: %s\n", isa_error.c_str());
    return 2;
  }
  // validate and env too, so that the plan they print is the one training would run.
  const sdp::JobSources* job = cl.job();
  set_failure_file_for(job ? *job : sdp::JobSources{});
  reexec_with_omp_wait_policy(argv, job ? sdp::requested_threads_before_mpi(*job) : 0);
  if (cl.data_inspect->parsed()) return run_data_inspect(cl.inspect_path, cl.inspect_options);
  if (cl.data_convert->parsed()) return run_data_convert(cl.convert_source, cl.convert_options);
  if (cl.bench_data->parsed())
    return print_job_bench(cl.bench_data_sources, [&](const sdp::JobSpec& spec) {
      return sdp::format_data_bench(sdp::run_data_benchmark(spec, cl.bench_data_workers, cl.bench_data_batches), spec);
    });
  if (cl.bench_checkpoint->parsed())
    return print_job_bench(cl.bench_checkpoint_sources, [&](const sdp::JobSpec& spec) {
      return sdp::format_checkpoint_bench(sdp::run_checkpoint_benchmark(spec, cl.checkpoint_bench_options));
    });
  if (cl.bench_gemm->parsed()) {
    sdp::nn::set_num_threads(cl.gemm_threads > 0 ? cl.gemm_threads : sdp::cpu_core_count());
    const double gflops = sdp::nn::measure_sgemm_gflops(cl.gemm_size);
    std::printf("sgemm n=%d threads=%d gflops=%.1f\n", cl.gemm_size, sdp::nn::num_threads(), gflops);
    return 0;
  }
  return run_under_mpi(cl, &argc, &argv);
}
