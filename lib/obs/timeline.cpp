#include "obs/timeline.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace sdp {

const char* to_string(TraceTrack track) {
  switch (track) {
    case TraceTrack::kMain: return "main";
    case TraceTrack::kComm: return "comm";
    case TraceTrack::kLayers: return "layers";
  }
  return "?";
}

Timeline::Timeline(int rank, Clock::time_point origin) : rank_(rank), origin_(origin) {}

void Timeline::reserve(TraceTrack track, std::size_t capacity) {
  Buffer& b = tracks_[static_cast<int>(track)];
  if (capacity > b.events.size()) b.events.resize(capacity);
}

std::vector<TraceEvent> Timeline::events(TraceTrack track) const {
  const Buffer& b = tracks_[static_cast<int>(track)];
  return std::vector<TraceEvent>(b.events.begin(),
                                 b.events.begin() + static_cast<std::ptrdiff_t>(b.size));
}

std::size_t Timeline::dropped() const {
  std::size_t n = 0;
  for (const Buffer& b : tracks_) n += b.dropped;
  return n;
}

namespace {

// A metadata event naming a process or thread ("process_name", "thread_name") and the one
// ordering it in the viewer ("process_sort_index", "thread_sort_index").
void append_metadata(std::string& out, int pid, int tid, const char* kind, const std::string& name,
                     int sort_index) {
  char buffer[320];
  std::snprintf(
      buffer, sizeof buffer,
      "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s_name\",\"args\":{\"name\":\"%s\"}},\n"
      "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s_sort_index\",\"args\":{"
      "\"sort_index\":%d}}",
      pid, tid, kind, name.c_str(), pid, tid, kind, sort_index);
  if (!out.empty()) out += ",\n";
  out += buffer;
}

}  // namespace

std::string Timeline::events_json() const {
  std::string out;
  append_metadata(out, rank_, 0, "process", "rank " + std::to_string(rank_), rank_);
  for (int t = 0; t < kTraceTracks; ++t)
    if (reserved(static_cast<TraceTrack>(t)))
      append_metadata(out, rank_, t, "thread", to_string(static_cast<TraceTrack>(t)), t);
  for (int t = 0; t < kTraceTracks; ++t) {
    std::vector<TraceEvent> events = this->events(static_cast<TraceTrack>(t));
    // By start; at equal starts the longer (enclosing) event first.
    std::stable_sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.dur_ns > b.dur_ns;
    });
    char buffer[512];  // the longest layer name is a few dozen characters
    for (const TraceEvent& e : events) {
      // ts and dur in microseconds, to the nanosecond; names are our own literals (no
      // characters that need escaping).
      int n = std::snprintf(
          buffer, sizeof buffer,
          ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",%s%s%s\"ts\":%lld.%03lld,"
          "\"dur\":%lld.%03lld,\"args\":{",
          rank_, t, e.name, e.category ? "\"cat\":\"" : "", e.category ? e.category : "", e.category ? "\"," : "",
          static_cast<long long>(e.start_ns / 1000),
          static_cast<long long>(e.start_ns % 1000), static_cast<long long>(e.dur_ns / 1000),
          static_cast<long long>(e.dur_ns % 1000));
      const char* sep = "";
      auto arg = [&](const char* key, long long value) {
        n += std::snprintf(buffer + n, sizeof buffer - n, "%s\"%s\":%lld", sep, key, value);
        sep = ",";
      };
      if (e.step >= 0) arg("step", e.step);
      if (e.bucket >= 0) arg("bucket", e.bucket);
      if (e.bytes >= 0) arg("bytes", e.bytes);
      if (e.rows >= 0) arg("rows", e.rows);
      std::snprintf(buffer + n, sizeof buffer - n, "}}");
      out += buffer;
    }
  }
  return out;
}

void write_trace_file(const std::string& path, const std::vector<std::string>& event_chunks,
                      const std::string& other_data) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const std::string temporary = path + ".tmp";
  std::FILE* f = std::fopen(temporary.c_str(), "w");
  if (f == nullptr)
    throw RuntimeError("cannot write output.timeline '" + path + "': " + std::strerror(errno));
  std::fputs("{\"displayTimeUnit\":\"ms\",", f);
  if (!other_data.empty()) std::fprintf(f, "\"otherData\":%s,", other_data.c_str());
  std::fputs("\"traceEvents\":[\n", f);
  bool first = true;
  for (const std::string& chunk : event_chunks) {
    if (chunk.empty()) continue;
    if (!first) std::fputs(",\n", f);
    std::fwrite(chunk.data(), 1, chunk.size(), f);
    first = false;
  }
  std::fputs("\n]}\n", f);
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(temporary.c_str());
    throw RuntimeError("cannot write output.timeline '" + path + "': write failed (disk full?)");
  }
  fs::rename(temporary, target, ec);
  if (ec) throw RuntimeError("cannot write output.timeline '" + path + "': " + ec.message());
}

std::string rank_trace_path(const std::string& path, int rank) {
  const std::filesystem::path p(path);
  const std::string stem = p.stem().string(), ext = p.extension().string();
  const std::string name = (ext.empty() ? p.filename().string() : stem) + ".rank" +
                           std::to_string(rank) + (ext.empty() ? ".json" : ext);
  return (p.parent_path() / name).string();
}

}  // namespace sdp
