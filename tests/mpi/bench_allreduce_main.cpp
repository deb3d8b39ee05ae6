// Stand-alone driver for sdp::run_allreduce_benchmark: the table of `sdp-train bench allreduce`
// from a test build without the CLI (scripts/bench-allreduce.sh uses it when a build dir has
// no sdp-train).
//   mpirun -np 2 sdp_bench_allreduce [--min-bytes B] [--max-bytes B] [--factor F] [--iters N]
//       [--warmup N] [--algorithms mpi,flat,ring,hierarchical,auto] [--compression none|fp16|bf16]
//       [--ranks-per-node R] [--no-shared-memory]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/choices.hpp"
#include "core/error.hpp"
#include "distributed/allreduce_bench.hpp"
#include "distributed/world.hpp"

int main(int argc, char** argv) {
  sdp::init_mpi(&argc, &argv);
  int status = 0;
  try {
    sdp::AllreduceBenchOptions options;
    sdp::TopologyOptions topology;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw sdp::InputError(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--min-bytes") options.min_bytes = std::stoll(next());
      else if (arg == "--max-bytes") options.max_bytes = std::stoll(next());
      else if (arg == "--factor") options.factor = std::stoll(next());
      else if (arg == "--iters") options.iters = std::stoi(next());
      else if (arg == "--warmup") options.warmup = std::stoi(next());
      else if (arg == "--compression") options.compression = sdp::parse_choice<sdp::Compression>(next());
      else if (arg == "--ranks-per-node") topology.ranks_per_node = std::stoi(next());
      else if (arg == "--no-shared-memory") options.shared_memory = false;
      else if (arg == "--algorithms") sdp::parse_bench_algorithms(next(), options);
      else throw sdp::InputError("unknown option " + arg);
    }
    sdp::World world = sdp::World::create(topology);
    const auto result = sdp::run_allreduce_benchmark(world, options);
    if (world.rank() == 0) std::fputs(sdp::format_allreduce_table(result).c_str(), stdout);
  } catch (const sdp::Error& e) {
    std::fprintf(stderr, "sdp-train: error: %s\n", e.what());
    status = static_cast<int>(e.code());
  }
  sdp::finalize_mpi();
  return status;
}
