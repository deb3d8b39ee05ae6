#include "train/checkpoint_bench.hpp"

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/crc32c.hpp"
#include "io/checkpoint.hpp"
#include "nn/layer_profile.hpp"
#include "train/checkpointing.hpp"
#include "train/training_setup.hpp"

namespace sdp {

namespace fs = std::filesystem;

CheckpointBenchResult run_checkpoint_benchmark(const JobSpec& spec, const CheckpointBenchOptions& options) {
  if (options.repeat < 1) throw InputError("bench checkpoint: --repeat must be >= 1");
  const DataSplits data = load_data(spec);
  std::unique_ptr<nn::Model> model = build_model(spec, *data.train, Device::cpu());
  std::unique_ptr<Optimizer> optimizer = make_optimizer(optimizer_options(spec.optimizer), model->store());

  // A directory of its own inside the one given: the checkpoints already there (keep_last
  // counts them) are neither pruned nor in the way.
  const fs::path parent = options.dir.empty() ? fs::temp_directory_path() : fs::path(options.dir);
  std::error_code ec;
  fs::create_directories(parent, ec);
  std::string dir = (parent / "sdp-bench-checkpoint-XXXXXX").string();
  if (ec || mkdtemp(dir.data()) == nullptr)
    throw RuntimeError("bench checkpoint: cannot create a directory in '" + parent.string() + "'");
  CheckpointSnapshot snapshot;
  snapshot.dir = dir;
  snapshot.keep_last = 1;  // each write replaces the one before: the disk holds one file
  snapshot.metadata = {{"format", kCheckpointFormat}, {"step", "0"}, {"model", spec.model.name}};
  for (const ArenaViews& group : state_groups(*model, *optimizer)) add_to_snapshot(snapshot, group);

  CheckpointBenchResult result;
  result.model = spec.model.name;
  result.optimizer = optimizer->name();
  result.dir = dir;
  result.tensors = static_cast<int64_t>(snapshot.tensors.size());
  result.repeat = options.repeat;
  std::vector<double> writes, reads, checksums;
  try {
    for (int64_t i = 0; i < options.repeat; ++i) {
      snapshot.step = i + 1;
      auto start = std::chrono::steady_clock::now();
      const std::string path = write_checkpoint(snapshot);
      writes.push_back(seconds_since(start));
      result.bytes = static_cast<int64_t>(fs::file_size(path));
      start = std::chrono::steady_clock::now();
      const Checkpoint back = read_checkpoint(path);
      reads.push_back(seconds_since(start));
      start = std::chrono::steady_clock::now();
      [[maybe_unused]] volatile uint32_t crc = 0;  // volatile: the loop has no other effect to keep it
      for (const NamedTensor& t : back.tensors) crc = crc32c(t.tensor.raw(), t.tensor.nbytes());
      checksums.push_back(seconds_since(start));
    }
  } catch (...) {
    fs::remove_all(dir, ec);
    throw;
  }
  fs::remove_all(dir, ec);
  result.write_seconds = nn::median_seconds(writes);
  result.read_seconds = nn::median_seconds(reads);
  result.checksum_seconds = nn::median_seconds(checksums);
  return result;
}

std::string format_checkpoint_bench(const CheckpointBenchResult& r) {
  const double mb = static_cast<double>(r.bytes) / 1e6;
  auto row = [&](const char* what, double seconds) {
    char line[160];
    std::snprintf(line, sizeof line, "%-36s %10.1f %10.0f\n", what, seconds * 1e3, mb / seconds);
    return std::string(line);
  };
  std::ostringstream out;
  out << "# checkpoint of " << r.model << " (" << r.optimizer << " state): " << r.tensors << " tensors, "
      << r.bytes << " bytes, in " << r.dir << "; medians of " << r.repeat << "\n";
  char head[160];
  std::snprintf(head, sizeof head, "%-36s %10s %10s\n", "# operation", "ms", "MB/s");
  out << head << row("write (temp file, fsync, rename)", r.write_seconds)
      << row("read (every check of a resume)", r.read_seconds)
      << row("CRC-32C of every tensor", r.checksum_seconds);
  return out.str();
}

}  // namespace sdp
