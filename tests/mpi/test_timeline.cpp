// output.timeline end to end in one job (2 ranks, synthetic data, a few steps): every rank's
// own trace and rank 0's merged trace parse as JSON, name every phase, carry both ranks
// (pid), and each step's allreduce events add up to the whole gradient arena per rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "distributed/collectives.hpp"
#include "obs/timeline.hpp"
#include "train/job_setup.hpp"
#include "train/trainer.hpp"

namespace sdp {
namespace {

constexpr int64_t kSteps = 6;

nlohmann::json parse_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "no file " << path;
  return nlohmann::json::parse(in);
}

// Checks one trace holding the ranks `pids`.
void check_trace(const nlohmann::json& trace, const std::set<int>& pids) {
  const int64_t gradient_bytes = trace["otherData"]["gradient_bytes"];
  EXPECT_GT(gradient_bytes, 0);
  EXPECT_GE(trace["otherData"]["buckets"].get<int>(), 2) << "bucket_mb should split the model";
  std::set<int> seen_pids;
  std::map<int, std::set<std::string>> names;        // per pid
  std::map<std::pair<int, int64_t>, int64_t> bytes;  // per (pid, step)
  std::map<int, int> steps;                          // "step" events per pid
  // Per (pid, tid), the ends of the open enclosing events: in file order every event must
  // lie inside or after each of them (a viewer nests events; a partial overlap breaks it).
  std::map<std::pair<int, int>, std::vector<double>> open;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid")) << e;
    seen_pids.insert(e["pid"].get<int>());
    if (e["ph"] != "X") continue;
    const int pid = e["pid"];
    names[pid].insert(e["name"].get<std::string>());
    EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
    const double begin = e["ts"], end = begin + e["dur"].get<double>();
    std::vector<double>& stack = open[{pid, e["tid"].get<int>()}];
    while (!stack.empty() && stack.back() <= begin) stack.pop_back();
    if (!stack.empty()) EXPECT_LE(end, stack.back() + 1e-3) << "overlaps its parent: " << e;
    stack.push_back(end);
    if (e["name"] == "step") ++steps[pid];
    if (e["name"] == "allreduce") {
      EXPECT_EQ(e["tid"], static_cast<int>(TraceTrack::kComm)) << e;
      bytes[{pid, e["args"]["step"].get<int64_t>()}] += e["args"]["bytes"].get<int64_t>();
    } else {
      EXPECT_EQ(e["tid"], static_cast<int>(TraceTrack::kMain)) << e;
    }
  }
  EXPECT_EQ(seen_pids, pids);
  for (int pid : pids) {
    for (const char* phase : {"step", "data_wait", "forward", "backward", "gradient_wait",
                              "optimizer", "allreduce", "evaluation", "checkpoint"})
      EXPECT_TRUE(names[pid].count(phase)) << "rank " << pid << " has no " << phase << " event";
    EXPECT_EQ(steps[pid], kSteps) << "rank " << pid;
    for (int64_t step = 0; step < kSteps; ++step)
      EXPECT_EQ((bytes[{pid, step}]), gradient_bytes) << "rank " << pid << " step " << step;
  }
}

TEST(Timeline, PerRankAndMergedTracesOfATrainingRun) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string dir = broadcast_string(
      MPI_COMM_WORLD,
      (std::filesystem::temp_directory_path() / ("sdp-mpi-timeline-" + std::to_string(::getpid())))
          .string());
  JobSources sources;
  sources.overrides = {"threads=1",
                       "model.name=mlp",
                       "model.hidden=[64, 64]",
                       "data.format=synthetic",
                       "data.batch_size=16",
                       "data.synthetic.train_samples=512",
                       "data.synthetic.test_samples=64",
                       "data.synthetic.channels=1",
                       "data.synthetic.height=8",
                       "data.synthetic.width=8",
                       "train.max_steps=" + std::to_string(kSteps),
                       "train.log_every=1000",
                       "distributed.bucket_mb=0.01",
                       "checkpoint.every_steps=3",
                       "checkpoint.dir=" + dir + "/ckpt",
                       "output.model_dir=" + dir + "/model",
                       "output.metrics=",
                       "output.progress=lines",
                       "output.timeline=" + dir + "/timeline.json"};
  JobSetup setup = set_up_job(sources);
  const TrainResult result = train(setup);
  EXPECT_EQ(result.steps, kSteps);

  // Every rank's own file is on disk when train() returns on any rank.
  check_trace(parse_file(rank_trace_path(dir + "/timeline.json", rank)), {rank});
  if (rank == 0) {
    std::set<int> all;
    for (int r = 0; r < size; ++r) all.insert(r);
    check_trace(parse_file(dir + "/timeline.json"), all);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sdp
