#include "obs/tensorboard.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/formats/tfrecord.hpp"

namespace sdp {

namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_tag(std::vector<uint8_t>& out, uint32_t number, uint32_t wire_type) {
  put_varint(out, uint64_t{number} << 3 | wire_type);
}

void put_little_endian(std::vector<uint8_t>& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(bits >> (8 * i)));
}

void put_double(std::vector<uint8_t>& out, uint32_t number, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_tag(out, number, kFixed64);
  put_little_endian(out, bits, 8);
}

void put_float(std::vector<uint8_t>& out, uint32_t number, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_tag(out, number, kFixed32);
  put_little_endian(out, bits, 4);
}

void put_bytes(std::vector<uint8_t>& out, uint32_t number, const void* data, std::size_t size) {
  put_tag(out, number, kLengthDelimited);
  put_varint(out, size);
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + size);
}

// Event's fields.
constexpr uint32_t kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
// Summary.value, and Summary.Value's fields.
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

std::string tensorboard_file_name(int64_t unix_seconds, const std::string& host) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(unix_seconds));
  return std::string("events.out.tfevents.") + seconds + "." + host;
}

std::vector<uint8_t> encode_file_version_event(double wall_time) {
  static constexpr char kVersion[] = "brain.Event:2";  // the version TensorBoard expects
  std::vector<uint8_t> event;
  put_double(event, kWallTime, wall_time);
  put_bytes(event, kFileVersion, kVersion, sizeof kVersion - 1);
  return event;
}

std::vector<uint8_t> encode_scalars_event(double wall_time, int64_t step,
                                          const std::vector<std::pair<std::string, float>>& scalars) {
  std::vector<uint8_t> summary;
  for (const auto& [tag, value] : scalars) {
    std::vector<uint8_t> entry;
    put_bytes(entry, kValueTag, tag.data(), tag.size());
    put_float(entry, kValueSimpleValue, value);
    put_bytes(summary, kSummaryValue, entry.data(), entry.size());
  }
  std::vector<uint8_t> event;
  put_double(event, kWallTime, wall_time);
  put_tag(event, kStep, kVarint);
  put_varint(event, static_cast<uint64_t>(step));  // int64: a negative step is ten bytes
  put_bytes(event, kSummary, summary.data(), summary.size());
  return event;
}

std::string tensorboard_tag(const std::string& kind, const std::string& key) {
  if (kind == "train") {
    if (key == "train_loss") return "train/loss";
    if (key == "lr" || key == "images_per_sec" || key == "data_wait_ms" || key == "exposed_comm_ms")
      return "train/" + key;
  } else if (kind == "eval") {
    if (key == "test_loss") return "test/loss";
    if (key == "test_accuracy") return "test/accuracy";
  }
  return "";
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create output.tensorboard '" + dir + "': " + ec.message());
  const double now = unix_time_now();
  const std::string name = tensorboard_file_name(static_cast<int64_t>(now), host_name());
  // Two runs in the same second into one directory (a job restarted at once) keep both files.
  path_ = (fs::path(dir) / name).string();
  for (int n = 1; fs::exists(path_, ec); ++n) path_ = (fs::path(dir) / (name + "." + std::to_string(n))).string();
  writer_ = std::make_unique<TfRecordWriter>(path_);
  writer_->write(encode_file_version_event(now));
  writer_->flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (!writer_) return;
  try {
    writer_->close();
  } catch (const Error& e) {
    log_warn(std::string("output.tensorboard: ") + e.what());
  }
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars) {
  if (!writer_ || scalars.empty()) return;
  try {
    writer_->write(encode_scalars_event(unix_time_now(), step, scalars));
    writer_->flush();
  } catch (const Error& e) {
    log_warn(std::string("output.tensorboard: ") + e.what() + "; no more TensorBoard events are written (training goes on)");
    writer_.reset();
  }
}

}  // namespace sdp
