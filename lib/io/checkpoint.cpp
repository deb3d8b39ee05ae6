#include "io/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "core/error.hpp"
#include "core/floating_point.hpp"
#include "io/safetensors.hpp"

namespace sdp {

namespace fs = std::filesystem;

const std::string& Checkpoint::meta(const std::string& key) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) throw InputError(path + ": checkpoint metadata lacks '" + key + "'");
  return it->second;
}

int64_t Checkpoint::meta_int(const std::string& key) const {
  const std::string& text = meta(key);
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw InputError(path + ": checkpoint metadata '" + key + "' is not an integer: '" + text + "'");
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%09lld.safetensors", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::string checkpoint_part_path(const std::string& dir, int64_t step, int index, int count) {
  char name[96];
  std::snprintf(name, sizeof name, "ckpt-%09lld.shard-%05d-of-%05d.safetensors", static_cast<long long>(step),
                index + 1, count);
  return (fs::path(dir) / name).string();
}

namespace {

// The parts (checkpoint_part_path) in `dir`: (step, path).
std::vector<std::pair<int64_t, std::string>> list_parts(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  static const std::regex name(R"(ckpt-([0-9]{1,18})\.shard-[0-9]{5}-of-[0-9]{5}\.safetensors)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name)) found.emplace_back(std::stoll(m[1].str()), entry.path().string());
  }
  return found;
}

}  // namespace

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  // Only final names: a temporary file of a write in progress (".tmp.<pid>") never matches.
  static const std::regex name(R"(ckpt-([0-9]{1,18})\.safetensors)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name))
      found.emplace_back(std::stoll(m[1].str()), entry.path().string());
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

std::vector<std::string> remove_interrupted_checkpoint_writes(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  static const std::regex name(R"(ckpt-[0-9]{1,18}(\.shard-[0-9]{5}-of-[0-9]{5})?\.safetensors\.tmp\.[0-9]+)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, name)) continue;
    std::error_code removing;
    if (fs::remove(entry.path(), removing)) removed.push_back(entry.path().string());
  }
  for (const auto& [step, part] : list_parts(dir)) {
    std::error_code exists;
    if (fs::exists(checkpoint_path(dir, step), exists)) continue;
    std::error_code removing;
    if (fs::remove(part, removing)) removed.push_back(part);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

Checkpoint read_checkpoint(const std::string& path) {
  SafetensorsContent content = load_safetensors(path);
  Checkpoint c;
  c.path = path;
  c.metadata = std::move(content.metadata);
  c.tensors = std::move(content.tensors);
  c.checksummed = content.checksummed;
  if (c.metadata.count("format") == 0 || c.metadata["format"] != kCheckpointFormat)
    throw InputError(path + ": not an sdp-train checkpoint (metadata 'format' is not '" +
                     std::string(kCheckpointFormat) + "')");
  c.step = c.meta_int("step");
  return c;
}

std::optional<Checkpoint> find_newest_checkpoint(const std::string& dir,
                                                 std::vector<std::string>* skipped) {
  for (const auto& [step, path] : list_checkpoints(dir)) {
    try {
      return read_checkpoint(path);
    } catch (const Error& e) {
      if (skipped != nullptr) skipped->push_back(e.what());
    }
  }
  return std::nullopt;
}

void add_to_snapshot(CheckpointSnapshot& snapshot, const ArenaViews& group, Tensor* reuse) {
  Tensor copy;
  if (reuse != nullptr && reuse->defined() && reuse->nbytes() == group.arena.nbytes() &&
      reuse->dtype() == group.arena.dtype() && reuse->device().is_cpu())
    copy = *reuse;  // shares the buffer
  else
    copy = Tensor(group.arena.shape(), group.arena.dtype(), Device::cpu());
  if (reuse != nullptr) *reuse = copy;
  copy.copy_from(group.arena);
  const char* live = static_cast<const char*>(group.arena.raw());
  auto owner = std::make_shared<Tensor>(copy);
  for (const NamedTensor& v : group.views) {
    const std::ptrdiff_t offset = static_cast<const char*>(v.tensor.raw()) - live;
    if (offset < 0 || static_cast<std::size_t>(offset) + v.tensor.nbytes() > group.arena.nbytes())
      throw std::logic_error("add_to_snapshot: '" + v.name + "' is not inside its arena");
    snapshot.tensors.push_back(
        {v.name, Tensor::view_of(owner, static_cast<char*>(copy.raw()) + offset, v.tensor.shape(),
                                 v.tensor.dtype())});
  }
  snapshot.storage.push_back(std::move(copy));
}

std::string write_checkpoint(const CheckpointSnapshot& snapshot) {
  const std::string path = checkpoint_path(snapshot.dir, snapshot.step);
  try {
    save_safetensors(path, snapshot.tensors, snapshot.metadata);
  } catch (const RuntimeError& e) {
    throw RuntimeError("the checkpoint of step " + std::to_string(snapshot.step) +
                       " was not written (earlier checkpoints are kept): " + e.what() +
                       "; free space there or choose another checkpoint.dir");
  }
  // Only now, with the new checkpoint complete on disk, may older ones go.
  if (snapshot.keep_last > 0) {
    const auto all = list_checkpoints(snapshot.dir);
    for (std::size_t i = static_cast<std::size_t>(snapshot.keep_last); i < all.size(); ++i) {
      std::error_code ec;
      fs::remove(all[i].second, ec);  // best effort: a leftover old file harms nothing
    }
    if (all.size() > static_cast<std::size_t>(snapshot.keep_last)) {
      const int64_t oldest_kept = all[static_cast<std::size_t>(snapshot.keep_last) - 1].first;
      for (const auto& [step, part] : list_parts(snapshot.dir))
        if (step < oldest_kept) {
          std::error_code ec;
          fs::remove(part, ec);
        }
    }
  }
  return path;
}

CheckpointWriter::CheckpointWriter() : thread_(start_thread([this] { run(); })) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CheckpointWriter::submit(CheckpointSnapshot snapshot) {
  wait();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = std::move(snapshot);
    busy_ = true;
  }
  cv_.notify_all();
}

void CheckpointWriter::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !busy_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

std::string CheckpointWriter::last_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_written_;
}

void CheckpointWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // A pending write is finished even when stopping: the destructor must not lose the
    // final checkpoint of a job that did not wait().
    cv_.wait(lock, [this] { return pending_.has_value() || stop_; });
    if (!pending_) return;
    CheckpointSnapshot job = std::move(*pending_);
    pending_.reset();
    lock.unlock();
    std::exception_ptr error;
    std::string written;
    try {
      written = write_checkpoint(job);
    } catch (...) {
      error = std::current_exception();
    }
    job = CheckpointSnapshot{};  // free the copies before reporting done
    lock.lock();
    if (error)
      error_ = error;
    else
      last_written_ = written;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace sdp
