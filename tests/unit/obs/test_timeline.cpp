// The Chrome-trace writer (obs/timeline.hpp): valid JSON, the Trace Event Format's fields,
// events ordered so that viewers nest them, nothing recorded past the buffer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "obs/timeline.hpp"

namespace sdp {
namespace {

using Clock = Timeline::Clock;
using std::chrono::microseconds;

nlohmann::json parse_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws on invalid JSON
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("sdp-test-timeline-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

// One step as the trainer records it, out of order (children end before their parent).
Timeline one_step(int rank, Clock::time_point t0) {
  Timeline timeline(rank, t0);
  timeline.reserve(TraceTrack::kMain, 16);
  timeline.reserve(TraceTrack::kComm, 16);
  timeline.record(TraceTrack::kMain, "data_wait", t0, t0 + microseconds(10), 0);
  timeline.record(TraceTrack::kMain, "forward", t0 + microseconds(10), t0 + microseconds(40), 0);
  timeline.record(TraceTrack::kComm, "allreduce", t0 + microseconds(50), t0 + microseconds(70), 0,
                  4096, 0);
  timeline.record(TraceTrack::kMain, "backward", t0 + microseconds(40), t0 + microseconds(90), 0);
  timeline.record(TraceTrack::kComm, "allreduce", t0 + microseconds(90), t0 + microseconds(95), 0,
                  1024, 1);
  timeline.record(TraceTrack::kMain, "optimizer", t0 + microseconds(96), t0 + microseconds(99), 0);
  timeline.record(TraceTrack::kMain, "step", t0, t0 + microseconds(100), 0);
  return timeline;
}

// output.timeline_layers: a layer's pass on its own track, its pass in "cat"; a track that was
// never reserved is not named.
TEST(Timeline, LayersTrackCarriesThePassAsCategory) {
  const Clock::time_point t0 = Clock::now();
  Timeline timeline(0, t0);
  timeline.reserve(TraceTrack::kMain, 4);
  timeline.reserve(TraceTrack::kLayers, 4);
  EXPECT_TRUE(timeline.reserved(TraceTrack::kLayers));
  EXPECT_FALSE(timeline.reserved(TraceTrack::kComm));
  timeline.record(TraceTrack::kMain, "forward", t0, t0 + microseconds(40), 7);
  timeline.record(TraceTrack::kLayers, "layer1.0.conv1", t0 + microseconds(5), t0 + microseconds(15), 7, -1, -1,
                  "forward");
  timeline.record(TraceTrack::kLayers, "layer1.0.conv1", t0 + microseconds(60), t0 + microseconds(80), 7, -1, -1,
                  "backward");
  const std::string path = temp_path("layers.json");
  write_trace_file(path, {timeline.events_json()});
  const nlohmann::json trace = parse_file(path);
  std::filesystem::remove(path);
  std::set<std::string> threads, categories;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    if (e["tid"] == 2) {
      EXPECT_EQ(e["name"], "layer1.0.conv1");
      EXPECT_EQ(e["args"]["step"], 7);
      categories.insert(e["cat"].get<std::string>());
    } else {
      EXPECT_FALSE(e.contains("cat"));
    }
  }
  EXPECT_EQ(threads, (std::set<std::string>{"main", "layers"}));
  EXPECT_EQ(categories, (std::set<std::string>{"forward", "backward"}));
}

TEST(Timeline, WritesValidChromeTraceJson) {
  const Clock::time_point t0 = Clock::now();
  Timeline timeline = one_step(3, t0);
  const std::string path = temp_path("one.json");
  write_trace_file(path, {timeline.events_json()}, R"({"gradient_bytes":5120})");
  const nlohmann::json trace = parse_file(path);
  std::filesystem::remove(path);
  EXPECT_EQ(trace["otherData"]["gradient_bytes"], 5120);
  const auto& events = trace["traceEvents"];
  ASSERT_TRUE(events.is_array());
  int complete = 0;
  bool named_process = false;
  std::set<std::string> metadata;
  for (const auto& e : events) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "M") {
      metadata.insert(e["name"].get<std::string>());
      if (e["name"] == "process_name") named_process = e["args"]["name"] == "rank 3";
      if (e["name"] == "thread_name") EXPECT_EQ(e["args"]["name"], e["tid"] == 0 ? "main" : "comm");
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ++complete;
    EXPECT_TRUE(e["ts"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_EQ(e["tid"], e["name"] == "allreduce" ? 1 : 0);
    EXPECT_EQ(e["args"]["step"], 0);
    if (e["name"] == "allreduce") EXPECT_TRUE(e["args"].contains("bytes"));
  }
  EXPECT_EQ(complete, 7);
  EXPECT_TRUE(named_process);
  // The Trace Event Format's metadata names, no others (viewers ignore unknown ones).
  EXPECT_EQ(metadata, (std::set<std::string>{"process_name", "process_sort_index", "thread_name",
                                             "thread_sort_index"}));
}

TEST(Timeline, EventsAreSortedAndNested) {
  const Clock::time_point t0 = Clock::now();
  const nlohmann::json events = nlohmann::json::parse("[" + one_step(0, t0).events_json() + "]");
  std::vector<nlohmann::json> main;
  for (const auto& e : events)
    if (e["ph"] == "X" && e["tid"] == 0) main.push_back(e);
  ASSERT_EQ(main.size(), 5u);
  // The enclosing step first (same start as data_wait, longer), then by start.
  EXPECT_EQ(main[0]["name"], "step");
  EXPECT_EQ(main[1]["name"], "data_wait");
  EXPECT_EQ(main[2]["name"], "forward");
  EXPECT_EQ(main[3]["name"], "backward");
  EXPECT_EQ(main[4]["name"], "optimizer");
  const double step_begin = main[0]["ts"], step_end = step_begin + main[0]["dur"].get<double>();
  for (std::size_t i = 1; i < main.size(); ++i) {
    const double begin = main[i]["ts"], end = begin + main[i]["dur"].get<double>();
    EXPECT_GE(begin, step_begin) << main[i];
    EXPECT_LE(end, step_end) << main[i];
    EXPECT_GE(begin, main[i - 1]["ts"].get<double>());
  }
  // Microseconds with the nanoseconds kept.
  EXPECT_DOUBLE_EQ(main[0]["dur"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(main[3]["ts"].get<double>(), 40.0);
}

TEST(Timeline, RanksConcatenateIntoOneTrace) {
  const Clock::time_point t0 = Clock::now();
  const std::string path = temp_path("merged.json");
  write_trace_file(path, {one_step(0, t0).events_json(), "", one_step(1, t0).events_json()});
  const nlohmann::json trace = parse_file(path);
  std::filesystem::remove(path);
  std::set<int> pids;
  int64_t bytes = 0;
  for (const auto& e : trace["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "allreduce") bytes += e["args"]["bytes"].get<int64_t>();
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(bytes, 2 * 5120);
}

TEST(Timeline, FullBufferDropsAndCounts) {
  const Clock::time_point t0 = Clock::now();
  Timeline timeline(0, t0);
  timeline.reserve(TraceTrack::kMain, 2);
  for (int i = 0; i < 5; ++i) timeline.record(TraceTrack::kMain, "forward", t0, t0, i);
  timeline.record(TraceTrack::kComm, "allreduce", t0, t0);  // never reserved: dropped
  EXPECT_EQ(timeline.events(TraceTrack::kMain).size(), 2u);
  EXPECT_EQ(timeline.events(TraceTrack::kComm).size(), 0u);
  EXPECT_EQ(timeline.dropped(), 4u);
  EXPECT_NO_THROW(nlohmann::json::parse("[" + timeline.events_json() + "]"));
}

TEST(Timeline, ScopeRecordsOnlyWithATimeline) {
  Timeline timeline(0, Clock::now());
  timeline.reserve(TraceTrack::kMain, 4);
  { TraceScope scope(&timeline, "evaluation", 7); }
  { TraceScope scope(nullptr, "evaluation", 8); }
  const auto events = timeline.events(TraceTrack::kMain);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_STREQ(events[0].name, "evaluation");
  EXPECT_EQ(events[0].step, 7);
  EXPECT_GE(events[0].dur_ns, 0);
}

TEST(Timeline, RankPaths) {
  EXPECT_EQ(rank_trace_path("out/timeline.json", 1), "out/timeline.rank1.json");
  EXPECT_EQ(rank_trace_path("trace", 0), "trace.rank0.json");
  EXPECT_EQ(rank_trace_path("/a/b.c/t.trace.json", 12), "/a/b.c/t.trace.rank12.json");
}

TEST(Timeline, UnwritablePathIsAnError) {
  EXPECT_THROW(write_trace_file("/proc/no/such/dir/t.json", {""}), std::exception);
}

}  // namespace
}  // namespace sdp
