// The CUDA Stream and Event (core/stream_cuda.hpp). Built only with SDP_HAVE_CUDA.
#include "core/stream_cuda.hpp"

#include <stdexcept>

#include "core/cuda_casts.hpp"
#include "core/cuda_check_cuda.hpp"

namespace sdp {

namespace {

void check(cudaError_t status, const char* call) { check_cuda(status, call, "stream"); }

class CudaEvent final : public Event {
 public:
  CudaEvent(int ordinal, cudaStream_t stream) : stream_(stream) {
    check(cudaSetDevice(ordinal), "cudaSetDevice");
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  void record() override { check(cudaEventRecord(event_, stream_), "cudaEventRecord"); }
  void synchronize() const override { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  bool query() const override {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    check(status, "cudaEventQuery");
    return true;
  }
  void block(Stream& stream) const override {
    if (auto* cuda = dynamic_cast<CudaStream*>(&stream))
      check(cudaStreamWaitEvent(cuda->get(), event_, 0), "cudaStreamWaitEvent");
    else
      synchronize();  // a host stream orders by waiting
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t event_ = nullptr;
};

// With timing (no cudaEventDisableTiming): cudaEventElapsedTime between two of one stream, in
// milliseconds at about half a microsecond's resolution.
class CudaTimedEvent final : public TimedEvent {
 public:
  CudaTimedEvent(int ordinal, cudaStream_t stream) : stream_(stream) {
    check(cudaSetDevice(ordinal), "cudaSetDevice");
    check(cudaEventCreate(&event_), "cudaEventCreate");
  }
  ~CudaTimedEvent() override { cudaEventDestroy(event_); }
  void record() override { check(cudaEventRecord(event_, stream_), "cudaEventRecord"); }
  double seconds_since(const TimedEvent& start) const override {
    const auto* cuda = dynamic_cast<const CudaTimedEvent*>(&start);
    if (cuda == nullptr) throw std::logic_error("TimedEvent::seconds_since: events of different streams");
    check(cudaEventSynchronize(event_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, cuda->event_, event_), "cudaEventElapsedTime");
    return ms / 1000.0;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t event_ = nullptr;
};

class CudaStreamGraph final : public StreamGraph {
 public:
  CudaStreamGraph(cudaGraph_t graph, cudaStream_t stream) : stream_(stream) {
    const cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);  // the executable graph keeps what it needs
    check(status, "cudaGraphInstantiate");
  }
  ~CudaStreamGraph() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  void replay() override { check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"); }

 private:
  cudaStream_t stream_;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

CudaStream::CudaStream(int ordinal) : ordinal_(ordinal), owned_(true) {
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

CudaStream::CudaStream(int ordinal, cudaStream_t stream) : ordinal_(ordinal), owned_(false), stream_(stream) {}

CudaStream::~CudaStream() {
  // Nothing to report from a destructor: the calls' statuses are dropped.
  if (copy_stream_ != nullptr) {
    cudaStreamSynchronize(copy_stream_);
    cudaEventDestroy(copied_);
    cudaStreamDestroy(copy_stream_);
  }
  if (waited_ != nullptr) cudaEventDestroy(waited_);
  if (stream_ == nullptr || !owned_) return;
  cudaStreamSynchronize(stream_);
  attachments_.clear();  // library handles bound to the stream go before it
  cudaStreamDestroy(stream_);
}

void CudaStream::synchronize() { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

void CudaStream::wait_for(Stream& other) {
  auto* cuda = dynamic_cast<CudaStream*>(&other);
  if (cuda == nullptr) return;  // host work is done when it returns
  if (cuda->stream_ == stream_) return;
  if (waited_ == nullptr)
    check(cudaEventCreateWithFlags(&waited_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  // cudaStreamWaitEvent takes the event as recorded now, so one event serves every call.
  check(cudaEventRecord(waited_, cuda->stream_), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream_, waited_, 0), "cudaStreamWaitEvent");
}

std::unique_ptr<Event> CudaStream::make_event() { return std::make_unique<CudaEvent>(ordinal_, stream_); }

std::unique_ptr<TimedEvent> CudaStream::make_timed_event() {
  return std::make_unique<CudaTimedEvent>(ordinal_, stream_);
}

void CudaStream::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
}

void CudaStream::begin_capture() {
  // Thread-local: the loader's threads go on with their own streams while this thread
  // records, and an unsafe call of this thread's own fails at once; their device-wide work
  // (ConcurrentDeviceWork) waits until the recording ends.
  hold_back_concurrent_device_work();
  const cudaError_t status = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess) release_concurrent_device_work();
  check(status, "cudaStreamBeginCapture");
}

std::unique_ptr<StreamGraph> CudaStream::end_capture() {
  cudaGraph_t graph = nullptr;
  const cudaError_t status = cudaStreamEndCapture(stream_, &graph);
  release_concurrent_device_work();
  check(status, "cudaStreamEndCapture");
  return std::make_unique<CudaStreamGraph>(graph, stream_);
}

void CudaStream::abort_capture() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream_, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
  }
  cudaGetLastError();  // the failed capture's error is not the next call's
  release_concurrent_device_work();
}

void CudaStream::copy_to_host_async(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
}

void CudaStream::copy_from_host_async(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
}

void CudaStream::prefetch_from_host(void* dst, const void* src, std::size_t bytes) {
  if (copy_stream_ == nullptr) {  // made at the first prefetch: most streams never prefetch
    check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy_stream_), "cudaMemcpyAsync");
  check(cudaEventRecord(copied_, copy_stream_), "cudaEventRecord");
}

void CudaStream::wait_for_prefetch() {
  if (copy_stream_ != nullptr) check(cudaStreamWaitEvent(stream_, copied_, 0), "cudaStreamWaitEvent");
}

void CudaStream::cast_from_f32(void* dst, DType dtype, const float* src, int64_t count) {
  cuda_casts::from_f32(dtype, dst, src, count, 1.0f, this);
}

CudaStream& as_cuda_stream(Stream& stream) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  if (cuda == nullptr) throw std::logic_error("a " + stream.device().str() + " stream where a CUDA stream was needed");
  return *cuda;
}

std::shared_ptr<Stream> make_cuda_stream(int ordinal) { return std::make_shared<CudaStream>(ordinal); }

cudaStream_t cuda_stream_of(Stream* stream) { return stream == nullptr ? nullptr : as_cuda_stream(*stream).get(); }

}  // namespace sdp
