// Stream and Event: a device's ordered queue of work and a mark in it (CUDA's stream and
// event; on the host, work runs in order on the calling thread, so both are trivial). They
// live in core/ so that every module that enqueues device work (nn's layers, optim's
// updates, distributed's collectives, data's decoders) passes them as themselves. Only the
// backend that made one looks inside (core/stream_cuda.hpp for CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.hpp"

namespace sdp {

class Stream;

// A point in a stream's work: what was queued on it before the last record().
class Event {
 public:
  virtual ~Event() = default;
  // Marks the work queued so far on the stream that made this event.
  virtual void record() = 0;
  // Blocks the calling thread until the marked work is done.
  virtual void synchronize() const = 0;
  // True when the marked work is done; never blocks.
  virtual bool query() const = 0;
  // Work queued on `stream` after this call runs after the marked work; the host does not wait.
  virtual void block(Stream& stream) const = 0;
};

// A point in a stream's work that knows when the device reached it: two of one stream bound
// the device time of the work queued between their records (a layer's kernels on a GPU,
// where the host's clock says only when they were queued).
class TimedEvent {
 public:
  virtual ~TimedEvent() = default;
  // Marks the work queued so far on the stream that made this event.
  virtual void record() = 0;
  // Seconds from `start`'s mark to this one's (both recorded, on the same stream); blocks
  // until this event's work is done.
  virtual double seconds_since(const TimedEvent& start) const = 0;
};

// A stream's work recorded once and replayed as one launch (a CUDA graph): the host pays for
// queueing its many small kernels once, not every step. It refers to the buffers and the
// kernel arguments of the recording: replays run the same kernels on the same memory.
class StreamGraph {
 public:
  virtual ~StreamGraph() = default;
  // Queues the recorded work on the stream it was recorded from.
  virtual void replay() = 0;
};

// Device work of another thread that a recording under way (Stream::begin_capture) would not
// survive: synchronising the whole device, allocating or freeing device memory (core's
// synchronous device_memory helpers, nvJPEG's decoding). Such work holds one of these for its
// duration; a recording waits for those in flight, and holds new ones back until it ends
// (a few milliseconds, once per configuration). On the recording thread itself it is a no-op:
// its unsafe calls fail the recording instead (the caller then launches).
class ConcurrentDeviceWork {
 public:
  ConcurrentDeviceWork();
  ~ConcurrentDeviceWork();
  ConcurrentDeviceWork(const ConcurrentDeviceWork&) = delete;
  ConcurrentDeviceWork& operator=(const ConcurrentDeviceWork&) = delete;

 private:
  bool held_ = false;
};

// The recording's side (CUDA streams' begin_capture, end_capture, abort_capture).
void hold_back_concurrent_device_work();
void release_concurrent_device_work();

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  // Blocks until all work queued so far is done (a no-op on the host, which runs in order on
  // the calling thread).
  virtual void synchronize() = 0;
  // Work queued here after this call runs after the work queued on `other` so far. The
  // default (host streams) waits for `other` on the calling thread.
  virtual void wait_for(Stream& other) { other.synchronize(); }
  // An event of this stream, not yet recorded (then it counts as done).
  virtual std::unique_ptr<Event> make_event();
  // A timed event of this stream (profiling: nn/layer_profile.hpp). The default, for host
  // streams, reads the steady clock once the work queued so far is done.
  virtual std::unique_ptr<TimedEvent> make_timed_event();
  // Copies `bytes` of host memory into this device's memory at `dst`, ordered after the work
  // queued so far. Returns once `src` may be reused (CUDA stages pageable memory first).
  virtual void copy_from_host(void* dst, const void* src, std::size_t bytes) = 0;
  // Starts copying `bytes` of host memory into this device's memory at `dst` on a side copy
  // stream and returns at once when `src` is page-locked (pageable memory is staged first),
  // so the copy runs while this stream computes. The work queued here after the next
  // wait_for_prefetch() sees the bytes; until then neither `src` nor `dst` may be touched.
  // The default (the host's) copies right away.
  virtual void prefetch_from_host(void* dst, const void* src, std::size_t bytes) { copy_from_host(dst, src, bytes); }
  virtual void wait_for_prefetch() {}
  // Queues a copy of `bytes` from this device's memory at `src` into host memory at `dst`, or
  // from host memory at `src` into this device's memory at `dst`, ordered after the work
  // queued so far, and returns at once (on a GPU, asynchronous when the host side is
  // page-locked). Neither buffer may be touched until an event recorded after the copy is
  // done. The default (host memory) copies right away.
  virtual void copy_to_host_async(void* dst, const void* src, std::size_t bytes);
  virtual void copy_from_host_async(void* dst, const void* src, std::size_t bytes);
  // dst[i] = dtype(src[i]) for `count` elements in this device's memory (a model's f32 input
  // into its compute dtype under mixed precision). Only the CUDA stream has 16-bit compute.
  virtual void cast_from_f32(void* dst, DType dtype, const float* src, int64_t count);
  // Records the work this thread queues on this stream until end_capture() instead of running
  // it (CUDA's stream capture: nothing runs until the graph is replayed). A call that cannot
  // be recorded (a wait for the device, an allocation, a copy from pageable memory) throws
  // sdp::Error; the capture must then be ended with abort_capture(). Host streams cannot
  // record (std::logic_error).
  virtual void begin_capture();
  // The recorded work, ready to replay (sdp::Error when it cannot be instantiated).
  virtual std::unique_ptr<StreamGraph> end_capture();
  // Ends a capture that failed, dropping what it recorded; a no-op when none is under way.
  virtual void abort_capture() {}
};

// The host's stream: work is done when the call that did it returns.
class HostStream : public Stream {
 public:
  Device device() const override { return Device::cpu(); }
  void synchronize() override {}
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override;
};

// One HostStream for code that orders host buffers (host communicators, tests).
HostStream& host_stream();

// A stream on `device`: a HostStream for the CPU, a non-blocking CUDA stream for cuda:i
// (core/stream_cuda.hpp). Throws sdp::Error when this build has no backend for `device`.
std::shared_ptr<Stream> make_stream(const Device& device);
// The CUDA one (core/stream_cuda.cpp), only in builds with the CUDA backend.
std::shared_ptr<Stream> make_cuda_stream(int ordinal);

}  // namespace sdp
