// nvjpeg_offload.hpp with the CUDA backend. libnvjpeg.so.13 is dlopen'ed (as cuBLAS is,
// nn/cublas_on_demand_cuda.cpp): a machine without it runs every CPU path, and says why
// data.decode: gpu cannot run there.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/cuda_check_cuda.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/stream.hpp"
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

std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device&) {
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
  explicit NvjpegOffload(const Device& device) : device_(device) {
    const NvjpegApi& a = loaded().api;
    check_cuda(cudaSetDevice(device.index), "cudaSetDevice", "nvJPEG offload");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    // The hardware decoder where there is one (A100, H100), else the GPU-assisted backend.
    for (nvjpegBackend_t backend : {NVJPEG_BACKEND_HARDWARE, NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_BACKEND_DEFAULT}) {
      if (a.create(backend, nullptr, nullptr, 0, &handle_) == NVJPEG_STATUS_SUCCESS) {
        backend_ = backend;
        break;
      }
      handle_ = nullptr;
    }
    if (handle_ == nullptr) throw RuntimeError("nvJPEG: no backend could be created on " + device.str());
    check_nvjpeg(a.state_create(handle_, &batched_state_), "nvjpegJpegStateCreate");
    check_nvjpeg(a.state_create(handle_, &single_state_), "nvjpegJpegStateCreate");
    check_nvjpeg(a.stream_create(handle_, &parsed_), "nvjpegJpegStreamCreate");
  }

  ~NvjpegOffload() override {
    const NvjpegApi& a = loaded().api;
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
    return "nvJPEG " + loaded().status.version + " " + backend + " on " + device_.str();
  }

  std::vector<OffloadOutcome> decode(const std::vector<OffloadJob>& jobs) override {
    // nvJPEG allocates and frees device memory as it goes: not while the model's stream records
    // a step (train.cuda_graphs), which would fail this thread's calls.
    const ConcurrentDeviceWork not_while_recording;
    const NvjpegApi& a = loaded().api;
    check_cuda(cudaSetDevice(device_.index), "cudaSetDevice", "nvJPEG offload");
    std::vector<OffloadOutcome> outcomes(jobs.size(), OffloadOutcome::kRefused);
    // What this backend takes, and where each image's full-size RGB goes.
    std::vector<std::size_t> taken;
    std::vector<std::size_t> offsets;
    std::size_t decoded_bytes = 0, out_bytes = 0, normalized_bytes = 0;
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
      if (backend_ == NVJPEG_BACKEND_HARDWARE) {
        int unsupported = 1;
        if (a.stream_parse(handle_, job.data, job.size, 0, 0, parsed_) != NVJPEG_STATUS_SUCCESS ||
            a.batched_supported(handle_, parsed_, &unsupported) != NVJPEG_STATUS_SUCCESS || unsupported != 0)
          continue;  // progressive, 4:1:0, 4:1:1: the CPU's
      }
      taken.push_back(i);
      offsets.push_back(decoded_bytes);
      decoded_bytes += static_cast<std::size_t>(job.width) * job.height * 3;
      if (job.normalized != nullptr)
        normalized_bytes += static_cast<std::size_t>(job.out_w) * job.out_h * 3 * table_.element_bytes();
      else
        out_bytes += static_cast<std::size_t>(job.out_w) * job.out_h * 3;
    }
    if (taken.empty()) return outcomes;
    reserve(decoded_bytes, out_bytes, normalized_bytes, taken.size());

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
      images[t].pitch[0] = static_cast<std::size_t>(job.width) * 3;
    }
    std::vector<char> ok(taken.size(), 1);
    const int n = static_cast<int>(taken.size());
    // Initialised once per batch size; a failed batch needs it again.
    if (n != batch_initialized_ &&
        a.batched_initialize(handle_, batched_state_, n, 1, NVJPEG_OUTPUT_RGBI) == NVJPEG_STATUS_SUCCESS)
      batch_initialized_ = n;
    const bool batched = batch_initialized_ == n && a.decode_batched(handle_, batched_state_, data.data(), lengths.data(),
                                                                     images.data(), stream_) == NVJPEG_STATUS_SUCCESS;
    if (!batched) {
      batch_initialized_ = 0;
      for (std::size_t t = 0; t < taken.size(); ++t)
        ok[t] = a.decode_one(handle_, single_state_, data[t], lengths[t], NVJPEG_OUTPUT_RGBI, &images[t], stream_) ==
                NVJPEG_STATUS_SUCCESS;
    }

    // Resample each decoded window on the device, then bring back the 8-bit RGB, or (jobs with
    // `normalized`) the normalised sample straight into its slot of the batch.
    std::vector<WindowResampleJob> resample;
    std::vector<std::size_t> out_offsets;  // per resample job: its offset in resampled_ or normalized_
    std::size_t out_at = 0, normalized_at = 0;
    int64_t max_pixels = 0;
    for (std::size_t t = 0; t < taken.size(); ++t) {
      const OffloadJob& job = jobs[taken[t]];
      if (!ok[t]) continue;  // refused: the CPU decodes it, or finds it bad
      WindowResampleJob r;
      plan_window_resample(job.width, job.height, job.window.x, job.window.y, job.window.w, job.window.h,
                           job.window.clamp.x, job.window.clamp.y, job.window.clamp.w, job.window.clamp.h, job.out_w,
                           job.out_h, r);
      r.src = static_cast<const uint8_t*>(images[t].channel[0]);
      r.pitch = images[t].pitch[0];
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
      std::size_t r = 0;
      for (std::size_t t = 0; t < taken.size(); ++t) {
        if (!ok[t]) continue;
        const OffloadJob& job = jobs[taken[t]];
        const std::size_t offset = out_offsets[r++];
        if (job.normalized == nullptr) continue;
        check_cuda(cudaMemcpyAsync(job.normalized, static_cast<const uint8_t*>(normalized_.get()) + offset,
                                   static_cast<std::size_t>(job.out_w) * job.out_h * 3 * table_.element_bytes(),
                                   cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync", "nvJPEG offload");
      }
    }
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", "nvJPEG offload");
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
  std::shared_ptr<void> decoded_, resampled_, staging_, jobs_device_, normalized_, table_device_;
  std::size_t decoded_bytes_ = 0, out_bytes_ = 0, normalized_bytes_ = 0, job_capacity_ = 0;
  NormalizationTable table_;  // data.normalize: gpu (set_normalization)
};

}  // namespace

const NvjpegStatus& nvjpeg_status() {
  return loaded().status;
}

std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device& device) {
  if (!device.is_cuda())
    throw InputError("key 'data.decode': gpu decodes on the rank's GPU, but this rank computes on the CPU; "
                     "use data.decode: cpu or auto");
  if (!nvjpeg_status().available)
    throw InputError("key 'data.decode': gpu needs nvJPEG, but " + nvjpeg_status().reason +
                     "; use data.decode: cpu or auto");
  return std::make_shared<NvjpegOffload>(device);
}

#endif  // SDP_HAVE_NVJPEG_H

}  // namespace sdp
