// Checkpoint files (docs/guides/failures.md): one safetensors file per checkpoint,
// <dir>/ckpt-<step, 9 digits>.safetensors, holding named tensors (the model's parameters and
// buffers under their layer names, optimizer state under "optimizer.") and string metadata
// with "format" = kCheckpointFormat. This module knows files, not training: train/ decides
// what goes in and what the metadata means.
//
// Contract:
// - A checkpoint is written atomically (io/atomic_file.hpp): under its final name it is
//   always complete. Older checkpoints beyond `keep_last` are removed only after the new one
//   is on disk, so a failed write (disk full, read-only) never costs the previous one.
// - Reading validates the whole file (header, offsets, sizes, the format tag) and every
//   tensor's checksum; a file that fails is an InputError naming it (and the damaged tensor).
//   find_newest_checkpoint() skips such files, newest first.
// - CheckpointWriter writes on its own thread from a snapshot (copies of the tensors), so the
//   caller's arenas may change as soon as submit() returns. One write is in flight at a time.
//   Call it from one thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace sdp {

inline constexpr const char* kCheckpointFormat = "sdp-train checkpoint";

struct Checkpoint {
  std::string path;
  int64_t step = 0;
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors;  // host memory
  bool checksummed = false;          // every tensor checked against its CRC-32C (io/safetensors.hpp)

  // The metadata value of `key`; InputError naming the file when it is missing.
  const std::string& meta(const std::string& key) const;
  int64_t meta_int(const std::string& key) const;
};

// <dir>/ckpt-000000123.safetensors
std::string checkpoint_path(const std::string& dir, int64_t step);

// A checkpoint whose parts are written by several ranks (a row-sharded CTR table): part
// `index` of `count` is <dir>/ckpt-000000123.shard-00002-of-00004.safetensors (numbered from 1,
// as sharded safetensors files are). The parts are written first; ckpt-N.safetensors, written
// last, makes the set a checkpoint: without it the parts are an unfinished write. Removing a
// checkpoint removes its parts.
std::string checkpoint_part_path(const std::string& dir, int64_t step, int index, int count);

// Checkpoint files of `dir` by the step in their name, newest first ([] if none or no dir).
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// Reads and validates one checkpoint. Throws InputError naming the file.
Checkpoint read_checkpoint(const std::string& path);

// Removes the temporary files ("ckpt-N.safetensors.tmp.<pid>") that a write cut short by a
// crash or kill -9 left in `dir`, and the parts of a set whose ckpt-N.safetensors was never
// written, and returns their paths. Call only while no write into
// `dir` is in progress (before the job's first checkpoint): the directory is the job's own.
std::vector<std::string> remove_interrupted_checkpoint_writes(const std::string& dir);

// The newest checkpoint of `dir` that reads completely; every newer one that does not is
// appended to `skipped` as "path: reason". nullopt when there is none.
std::optional<Checkpoint> find_newest_checkpoint(const std::string& dir,
                                                 std::vector<std::string>* skipped);

// Everything one checkpoint write needs, owning its memory.
struct CheckpointSnapshot {
  std::string dir;
  int64_t step = 0;
  int keep_last = 0;  // <= 0: keep all
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors;  // views into `storage`
  std::vector<Tensor> storage;       // host copies of the arenas
};

// A group of tensors that are views into one arena (any device): copied with one copy.
struct ArenaViews {
  Tensor arena;
  std::vector<NamedTensor> views;  // each lies inside `arena`
};

// Copies the arena to host memory and points the snapshot's tensors at the copy. With
// `reuse`, the copy goes into *reuse when it has the arena's size (else a new buffer is made
// and kept there): fresh memory costs its page faults on every checkpoint (ResNet-50: 110 ms
// of a 140 ms snapshot), reused memory only the copy. The caller must not reuse a buffer
// while a write from it is in flight (CheckpointWriter::wait first).
void add_to_snapshot(CheckpointSnapshot& snapshot, const ArenaViews& group,
                     Tensor* reuse = nullptr);

// Writes the snapshot atomically and removes the oldest checkpoints beyond keep_last.
// Returns the path written. Throws RuntimeError naming the path on failure.
std::string write_checkpoint(const CheckpointSnapshot& snapshot);

class CheckpointWriter {
 public:
  CheckpointWriter();
  ~CheckpointWriter();  // waits for the write in flight (its error is dropped: see wait())
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the previous write (rethrowing its error), then starts writing `snapshot`.
  void submit(CheckpointSnapshot snapshot);
  // Waits until nothing is in flight; rethrows the error of a failed write once.
  void wait();
  // The path of the last write that completed ("" if none).
  std::string last_written() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<CheckpointSnapshot> pending_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::string last_written_;
  std::thread thread_;  // last: started after the state it uses
};

}  // namespace sdp
