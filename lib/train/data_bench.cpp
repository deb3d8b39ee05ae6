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
    NvjpegPhaseTotals nvjpeg_before;
    auto start = std::chrono::steady_clock::now();
    loader->start_epoch(epoch);
    while (taken < warmup + batches) {
      const Batch* batch = loader->next();
      if (batch == nullptr) {
        loader->start_epoch(++epoch);
        continue;
      }
      if (++taken == warmup) {
        start = std::chrono::steady_clock::now();
        nvjpeg_before = nvjpeg_phase_totals();
      }
      if (taken > warmup) images += batch->size();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const NvjpegPhaseTotals after = nvjpeg_phase_totals();
    NvjpegPhaseTotals nvjpeg;
    nvjpeg.inspect_s = after.inspect_s - nvjpeg_before.inspect_s;
    nvjpeg.decode_call_s = after.decode_call_s - nvjpeg_before.decode_call_s;
    nvjpeg.queue_s = after.queue_s - nvjpeg_before.queue_s;
    nvjpeg.wait_s = after.wait_s - nvjpeg_before.wait_s;
    nvjpeg.batches = after.batches - nvjpeg_before.batches;
    nvjpeg.images = after.images - nvjpeg_before.images;
    rows.push_back({to_string(spec.data.format), w, images, seconds, images / seconds, nvjpeg});
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
  // The GPU decoder's thread, per batch: what of the batch's time is its, and which part.
  for (const DataBenchRow& r : rows) {
    const NvjpegPhaseTotals& n = r.nvjpeg;
    if (n.batches <= 0 || r.images <= 0) continue;
    const double per_batch = 1e3 / static_cast<double>(n.batches);
    char line[400];
    std::snprintf(line, sizeof line,
                  "# nvJPEG thread, %d worker(s), per batch of %.0f images: headers and support %.2f ms, decode call "
                  "%.2f ms, kernels and copies queued %.2f ms, waiting for the device %.2f ms; a batch every %.2f ms\n",
                  r.workers, static_cast<double>(n.images) / static_cast<double>(n.batches), n.inspect_s * per_batch,
                  n.decode_call_s * per_batch, n.queue_s * per_batch, n.wait_s * per_batch,
                  1e3 * r.seconds * static_cast<double>(spec.data.batch_size) / static_cast<double>(r.images));
    out << line;
  }
  return out.str();
}

}  // namespace sdp
