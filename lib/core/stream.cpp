#include "core/stream.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "core/error.hpp"

namespace sdp {

namespace {

// Host work is finished when it returns: an event has nothing to wait for.
class HostEvent final : public Event {
 public:
  void record() override {}
  void synchronize() const override {}
  bool query() const override { return true; }
  void block(Stream& /*stream*/) const override {}
};

class HostTimedEvent final : public TimedEvent {
 public:
  explicit HostTimedEvent(Stream& stream) : stream_(stream) {}
  void record() override {
    stream_.synchronize();  // a no-op where work is done when its call returns
    at_ = std::chrono::steady_clock::now();
  }
  double seconds_since(const TimedEvent& start) const override {
    const auto* host = dynamic_cast<const HostTimedEvent*>(&start);
    if (host == nullptr) throw std::logic_error("TimedEvent::seconds_since: events of different streams");
    return std::chrono::duration<double>(at_ - host->at_).count();
  }

 private:
  Stream& stream_;
  std::chrono::steady_clock::time_point at_{};
};

}  // namespace

std::unique_ptr<Event> Stream::make_event() { return std::make_unique<HostEvent>(); }

std::unique_ptr<TimedEvent> Stream::make_timed_event() { return std::make_unique<HostTimedEvent>(*this); }

void Stream::cast_from_f32(void* /*dst*/, DType dtype, const float* /*src*/, int64_t /*count*/) {
  throw std::invalid_argument(std::string("this device computes in f32 only, not ") + dtype_name(dtype));
}

namespace {
// Writer-preferring: a recording waits only for the device work in flight, not for the
// loader's threads to pause together (they take turns holding it).
struct RecordingGate {
  std::mutex mutex;
  std::condition_variable changed;
  int workers = 0;           // threads inside ConcurrentDeviceWork
  int recordings_waiting = 0;
  bool recording = false;
};
RecordingGate& recording_gate() {
  // Never destroyed: device memory held by other statics may be freed after it would be.
  static RecordingGate* gate = new RecordingGate;
  return *gate;
}
thread_local bool this_thread_records = false;
thread_local int this_thread_holds = 0;  // nested ConcurrentDeviceWork (a decode that allocates)
}  // namespace

ConcurrentDeviceWork::ConcurrentDeviceWork() {
  if (this_thread_records) return;
  held_ = true;
  if (this_thread_holds++ > 0) return;
  RecordingGate& gate = recording_gate();
  std::unique_lock<std::mutex> lock(gate.mutex);
  gate.changed.wait(lock, [&] { return !gate.recording && gate.recordings_waiting == 0; });
  ++gate.workers;
}

ConcurrentDeviceWork::~ConcurrentDeviceWork() {
  if (!held_ || --this_thread_holds > 0) return;
  RecordingGate& gate = recording_gate();
  std::lock_guard<std::mutex> lock(gate.mutex);
  if (--gate.workers == 0) gate.changed.notify_all();
}

void hold_back_concurrent_device_work() {
  // Its own device work would wait for the recording, and the recording for it.
  if (this_thread_holds > 0) throw std::logic_error("a recording cannot start inside this thread's device work");
  RecordingGate& gate = recording_gate();
  std::unique_lock<std::mutex> lock(gate.mutex);
  ++gate.recordings_waiting;
  gate.changed.wait(lock, [&] { return !gate.recording && gate.workers == 0; });
  --gate.recordings_waiting;
  gate.recording = true;
  this_thread_records = true;
}

void release_concurrent_device_work() {
  if (!this_thread_records) return;
  this_thread_records = false;
  RecordingGate& gate = recording_gate();
  std::lock_guard<std::mutex> lock(gate.mutex);
  gate.recording = false;
  gate.changed.notify_all();
}

void Stream::begin_capture() { throw std::logic_error("only a GPU stream records its work as a graph"); }

std::unique_ptr<StreamGraph> Stream::end_capture() {
  throw std::logic_error("only a GPU stream records its work as a graph");
}

void Stream::copy_to_host_async(void* dst, const void* src, std::size_t bytes) {
  synchronize();
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void Stream::copy_from_host_async(void* dst, const void* src, std::size_t bytes) {
  synchronize();
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void HostStream::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

HostStream& host_stream() {
  static HostStream stream;
  return stream;
}

std::shared_ptr<Stream> make_stream(const Device& device) {
  if (device.is_cpu()) return std::make_shared<HostStream>();
#ifdef SDP_HAVE_CUDA
  if (device.is_cuda()) return make_cuda_stream(device.index);
#endif
  throw RuntimeError("streams: this sdp-train has no backend for " + device.str());
}

}  // namespace sdp
