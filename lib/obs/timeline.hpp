// Timeline (output.timeline): what each rank did when, as a Chrome trace (the JSON Trace
// Event Format; opens in https://ui.perfetto.dev and chrome://tracing). Horovod's
// timeline.cc is the model: "X" (complete) events, pid = rank, tid = a track: `main` (the
// training loop: data wait, forward, backward, gradient wait, optimizer, evaluation,
// checkpoint, inside one `step` event per step) and `comm` (the communication thread: one
// `allreduce` per gradient bucket, its bytes in args). A CTR job (train/ctr_trainer.cpp) has
// the main track alone: its step's `allreduce` and `table_rows` (cat sparse or dense, args
// bytes and rows) run on the loop's thread.
//
// Cost. Off, the training loop holds a null Timeline* and tests it: no clock read, no
// allocation. On, each event is a clock read and a 56-byte store into a buffer allocated
// once, up front (reserve): nothing is formatted or allocated on the step path. A full
// buffer drops further events and counts them (dropped()), it never grows mid-run.
//
// Threads: each track has one writer at a time (the loop writes main, the communication
// thread writes comm), so record() takes no lock. Reading (events, json) is for after the
// run, once the writers are done.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

// kLayers (output.timeline_layers): each layer's forward and backward in the device's time
// (nn/layer_profile.hpp), placed from the step's start; "cat" says which pass.
enum class TraceTrack : int { kMain = 0, kComm = 1, kLayers = 2 };
constexpr int kTraceTracks = 3;
const char* to_string(TraceTrack track);

struct TraceEvent {
  const char* name = "";  // a string literal: static storage, never copied
  int64_t start_ns = 0;   // since the timeline's origin
  int64_t dur_ns = 0;
  int64_t step = -1;    // args.step; -1: none
  int64_t bytes = -1;   // args.bytes; -1: none
  int32_t bucket = -1;  // args.bucket; -1: none
  const char* category = nullptr;  // "cat"; null: none. Like name, must outlive the timeline
  int64_t rows = -1;                // args.rows (a CTR table's rows exchanged); -1: none
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // `origin`: time 0 of the trace. Ranks take it right after a barrier, so their traces
  // line up to within the barrier's skew even across nodes (clocks of different hosts are
  // not comparable).
  Timeline(int rank, Clock::time_point origin);

  // Allocates room for `capacity` events on `track` (once, before the track records; not
  // thread-safe). Only reserved tracks are named in the trace.
  void reserve(TraceTrack track, std::size_t capacity);
  bool reserved(TraceTrack track) const { return !tracks_[static_cast<int>(track)].events.empty(); }
  // Appends an event; after reserve's capacity is used up, counts it as dropped instead.
  void record(TraceTrack track, const char* name, Clock::time_point start, Clock::time_point end,
              int64_t step = -1, int64_t bytes = -1, int bucket = -1, const char* category = nullptr,
              int64_t rows = -1) noexcept {
    Buffer& b = tracks_[static_cast<int>(track)];
    if (b.size == b.events.size()) {
      ++b.dropped;
      return;
    }
    TraceEvent& e = b.events[b.size++];
    e.name = name;
    e.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start - origin_).count();
    e.dur_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
    e.step = step;
    e.bytes = bytes;
    e.bucket = bucket;
    e.category = category;
    e.rows = rows;
  }

  int rank() const { return rank_; }
  // The recorded events of a track, in recording order.
  std::vector<TraceEvent> events(TraceTrack track) const;
  std::size_t dropped() const;

  // This rank's trace events as JSON array elements, comma-separated without brackets (so
  // the ranks' texts concatenate into one array): metadata naming the process "rank N" and
  // its threads (the tracks reserved), then every event sorted by start (an enclosing event before the events it
  // contains, which is how viewers nest them).
  std::string events_json() const;

 private:
  struct Buffer {
    std::vector<TraceEvent> events;  // allocated by reserve(); [0, size) recorded
    std::size_t size = 0;
    std::size_t dropped = 0;
  };
  int rank_;
  Clock::time_point origin_;
  std::array<Buffer, kTraceTracks> tracks_;
};

// Records the span from construction to destruction on the main track; does nothing (not
// even read the clock) when the timeline is null.
class TraceScope {
 public:
  TraceScope(Timeline* timeline, const char* name, int64_t step = -1)
      : timeline_(timeline), name_(name), step_(step) {
    if (timeline_) start_ = Timeline::Clock::now();
  }
  ~TraceScope() {
    if (timeline_)
      timeline_->record(TraceTrack::kMain, name_, start_, Timeline::Clock::now(), step_);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Timeline* timeline_;
  const char* name_;
  int64_t step_;
  Timeline::Clock::time_point start_{};
};

// Writes a complete trace file: {"traceEvents": [<events_json of each chunk>], ...}.
// `other_data` is a JSON object's text for the "otherData" key (run facts), "" = none.
// Written next to the target and renamed, so a reader never sees half a file. Throws
// RuntimeError naming the path when it cannot.
void write_trace_file(const std::string& path, const std::vector<std::string>& event_chunks,
                      const std::string& other_data = "");

// Where rank `rank` writes its own trace: "out/timeline.json" -> "out/timeline.rank1.json".
std::string rank_trace_path(const std::string& path, int rank);

}  // namespace sdp
