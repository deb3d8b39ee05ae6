#include "distributed/staged_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/device_memory.hpp"

namespace sdp {

StagedCommunicator::StagedCommunicator(std::shared_ptr<Communicator> host,
                                       std::shared_ptr<Stream> copy_stream, int64_t chunk_bytes)
    : host_(std::move(host)),
      stream_(std::move(copy_stream)),
      chunk_bytes_(std::max<int64_t>(chunk_bytes, 64)) {
  if (!host_ || !stream_)
    throw std::invalid_argument("StagedCommunicator: needs a host communicator and a stream");
  if (!host_->device().is_cpu())
    throw std::invalid_argument(
        "StagedCommunicator: the host communicator must move host memory, not " +
        host_->device().str());
  for (auto& event : copied_in_) event = stream_->make_event();
}

void StagedCommunicator::check_buffer(const CommBuffer& buffer, const char* op) const {
  if (!(buffer.device == device()))
    throw std::logic_error(std::string("StagedCommunicator::") + op + ": buffer on " +
                           buffer.device.str() + ", but this communicator stages " +
                           device().str());
}

std::vector<StagedCommunicator::Round> StagedCommunicator::slice_rounds(
    int64_t count, int64_t element_size) const {
  const int64_t per_round = std::max<int64_t>(1, chunk_bytes_ / element_size);
  std::vector<Round> rounds;
  for (int64_t offset = 0; offset < count; offset += per_round) {
    Round round;
    round.staged_count = std::min(per_round, count - offset);
    round.in.push_back({offset, round.staged_count, 0});
    round.out = round.in;
    rounds.push_back(std::move(round));
  }
  return rounds;
}

std::vector<StagedCommunicator::Round> StagedCommunicator::part_rounds(
    const std::vector<int64_t>& counts, int64_t per_rank, int me, bool gather) {
  const std::vector<int64_t> offsets = part_offsets(counts);
  const int64_t longest = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  per_rank = std::max<int64_t>(per_rank, 1);
  std::vector<Round> rounds;
  for (int64_t start = 0; start < longest; start += per_rank) {
    Round round;
    for (size_t r = 0; r < counts.size(); ++r) {
      const int64_t n = std::clamp<int64_t>(counts[r] - start, 0, per_rank);
      const Piece piece{offsets[r] + start, n, round.staged_count};
      round.counts.push_back(n);
      round.staged_count += n;
      if (n == 0) continue;
      const bool mine = static_cast<int>(r) == me;
      // reduce_scatter: every part in, mine back; allgather: mine in, every part back.
      if (gather ? mine : true) round.in.push_back(piece);
      if (gather ? true : mine) round.out.push_back(piece);
    }
    rounds.push_back(std::move(round));
  }
  return rounds;
}

std::vector<StagedCommunicator::Round> StagedCommunicator::my_part_rounds(const CommBuffer& buffer,
                                                                          const std::vector<int64_t>& counts,
                                                                          bool gather) const {
  // A round holds a slice of every rank's part: each slice is a size()-th of a chunk.
  const int64_t per_rank = chunk_bytes_ / buffer.element_size() / std::max(1, size());
  return part_rounds(counts, per_rank, rank(), gather);
}

std::shared_ptr<Work> StagedCommunicator::run(
    const CommBuffer& buffer, const std::vector<Round>& rounds,
    const std::function<void(const CommBuffer&, const Round&)>& host_op) {
  if (rounds.empty()) return completed_work();
  const int64_t element = buffer.element_size();
  int64_t most = 0;
  for (const Round& round : rounds) most = std::max(most, round.staged_count * element);
  if (most > slot_bytes_) {
    // Nothing may still read the old slots: their last copies back were queued on stream_.
    stream_->synchronize();
    for (auto& slot : slots_) slot = allocate_pinned_host(static_cast<std::size_t>(most));
    slot_bytes_ = most;
  }
  const auto slot_of = [&](size_t k) { return static_cast<char*>(slots_[k % 2].get()); };
  const auto copy_in = [&](size_t k) {
    for (const Piece& p : rounds[k].in)
      stream_->copy_to_host_async(slot_of(k) + p.staged_offset * element,
                                  buffer.bytes() + p.device_offset * element,
                                  static_cast<std::size_t>(p.count * element));
    copied_in_[k % 2]->record();
  };
  copy_in(0);
  for (size_t k = 0; k < rounds.size(); ++k) {
    // Round k+1's copies in are queued behind round k-1's copies back (the same stream), so
    // they never overwrite a slot that is still being read.
    if (k + 1 < rounds.size()) copy_in(k + 1);
    copied_in_[k % 2]->synchronize();
    host_op(CommBuffer{slot_of(k), rounds[k].staged_count, buffer.dtype, Device::cpu()}, rounds[k]);
    for (const Piece& p : rounds[k].out)
      stream_->copy_from_host_async(buffer.bytes() + p.device_offset * element,
                                    slot_of(k) + p.staged_offset * element,
                                    static_cast<std::size_t>(p.count * element));
  }
  // A host-memory stream that queues (tests') must be done before a host Work says so.
  if (stream_->device().is_cpu()) stream_->synchronize();
  return work_after(*stream_);
}

std::shared_ptr<Work> StagedCommunicator::allreduce(const CommBuffer& buffer,
                                                    const AllreduceOptions& options) {
  check_buffer(buffer, "allreduce");
  return run(
      buffer, slice_rounds(buffer.count, buffer.element_size()),
      [&](const CommBuffer& slot, const Round&) { host_->allreduce(slot, options)->wait(); });
}

std::shared_ptr<Work> StagedCommunicator::broadcast(const CommBuffer& buffer,
                                                    const BroadcastOptions& options) {
  check_buffer(buffer, "broadcast");
  std::vector<Round> rounds = slice_rounds(buffer.count, buffer.element_size());
  if (rank() != options.root)
    for (Round& round : rounds) round.in.clear();  // only the root's bytes go out
  return run(buffer, rounds, [&](const CommBuffer& slot, const Round&) {
    host_->broadcast(slot, options)->wait();
  });
}

std::shared_ptr<Work> StagedCommunicator::reduce_scatter(const CommBuffer& buffer,
                                                         const std::vector<int64_t>& counts,
                                                         const ReduceScatterOptions& options) {
  check_buffer(buffer, "reduce_scatter");
  return run(buffer, my_part_rounds(buffer, counts, false),
             [&](const CommBuffer& slot, const Round& round) {
               host_->reduce_scatter(slot, round.counts, options)->wait();
             });
}

std::shared_ptr<Work> StagedCommunicator::allgather(const CommBuffer& buffer,
                                                    const std::vector<int64_t>& counts) {
  check_buffer(buffer, "allgather");
  return run(buffer, my_part_rounds(buffer, counts, true),
             [&](const CommBuffer& slot, const Round& round) {
               host_->allgather(slot, round.counts)->wait();
             });
}

namespace {

// A point-to-point message through its own host copy of the buffer. Not in rounds: a ring
// posts its receive before its send, and a receive that waited for its message before
// returning would never see the peer's send. `then` runs once, after the host message.
class StagedMessage final : public Work {
 public:
  StagedMessage(std::shared_ptr<Work> host, std::shared_ptr<void> staging,
                std::function<void()> then)
      : host_(std::move(host)), staging_(std::move(staging)), then_(std::move(then)) {}
  void wait() override {
    host_->wait();
    finish();
  }
  bool wait(std::chrono::nanoseconds timeout) override {
    if (!host_->wait(timeout)) return false;
    finish();
    return true;
  }
  bool test() override {
    if (!host_->test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (then_) std::exchange(then_, nullptr)();
  }
  std::shared_ptr<Work> host_;
  std::shared_ptr<void> staging_;
  std::function<void()> then_;
};

}  // namespace

std::shared_ptr<Work> StagedCommunicator::send(const CommBuffer& buffer, int peer,
                                               const PointToPointOptions& options) {
  check_buffer(buffer, "send");
  auto staging =
      allocate_pinned_host(static_cast<std::size_t>(std::max<int64_t>(buffer.nbytes(), 1)));
  stream_->copy_to_host_async(staging.get(), buffer.data,
                              static_cast<std::size_t>(buffer.nbytes()));
  stream_->synchronize();
  auto host = host_->send(CommBuffer{staging.get(), buffer.count, buffer.dtype, Device::cpu()},
                          peer, options);
  return std::make_shared<StagedMessage>(std::move(host), std::move(staging), nullptr);
}

std::shared_ptr<Work> StagedCommunicator::recv(const CommBuffer& buffer, int peer,
                                               const PointToPointOptions& options) {
  check_buffer(buffer, "recv");
  auto staging =
      allocate_pinned_host(static_cast<std::size_t>(std::max<int64_t>(buffer.nbytes(), 1)));
  auto host = host_->recv(CommBuffer{staging.get(), buffer.count, buffer.dtype, Device::cpu()},
                          peer, options);
  void* staged = staging.get();
  return std::make_shared<StagedMessage>(
      std::move(host), std::move(staging), [this, buffer, staged] {
        stream_->copy_from_host_async(buffer.data, staged,
                                      static_cast<std::size_t>(buffer.nbytes()));
        stream_->synchronize();
      });
}

}  // namespace sdp
