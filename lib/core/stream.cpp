#include "core/stream.hpp"

#include <chrono>
#include <cstring>
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
