// nvjpeg_offload.hpp with the CUDA backend. libnvjpeg.so.13 is dlopen'ed (as cuBLAS is,
// nn/cublas_on_demand_cuda.cpp): a machine without it runs every CPU path, and says why
// data.decode: gpu cannot run there.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/cuda_check_cuda.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/stream.hpp"
#include "data/images/copy_runs.hpp"
#include "data/images/nvjpeg_offload.hpp"
#include "data/images/window_resample_cuda.hpp"

#ifdef SDP_HAVE_NVJPEG_H
#include <nvjpeg.h>
#endif

namespace sdp {

#ifndef SDP_HAVE_NVJPEG_H

const NvjpegStatus& nvjpeg_status() {
  static const NvjpegStatus status{false, "", "",
                                   "this build found no nvjpeg.h (scripts/install-deps.sh installs PyPI's "
                                   "nvidia-nvjpeg; then configure again)"};
  return status;
}

std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device&, bool, const std::string&) {
  throw InputError("key 'data.decode': gpu needs nvJPEG, but " + nvjpeg_status().reason +
                   "; use data.decode: cpu or auto");
}

#else

namespace {

// The nvJPEG calls this file makes, resolved from the library once.
struct NvjpegApi {
  decltype(&nvjpegGetProperty) get_property = nullptr;
  decltype(&nvjpegCreateEx) create = nullptr;
  decltype(&nvjpegDestroy) destroy = nullptr;
  decltype(&nvjpegJpegStateCreate) state_create = nullptr;
  decltype(&nvjpegJpegStateDestroy) state_destroy = nullptr;
  decltype(&nvjpegGetImageInfo) image_info = nullptr;
  decltype(&nvjpegDecodeBatchedInitialize) batched_initialize = nullptr;
  decltype(&nvjpegDecodeBatched) decode_batched = nullptr;
  decltype(&nvjpegDecode) decode_one = nullptr;
  decltype(&nvjpegJpegStreamCreate) stream_create = nullptr;
  decltype(&nvjpegJpegStreamDestroy) stream_destroy = nullptr;
  decltype(&nvjpegJpegStreamParse) stream_parse = nullptr;
  decltype(&nvjpegDecodeBatchedSupported) batched_supported = nullptr;
  // Region decoding (data.decode_roi): optional, the rest works without them.
  decltype(&nvjpegDecodeParamsCreate) params_create = nullptr;
  decltype(&nvjpegDecodeParamsDestroy) params_destroy = nullptr;
  decltype(&nvjpegDecodeParamsSetOutputFormat) params_output = nullptr;
  decltype(&nvjpegDecodeParamsSetROI) params_roi = nullptr;
  decltype(&nvjpegDecodeBatchedSupportedEx) batched_supported_ex = nullptr;
  decltype(&nvjpegDecodeBatchedEx) decode_batched_ex = nullptr;
  bool regions() const {
    return params_create && params_destroy && params_output && params_roi && batched_supported_ex && decode_batched_ex;
  }
};

struct Loaded {
  NvjpegStatus status;
  NvjpegApi api;
};

const Loaded& loaded() {
  static const Loaded result = [] {
    Loaded l;
    void* handle = dlopen("libnvjpeg.so.13", RTLD_NOW | RTLD_LOCAL);
#ifdef SDP_NVJPEG_PATH
    if (handle == nullptr) handle = dlopen(SDP_NVJPEG_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
    if (handle == nullptr) {
      l.status.reason = std::string("libnvjpeg.so.13 was not found (") + dlerror() +
                        "; PyPI's nvidia-nvjpeg has it: add its nvidia/cu13/lib to LD_LIBRARY_PATH)";
      return l;
    }
    bool complete = true;
    auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      complete &= fn != nullptr;
    };
    NvjpegApi& a = l.api;
    resolve(a.get_property, "nvjpegGetProperty");
    resolve(a.create, "nvjpegCreateEx");
    resolve(a.destroy, "nvjpegDestroy");
    resolve(a.state_create, "nvjpegJpegStateCreate");
    resolve(a.state_destroy, "nvjpegJpegStateDestroy");
    resolve(a.image_info, "nvjpegGetImageInfo");
    resolve(a.batched_initialize, "nvjpegDecodeBatchedInitialize");
    resolve(a.decode_batched, "nvjpegDecodeBatched");
    resolve(a.decode_one, "nvjpegDecode");
    resolve(a.stream_create, "nvjpegJpegStreamCreate");
    resolve(a.stream_destroy, "nvjpegJpegStreamDestroy");
    resolve(a.stream_parse, "nvjpegJpegStreamParse");
    resolve(a.batched_supported, "nvjpegDecodeBatchedSupported");
    auto optional = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    };
    optional(a.params_create, "nvjpegDecodeParamsCreate");
    optional(a.params_destroy, "nvjpegDecodeParamsDestroy");
    optional(a.params_output, "nvjpegDecodeParamsSetOutputFormat");
    optional(a.params_roi, "nvjpegDecodeParamsSetROI");
    optional(a.batched_supported_ex, "nvjpegDecodeBatchedSupportedEx");
    optional(a.decode_batched_ex, "nvjpegDecodeBatchedEx");
    char path[4096] = {};
    if (dlinfo(handle, RTLD_DI_ORIGIN, path) == 0) l.status.path = std::string(path) + "/libnvjpeg.so.13";
    if (!complete) {
      l.status.reason = "libnvjpeg.so.13 (" + l.status.path + ") lacks a function sdp-train calls";
      return l;
    }
    int major = 0, minor = 0, patch = 0;
    a.get_property(MAJOR_VERSION, &major);
    a.get_property(MINOR_VERSION, &minor);
    a.get_property(PATCH_LEVEL, &patch);
    l.status.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    l.status.available = true;
    return l;
  }();
  return result;
}

void check_nvjpeg(nvjpegStatus_t status, const char* call) {
  if (status != NVJPEG_STATUS_SUCCESS)
    throw RuntimeError(std::string("nvJPEG: ") + call + " failed with status " + std::to_string(static_cast<int>(status)));
}

class NvjpegOffload : public JpegOffload {
 public:
  NvjpegOffload(const Device& device, bool decode_regions, const std::string& backend_choice) : device_(device) {
    const NvjpegApi& a = loaded().api;
    check_cuda(cudaSetDevice(device.index), "cudaSetDevice", "nvJPEG offload");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    // auto: the hardware decoder where there is one (A100, H100), else the GPU-assisted backend.
    std::vector<nvjpegBackend_t> candidates = {NVJPEG_BACKEND_HARDWARE, NVJPEG_BACKEND_GPU_HYBRID,
                                               NVJPEG_BACKEND_DEFAULT};
    if (backend_choice == "hardware") candidates = {NVJPEG_BACKEND_HARDWARE};
    if (backend_choice == "gpu_hybrid") candidates = {NVJPEG_BACKEND_GPU_HYBRID};
    if (backend_choice == "nvjpeg_default") candidates = {NVJPEG_BACKEND_DEFAULT};
    for (nvjpegBackend_t backend : candidates) {
      if (a.create(backend, nullptr, nullptr, 0, &handle_) == NVJPEG_STATUS_SUCCESS) {
        backend_ = backend;
        break;
      }
      handle_ = nullptr;
    }
    if (handle_ == nullptr) {
      cudaStreamDestroy(stream_);
      if (backend_choice != "auto")
        throw InputError("key 'data.nvjpeg_backend': " + backend_choice + ": nvJPEG " + loaded().status.version +
                         " cannot create that backend on " + device.str() + "; use data.nvjpeg_backend: auto");
      throw RuntimeError("nvJPEG: no backend could be created on " + device.str());
    }
    check_nvjpeg(a.state_create(handle_, &batched_state_), "nvjpegJpegStateCreate");
    check_nvjpeg(a.state_create(handle_, &single_state_), "nvjpegJpegStateCreate");
    check_nvjpeg(a.stream_create(handle_, &parsed_), "nvjpegJpegStreamCreate");
    // Regions through nvjpegDecodeBatchedEx, which the hardware backend runs.
    regions_ = decode_regions && backend_ == NVJPEG_BACKEND_HARDWARE && a.regions();
  }

  ~NvjpegOffload() override {
    const NvjpegApi& a = loaded().api;
    for (nvjpegDecodeParams_t params : params_) a.params_destroy(params);
    if (parsed_) a.stream_destroy(parsed_);
    if (single_state_) a.state_destroy(single_state_);
    if (batched_state_) a.state_destroy(batched_state_);
    if (handle_) a.destroy(handle_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  bool set_normalization(const NormalizationTable& table) override {
    check_cuda(cudaSetDevice(device_.index), "cudaSetDevice", "nvJPEG offload");
    table_device_ = allocate(device_, table.values.size());
    check_cuda(cudaMemcpy(table_device_.get(), table.values.data(), table.values.size(), cudaMemcpyHostToDevice),
               "cudaMemcpy", "nvJPEG offload");
    table_ = table;
    return true;
  }

  std::string describe() const override {
    const char* backend = backend_ == NVJPEG_BACKEND_HARDWARE     ? "hardware decoder"
                          : backend_ == NVJPEG_BACKEND_GPU_HYBRID ? "GPU-assisted backend"
                                                                  : "default backend";
    return "nvJPEG " + loaded().status.version + " " + backend + " on " + device_.str() +
           (regions_ ? ", each crop's region decoded alone" : "");
  }

  std::vector<OffloadOutcome> decode(const std::vector<OffloadJob>& jobs) override {
    // nvJPEG allocates and frees device memory as it goes: not while the model's stream records
    // a step (train.cuda_graphs), which would fail this thread's calls.
    const ConcurrentDeviceWork not_while_recording;
    const NvjpegApi& a = loaded().api;
    check_cuda(cudaSetDevice(device_.index), "cudaSetDevice", "nvJPEG offload");
    std::vector<OffloadOutcome> outcomes(jobs.size(), OffloadOutcome::kRefused);
    // What this backend takes, and where each image's RGB goes: a slot of the whole image's size
    // (its region fits; a failed batch decodes whole images one by one).
    std::vector<std::size_t> taken;
    std::vector<std::size_t> offsets;
    std::vector<WindowResampleJob> plans;  // per taken image: its geometry
    std::vector<SourceRect> rects;         // per taken image: what is decoded (the whole image, or its region)
    std::size_t decoded_bytes = 0, out_bytes = 0, normalized_bytes = 0;
    NvjpegPhaseTotals phases;
    auto phase_start = std::chrono::steady_clock::now();
    // Adds the time since the last phase's end to `phase`.
    const auto phase_done = [&](double& phase) {
      const auto now = std::chrono::steady_clock::now();
      phase += std::chrono::duration<double>(now - phase_start).count();
      phase_start = now;
    };
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const OffloadJob& job = jobs[i];
      int components = 0, widths[NVJPEG_MAX_COMPONENT] = {}, heights[NVJPEG_MAX_COMPONENT] = {};
      nvjpegChromaSubsampling_t subsampling{};
      // What nvJPEG cannot parse or decode goes to the CPU, whose decoder decides whether the
      // bytes are bad (data.on_bad_record), exactly as on the CPU path: libjpeg accepts files
      // nvJPEG rejects, and its messages name the defect.
      if (a.image_info(handle_, job.data, job.size, &components, &subsampling, widths, heights) !=
          NVJPEG_STATUS_SUCCESS)
        continue;
      if (widths[0] != job.width || heights[0] != job.height) continue;  // the CPU's reading wins
      WindowResampleJob plan;
      plan_window_resample(job.width, job.height, job.window.x, job.window.y, job.window.w, job.window.h,
                           job.window.clamp.x, job.window.clamp.y, job.window.clamp.w, job.window.clamp.h, job.out_w,
                           job.out_h, plan);
      SourceRect rect{0, 0, job.width, job.height};
      if (backend_ == NVJPEG_BACKEND_HARDWARE) {
        if (a.stream_parse(handle_, job.data, job.size, 0, 0, parsed_) != NVJPEG_STATUS_SUCCESS) continue;
        int unsupported = 1;
        if (regions_) {
          // The region in whole 16 x 16 blocks (a 4:2:0 MCU); the whole image where the
          // decoder will not take the region.
          const SourceRect region = window_source_rect(plan, 16);
          nvjpegDecodeParams_t params = decode_params(taken.size());
          if (a.params_roi(params, region.x, region.y, region.w, region.h) == NVJPEG_STATUS_SUCCESS &&
              a.batched_supported_ex(handle_, parsed_, params, &unsupported) == NVJPEG_STATUS_SUCCESS && unsupported == 0)
            rect = region;
          else if (a.params_roi(params, 0, 0, -1, -1) != NVJPEG_STATUS_SUCCESS ||
                   a.batched_supported_ex(handle_, parsed_, params, &unsupported) != NVJPEG_STATUS_SUCCESS)
            unsupported = 1;
        } else if (a.batched_supported(handle_, parsed_, &unsupported) != NVJPEG_STATUS_SUCCESS) {
          unsupported = 1;
        }
        if (unsupported != 0) continue;  // progressive, 4:1:0, 4:1:1: the CPU's
      }
      taken.push_back(i);
      plans.push_back(plan);
      rects.push_back(rect);
      offsets.push_back(decoded_bytes);
      decoded_bytes += static_cast<std::size_t>(job.width) * job.height * 3;
      if (job.normalized != nullptr)
        normalized_bytes += static_cast<std::size_t>(job.out_w) * job.out_h * 3 * table_.element_bytes();
      else
        out_bytes += static_cast<std::size_t>(job.out_w) * job.out_h * 3;
    }
    if (taken.empty()) return outcomes;
    reserve(decoded_bytes, out_bytes, normalized_bytes, taken.size());
    phase_done(phases.inspect_s);

    // Batched decode; if the batch fails, one by one to find the images at fault.
    std::vector<const unsigned char*> data;
    std::vector<std::size_t> lengths;
    std::vector<nvjpegImage_t> images(taken.size());
    for (std::size_t t = 0; t < taken.size(); ++t) {
      const OffloadJob& job = jobs[taken[t]];
      data.push_back(job.data);
      lengths.push_back(job.size);
      std::memset(&images[t], 0, sizeof(nvjpegImage_t));
      images[t].channel[0] = static_cast<unsigned char*>(decoded_.get()) + offsets[t];
      images[t].pitch[0] = static_cast<std::size_t>(rects[t].w) * 3;
    }
    std::vector<char> ok(taken.size(), 1);
    const int n = static_cast<int>(taken.size());
    // Initialised once per batch size; a failed batch needs it again.
    if (n != batch_initialized_ &&
        a.batched_initialize(handle_, batched_state_, n, 1, NVJPEG_OUTPUT_RGBI) == NVJPEG_STATUS_SUCCESS)
      batch_initialized_ = n;
    const bool batched =
        batch_initialized_ == n &&
        (regions_ ? a.decode_batched_ex(handle_, batched_state_, data.data(), lengths.data(), images.data(),
                                        params_.data(), stream_)
                  : a.decode_batched(handle_, batched_state_, data.data(), lengths.data(), images.data(), stream_)) ==
            NVJPEG_STATUS_SUCCESS;
    if (!batched) {
      batch_initialized_ = 0;
      for (std::size_t t = 0; t < taken.size(); ++t) {
        rects[t] = SourceRect{0, 0, jobs[taken[t]].width, jobs[taken[t]].height};  // one by one: whole images
        images[t].pitch[0] = static_cast<std::size_t>(rects[t].w) * 3;
        ok[t] = a.decode_one(handle_, single_state_, data[t], lengths[t], NVJPEG_OUTPUT_RGBI, &images[t], stream_) ==
                NVJPEG_STATUS_SUCCESS;
      }
    }

    phase_done(phases.decode_call_s);

    // Resample each decoded window on the device, then bring back the 8-bit RGB, or (jobs with
    // `normalized`) the normalised sample straight into its slot of the batch.
    std::vector<WindowResampleJob> resample;
    std::vector<std::size_t> out_offsets;  // per resample job: its offset in resampled_ or normalized_
    std::size_t out_at = 0, normalized_at = 0;
    int64_t max_pixels = 0;
    for (std::size_t t = 0; t < taken.size(); ++t) {
      const OffloadJob& job = jobs[taken[t]];
      if (!ok[t]) continue;  // refused: the CPU decodes it, or finds it bad
      WindowResampleJob r = plans[t];
      r.src = static_cast<const uint8_t*>(images[t].channel[0]);
      r.pitch = images[t].pitch[0];
      r.src_x0 = rects[t].x;
      r.src_y0 = rects[t].y;
      r.flip = job.flip ? 1 : 0;
      const std::size_t pixels = static_cast<std::size_t>(job.out_w) * job.out_h;
      if (job.normalized != nullptr) {
        r.normalized = static_cast<uint8_t*>(normalized_.get()) + normalized_at;
        r.table = static_cast<const uint8_t*>(table_device_.get());
        r.element_bytes = table_.element_bytes();
        r.hwc = table_.layout == TensorLayout::kHwc ? 1 : 0;
        out_offsets.push_back(normalized_at);
        normalized_at += pixels * 3 * table_.element_bytes();
      } else {
        r.out = static_cast<uint8_t*>(resampled_.get()) + out_at;
        out_offsets.push_back(out_at);
        out_at += pixels * 3;
      }
      resample.push_back(r);
      max_pixels = std::max<int64_t>(max_pixels, int64_t{job.out_w} * job.out_h);
    }
    if (!resample.empty()) {
      check_cuda(cudaMemcpyAsync(jobs_device_.get(), resample.data(), resample.size() * sizeof(WindowResampleJob),
                                 cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync", "nvJPEG offload");
      launch_window_resample(static_cast<const WindowResampleJob*>(jobs_device_.get()), static_cast<int>(resample.size()),
                             max_pixels, stream_);
      if (out_at > 0)
        check_cuda(cudaMemcpyAsync(staging_.get(), resampled_.get(), out_at, cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync", "nvJPEG offload");
      // The normalised samples back into their batch slots: one copy per run of samples adjacent
      // both here and in the batch (a whole batch is usually one run), not one per sample.
      CopyRuns runs;
      std::size_t r = 0;
      for (std::size_t t = 0; t < taken.size(); ++t) {
        if (!ok[t]) continue;
        const OffloadJob& job = jobs[taken[t]];
        const std::size_t offset = out_offsets[r++];
        if (job.normalized == nullptr) continue;
        runs.add(static_cast<uint8_t*>(job.normalized), static_cast<const uint8_t*>(normalized_.get()) + offset,
                 static_cast<std::size_t>(job.out_w) * job.out_h * 3 * table_.element_bytes());
      }
      for (const CopyRuns::Run& run : runs.runs)
        check_cuda(cudaMemcpyAsync(run.dst, run.src, run.bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync",
                   "nvJPEG offload");
    }
    phase_done(phases.queue_s);
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", "nvJPEG offload");
    phase_done(phases.wait_s);
    phases.batches = 1;
    phases.images = static_cast<int64_t>(taken.size());
    add_nvjpeg_phase_times(phases);
    std::size_t r = 0;
    for (std::size_t t = 0; t < taken.size(); ++t) {
      if (!ok[t]) continue;
      const OffloadJob& job = jobs[taken[t]];
      const std::size_t offset = out_offsets[r++];
      if (job.normalized == nullptr)
        std::memcpy(job.out, static_cast<const uint8_t*>(staging_.get()) + offset,
                    static_cast<std::size_t>(job.out_w) * job.out_h * 3);
      outcomes[taken[t]] = OffloadOutcome::kDecoded;
    }
    return outcomes;
  }

 private:
  // The decode parameters of a batch's image `t` (RGB interleaved; its region set by the caller).
  nvjpegDecodeParams_t decode_params(std::size_t t) {
    const NvjpegApi& a = loaded().api;
    while (params_.size() <= t) {
      nvjpegDecodeParams_t params = nullptr;
      check_nvjpeg(a.params_create(handle_, &params), "nvjpegDecodeParamsCreate");
      params_.push_back(params);
      check_nvjpeg(a.params_output(params, NVJPEG_OUTPUT_RGBI), "nvjpegDecodeParamsSetOutputFormat");
    }
    return params_[t];
  }

  // Grows the device and staging buffers to fit this batch (they never shrink).
  void reserve(std::size_t decoded, std::size_t out, std::size_t normalized, std::size_t jobs) {
    if (decoded > decoded_bytes_) {
      decoded_ = allocate(device_, decoded);
      decoded_bytes_ = decoded;
    }
    if (normalized > normalized_bytes_) {
      normalized_ = allocate(device_, normalized);
      normalized_bytes_ = normalized;
    }
    if (out > out_bytes_) {
      resampled_ = allocate(device_, out);
      staging_ = allocate_pinned_host(out);
      out_bytes_ = out;
    }
    if (jobs > job_capacity_) {
      jobs_device_ = allocate(device_, jobs * sizeof(WindowResampleJob));
      job_capacity_ = jobs;
    }
  }

  Device device_;
  int batch_initialized_ = 0;  // the batch size the batched state is set up for
  cudaStream_t stream_ = nullptr;
  nvjpegBackend_t backend_ = NVJPEG_BACKEND_DEFAULT;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t batched_state_ = nullptr, single_state_ = nullptr;
  nvjpegJpegStream_t parsed_ = nullptr;
  bool regions_ = false;                       // data.decode_roi: on, on the hardware decoder
  std::vector<nvjpegDecodeParams_t> params_;   // per image of a batch, with its region
  std::shared_ptr<void> decoded_, resampled_, staging_, jobs_device_, normalized_, table_device_;
  std::size_t decoded_bytes_ = 0, out_bytes_ = 0, normalized_bytes_ = 0, job_capacity_ = 0;
  NormalizationTable table_;  // data.normalize: gpu (set_normalization)
};

}  // namespace

const NvjpegStatus& nvjpeg_status() {
  return loaded().status;
}

std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device& device, bool decode_regions,
                                                 const std::string& backend) {
  if (!device.is_cuda())
    throw InputError("key 'data.decode': gpu decodes on the rank's GPU, but this rank computes on the CPU; "
                     "use data.decode: cpu or auto");
  if (!nvjpeg_status().available)
    throw InputError("key 'data.decode': gpu needs nvJPEG, but " + nvjpeg_status().reason +
                     "; use data.decode: cpu or auto");
  return std::make_shared<NvjpegOffload>(device, decode_regions, backend);
}

#endif  // SDP_HAVE_NVJPEG_H

}  // namespace sdp
