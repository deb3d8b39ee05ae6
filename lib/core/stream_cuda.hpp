// The CUDA Stream and Event (core/stream.hpp), CUDA-typed (private: included only by *.cu and
// *_cuda.cpp files). Built only with SDP_HAVE_CUDA.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>

#include "core/stream.hpp"

namespace sdp {

// A non-blocking cudaStream_t: it does not wait for the legacy default stream, which the
// synchronous helpers of core/device_memory use (they synchronize the whole device around
// their copies instead), and other streams (NCCL's) are ordered after it by events, not by
// implicit default-stream barriers.
class CudaStream final : public Stream {
 public:
  // Creates a stream on cuda:`ordinal`, owned.
  explicit CudaStream(int ordinal);
  // A view of `stream` (owned by someone else, e.g. the NCCL communicator), not destroyed here.
  CudaStream(int ordinal, cudaStream_t stream);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Device device() const override { return Device::cuda(ordinal_); }
  void synchronize() override;
  void wait_for(Stream& other) override;
  std::unique_ptr<Event> make_event() override;
  std::unique_ptr<TimedEvent> make_timed_event() override;
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override;
  void prefetch_from_host(void* dst, const void* src, std::size_t bytes) override;
  void wait_for_prefetch() override;
  void copy_to_host_async(void* dst, const void* src, std::size_t bytes) override;
  void copy_from_host_async(void* dst, const void* src, std::size_t bytes) override;
  void cast_from_f32(void* dst, DType dtype, const float* src, int64_t count) override;
  void begin_capture() override;
  std::unique_ptr<StreamGraph> end_capture() override;
  void abort_capture() override;

  cudaStream_t get() const { return stream_; }
  // Library handles bound to this stream (cuBLAS, cuDNN), by name; released before the stream.
  std::shared_ptr<void>& attachment(const std::string& key) { return attachments_[key]; }

 private:
  int ordinal_;
  bool owned_;
  std::map<std::string, std::shared_ptr<void>> attachments_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // input prefetches (prefetch_from_host)
  cudaEvent_t copied_ = nullptr;        // the last prefetch's end on copy_stream_
  cudaEvent_t waited_ = nullptr;        // wait_for's mark on another stream (made on first use)
};

// The cudaStream_t of `stream`: null is CUDA's legacy default stream, as everywhere in CUDA.
// Throws std::logic_error for a stream that is not a CudaStream (a host stream handed to a
// kernel launcher is a bug).
cudaStream_t cuda_stream_of(Stream* stream);
CudaStream& as_cuda_stream(Stream& stream);

}  // namespace sdp
