#include "train/data_bench.hpp"

#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "data/loading/data_loader.hpp"
#include "train/training_setup.hpp"

namespace sdp {

std::vector<DataBenchRow> run_data_benchmark(const JobSpec& base, const std::vector<int>& workers, int64_t batches) {
  if (batches < 1) throw InputError("bench data: --batches must be >= 1");
  std::vector<DataBenchRow> rows;
  for (int w : workers) {
    if (w < 1) throw InputError("bench data: --workers takes counts >= 1, got " + std::to_string(w));
    JobSpec spec = base;
    spec.data.workers = w;
    // GPU decoding (data.decode: gpu, or auto with a GPU here) on the first GPU: this
    // benchmark runs without MPI.
    const bool gpu = spec.data.decode == DecodeChoice::kGpu ||
                     (spec.data.decode == DecodeChoice::kAuto && cuda_device_count() > 0);
    const DataSplits data = load_data(spec, {}, gpu ? Device::cuda(0) : Device::cpu());
    const auto loader = data.train->make_train_loader(train_loader_options(spec, 0, 1, Device::cpu()));
    // Two batches to warm the page cache and the decoders; then `batches` timed, across epochs.
    const int64_t warmup = 2;
    int64_t epoch = 0, taken = 0, images = 0;
    auto start = std::chrono::steady_clock::now();
    loader->start_epoch(epoch);
    while (taken < warmup + batches) {
      const Batch* batch = loader->next();
      if (batch == nullptr) {
        loader->start_epoch(++epoch);
        continue;
      }
      if (++taken == warmup) start = std::chrono::steady_clock::now();
      if (taken > warmup) images += batch->size();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rows.push_back({to_string(spec.data.format), w, images, seconds, images / seconds});
  }
  return rows;
}

std::string format_data_bench(const std::vector<DataBenchRow>& rows, const JobSpec& spec) {
  std::ostringstream out;
  out << "# bench data: " << to_string(spec.data.format) << " " << spec.data.train << ", batch "
      << spec.data.batch_size << ", prefetch " << spec.data.prefetch << ", image_size " << spec.data.image_size
      << ", augment " << to_string(spec.data.augment) << "\n";
  out << "format          workers     images   seconds   images/s\n";
  for (const DataBenchRow& r : rows) {
    char line[160];
    std::snprintf(line, sizeof line, "%-15s %7d %10lld %9.2f %10.0f\n", r.format.c_str(), r.workers,
                  static_cast<long long>(r.images), r.seconds, r.images_per_sec);
    out << line;
  }
  return out.str();
}

}  // namespace sdp
