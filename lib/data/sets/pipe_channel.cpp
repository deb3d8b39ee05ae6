#include "data/sets/pipe_channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "core/bounded_queue.hpp"
#include "core/error.hpp"
#include "core/socket_io.hpp"
#include "core/floating_point.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tfrecord.hpp"

namespace sdp {

namespace {

using Clock = std::chrono::steady_clock;

// A frame on a socket (and an item of the feeder's own queue): a record's payload, the end of a
// pass, or the feeder's error, which every rank of the host then raises.
constexpr uint64_t kEndOfPass = ~uint64_t{0};
constexpr uint64_t kFeederError = ~uint64_t{0} - 1;

struct Frame {
  uint64_t kind = 0;  // a payload's length, kEndOfPass or kFeederError
  int64_t record = 0;
  int64_t label = 0;           // a sample's (label_offset already subtracted)
  std::vector<uint8_t> bytes;  // the sample's encoded image, or the error's text
};

// Local rank r's socket: an abstract Unix name (nothing in the file system to clean up).
sockaddr_un socket_address(const PipeOptions& o, int local_rank, socklen_t& length) {
  // Per job (token) and channel (role: the training and the test channel are read at once);
  // the host's index keeps simulated hosts on one machine apart.
  const std::string name = "sdp-pipe-" + o.token + "-" + o.role + "-" + std::to_string(o.host) + "-" +
                           std::to_string(local_rank);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  address.sun_path[0] = '\0';
  std::memcpy(address.sun_path + 1, name.data(),
              std::min(name.size(), sizeof address.sun_path - 2));
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                  std::min(name.size(), sizeof address.sun_path - 2));
  return address;
}

[[noreturn]] void socket_failure(const std::string& what) {
  throw RuntimeError("pipe mode: " + what + ": " + std::strerror(errno));
}

void send_all(int fd, const void* data, std::size_t n) {
  if (const int error = send_fully(fd, data, n)) {
    errno = error;
    socket_failure("a local rank's socket closed (it has stopped)");
  }
}

// False at the end of the stream before the first byte; throws on a partial read.
bool recv_all(int fd, void* data, std::size_t n) {
  const int64_t got = recv_fully(fd, data, n);
  if (got < 0) {
    errno = static_cast<int>(-got);
    socket_failure("reading from the host's pipe reader");
  }
  if (got == 0 && n > 0) return false;
  if (static_cast<std::size_t>(got) < n)
    throw RuntimeError("pipe mode: the host's pipe reader (local rank 0) stopped in the middle of a record");
  return true;
}

void send_frame(int fd, const Frame& frame) {
  const uint64_t header[3] = {frame.kind, static_cast<uint64_t>(frame.record), static_cast<uint64_t>(frame.label)};
  send_all(fd, header, sizeof header);
  if (frame.kind == kFeederError) {
    const uint64_t length = frame.bytes.size();
    send_all(fd, &length, sizeof length);
  }
  if (!frame.bytes.empty()) send_all(fd, frame.bytes.data(), frame.bytes.size());
}

bool recv_frame(int fd, Frame& frame) {
  uint64_t header[3];
  if (!recv_all(fd, header, sizeof header)) return false;
  frame.kind = header[0];
  frame.record = static_cast<int64_t>(header[1]);
  frame.label = static_cast<int64_t>(header[2]);
  uint64_t length = frame.kind;
  if (frame.kind == kEndOfPass) length = 0;
  if (frame.kind == kFeederError && !recv_all(fd, &length, sizeof length))
    throw RuntimeError("pipe mode: the host's pipe reader stopped in the middle of an error");
  if (length > static_cast<uint64_t>(std::max(kMaxTfRecordBytes, kMaxTarMemberBytes)))
    throw RuntimeError("pipe mode: a frame of " + std::to_string(length) +
                       " bytes from the host's pipe reader");
  frame.bytes.resize(length);
  if (length > 0 && !recv_all(fd, frame.bytes.data(), length))
    throw RuntimeError("pipe mode: the host's pipe reader stopped in the middle of a record");
  return true;
}

}  // namespace

std::string pipe_fifo_path(const std::string& channel, int64_t pass) {
  return channel + "_" + std::to_string(pass);
}

struct PipeRecords::Shared {
  explicit Shared(const PipeOptions& o) : options(o) {}

  PipeOptions options;
  std::atomic<bool> stop{false};
  // Local rank 0: the feeder's sockets to local ranks 1.., and this rank's own queue.
  std::vector<int> peers;
  static constexpr std::size_t kOwnQueue = 64;
  BoundedQueue<Frame> own{kOwnQueue};  // closed when the feeder ends
  std::atomic<int64_t> opening{-1};  // the pass whose FIFO the feeder is opening (a blocking open)
  std::thread feeder;
  // Local ranks > 0: the listening socket and the feeder's connection.
  int listen_fd = -1, connection = -1;

  double seconds_left(Clock::time_point start) const {
    return options.timeout_s - std::chrono::duration<double>(Clock::now() - start).count();
  }

  void connect_peers() {
    peers.assign(static_cast<std::size_t>(options.local_size), -1);
    for (int r = 1; r < options.local_size; ++r) {
      const auto start = Clock::now();
      for (;;) {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) socket_failure("socket");
        socklen_t length = 0;
        const sockaddr_un address = socket_address(options, r, length);
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0) {
          peers[static_cast<std::size_t>(r)] = fd;
          break;
        }
        ::close(fd);
        if (stop) return;
        if (seconds_left(start) <= 0)
          throw RuntimeError("pipe mode: local rank " + std::to_string(r) +
                             " did not listen for its records within " +
                             std::to_string(static_cast<int>(options.timeout_s)) + " s");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  // Hands a frame to local rank r: this rank's queue, or r's socket.
  void deliver(int r, Frame&& frame) {
    if (r != 0) return send_frame(peers[static_cast<std::size_t>(r)], frame);
    own.push(std::move(frame));  // dropped once cancelled
  }

  void wait_for_fifo(const std::string& fifo) {
    const auto start = Clock::now();
    std::error_code ec;
    while (!std::filesystem::exists(fifo, ec)) {
      if (stop) return;
      if (seconds_left(start) <= 0)
        throw InputError(fifo + ": no such FIFO after " +
                         std::to_string(static_cast<int>(options.timeout_s)) +
                         " s: a channel in Pipe mode (TrainingInputMode: Pipe) gets <channel>_0, "
                         "_1, ..., one per "
                         "pass, from SageMaker");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void feed() {
    const PipeOptions& o = options;
    try {
      connect_peers();
      for (int64_t pass = o.first_pass; !stop && (o.passes < 0 || pass < o.first_pass + o.passes); ++pass) {
        const std::string fifo = pipe_fifo_path(o.path, pass);
        wait_for_fifo(fifo);
        if (stop) break;
        opening = pass;
        // Blocks until SageMaker's writer opens the FIFO. Tar archives arrive back to back.
        const std::unique_ptr<ShardReader> reader = open_stream_shard(fifo, 0, o.records, /*stream=*/true);
        opening = -1;
        int64_t read = 0, kept = 0;
        EncodedRecord sample;
        while (!stop && reader->next(sample)) {
          const int64_t record = read++;
          if (!o.host_sharded && record % o.hosts != o.host) continue;
          const uint64_t bytes = sample.image.size();
          deliver(static_cast<int>(kept++ % o.local_size), Frame{bytes, record, sample.label, std::move(sample.image)});
        }
        if (stop) break;
        if (read == 0) throw InputError(fifo + ": the FIFO closed before its first record");
        for (int r = 0; r < o.local_size; ++r) deliver(r, Frame{kEndOfPass, 0, 0, {}});
      }
    } catch (const std::exception& e) {
      const std::string what = e.what();
      for (int r = 0; r < o.local_size; ++r) {
        try {
          if (r == 0 || peers.size() > static_cast<std::size_t>(r)) {
            if (r != 0 && peers[static_cast<std::size_t>(r)] < 0) continue;
            deliver(r, Frame{kFeederError, 0, 0, std::vector<uint8_t>(what.begin(), what.end())});
          }
        } catch (const std::exception&) {  // that rank is gone: nothing to tell it
        }
      }
    }
    own.close();
  }

  void accept_feeder() {
    const auto start = Clock::now();
    pollfd p{listen_fd, POLLIN, 0};
    for (;;) {
      if (stop) throw RuntimeError("pipe mode: cancelled");
      const int ready = ::poll(&p, 1, 100);
      if (ready > 0) break;
      if (ready < 0 && errno != EINTR) socket_failure("waiting for the host's pipe reader");
      if (seconds_left(start) <= 0)
        throw RuntimeError(
            "pipe mode: the host's pipe reader (local rank 0) did not connect within " +
            std::to_string(static_cast<int>(options.timeout_s)) + " s");
    }
    connection = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) socket_failure("accepting the host's pipe reader");
  }
};

namespace {

// The records of one pass as this rank receives them: from the feeder's queue (local rank 0) or
// from its socket (the others), each sample already parsed by the feeder (label and image).
class PipePassReader final : public ShardReader {
 public:
  explicit PipePassReader(PipeRecords::Shared& shared) : s_(shared) {}

  bool next(EncodedRecord& record) override {
    Frame frame;
    if (s_.options.local_rank == 0) {
      if (!s_.own.pop(frame)) throw RuntimeError("pipe mode: the host's pipe reader stopped");
    } else if (!recv_frame(s_.connection, frame)) {
      throw RuntimeError("pipe mode: the host's pipe reader (local rank 0) closed its connection");
    }
    if (frame.kind == kEndOfPass) return false;
    if (frame.kind == kFeederError)
      throw InputError(std::string(frame.bytes.begin(), frame.bytes.end()));
    // The feeder parsed the sample (its errors name the FIFO and the record).
    record.label = frame.label;
    record.image = std::move(frame.bytes);
    record.shard = 0;
    record.record = frame.record;
    return true;
  }

 private:
  PipeRecords::Shared& s_;
};

}  // namespace

PipeRecords::PipeRecords(const PipeOptions& options)
    : options_(options), shared_(std::make_shared<Shared>(options)) {
  if (options.local_rank > 0) {
    shared_->listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (shared_->listen_fd < 0) socket_failure("socket");
    socklen_t length = 0;
    const sockaddr_un address = socket_address(options, options.local_rank, length);
    if (::bind(shared_->listen_fd, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
        ::listen(shared_->listen_fd, 1) != 0)
      socket_failure("listening for the host's pipe reader");
    return;
  }
  // The feeder owns a reference: a thread stuck reading a FIFO whose writer went quiet is let
  // go at destruction, and must not outlive what it uses.
  std::shared_ptr<Shared> shared = shared_;
  shared_->feeder = start_thread([shared] { shared->feed(); });
}

PipeRecords::~PipeRecords() {
  cancel();
  Shared& s = *shared_;
  if (s.feeder.joinable()) {
    if (s.own.wait_closed(std::chrono::seconds(5))) {
      s.feeder.join();
    } else {
      s.feeder.detach();  // blocked in a read of a FIFO whose writer is alive but silent
      return;             // it still uses the sockets
    }
  }
  for (int fd : s.peers)
    if (fd >= 0) ::close(fd);
  if (s.connection >= 0) ::close(s.connection);
  if (s.listen_fd >= 0) ::close(s.listen_fd);
}

void PipeRecords::cancel() {
  Shared& s = *shared_;
  s.stop = true;
  s.own.stop();
  for (int fd : s.peers)
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  if (s.connection >= 0) ::shutdown(s.connection, SHUT_RDWR);
  if (s.listen_fd >= 0) ::shutdown(s.listen_fd, SHUT_RDWR);
  // A feeder blocked opening a FIFO that no writer opens: opening it for writing releases it.
  if (const int64_t pass = s.opening; pass >= 0) {
    const int fd =
        ::open(pipe_fifo_path(options_.path, pass).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
  }
}

// The pass needs no number: the feeder deals the passes' FIFOs in order, one after the other.
std::unique_ptr<ShardReader> PipeRecords::open_pass(int64_t /*pass*/) {
  if (options_.local_rank > 0 && shared_->connection < 0) shared_->accept_feeder();
  return std::make_unique<PipePassReader>(*shared_);
}

std::string PipeRecords::where(const StreamedRecord& r) const {
  return pipe_fifo_path(options_.path, r.pass) + ": record " + std::to_string(r.record.record) +
         " (from 0)";
}

// ---- PipeImageSet ----

PipeImageSet::PipeImageSet(const PipeOptions& pipe, const EncodedImageOptions& images,
                           int64_t samples_per_epoch, int64_t shuffle_buffer, int world_rank,
                           int world_size)
    : pipe_(pipe),
      images_(images),
      samples_per_epoch_(samples_per_epoch),
      shuffle_buffer_(shuffle_buffer),
      world_rank_(world_rank),
      world_size_(world_size) {
  if (samples_per_epoch < 1)
    throw InputError(
        "key 'data.samples_per_epoch': " + pipe.path +
        " is a channel in Pipe mode, whose size cannot be known before it is read: set it to the "
        "number of training records");
  images_ = checked_image_options(name(), images_, images_.num_classes);
}

std::string PipeImageSet::describe() const {
  if (samples_per_epoch_ < 0)
    return name() + ": each evaluation reads the next FIFO (" + pipe_fifo_path(pipe_.path, 0) +
           ", _1, ...) to its end, by local rank 0 of each host" +
           (pipe_.host_sharded ? " (ShardedByS3Key: each host its own part)" : "");
  return name() + ": " + std::to_string(samples_per_epoch_) +
         " samples per epoch (data.samples_per_epoch), read from " + pipe_fifo_path(pipe_.path, 0) +
         ", _1, ... by local rank 0 of each host" +
         (pipe_.host_sharded ? " (ShardedByS3Key: each host its own part)" : "") +
         ", through a shuffle buffer of " + std::to_string(shuffle_buffer_) + " records";
}

std::unique_ptr<TrainLoader> PipeImageSet::make_train_loader(const LoaderOptions& options) const {
  LoaderOptions counted = options;
  counted.rank = world_rank_;
  counted.world = world_size_;
  return std::make_unique<StreamTrainLoader>(std::make_shared<PipeRecords>(pipe_),
                                             samples_per_epoch_, images_, counted, shuffle_buffer_);
}

PipeImageSet::PipeImageSet(const PipeOptions& pipe, const EncodedImageOptions& images)
    : pipe_(pipe), images_(images), samples_per_epoch_(-1), shuffle_buffer_(0), world_rank_(0), world_size_(1) {
  images_ = checked_image_options(name(), images_, images_.num_classes);
}

std::unique_ptr<PipeImageSet> PipeImageSet::for_evaluation(const PipeOptions& pipe, const EncodedImageOptions& images) {
  PipeOptions test = pipe;
  test.role = "test";
  return std::unique_ptr<PipeImageSet>(new PipeImageSet(test, images));
}

std::unique_ptr<EvalLoader> PipeImageSet::make_eval_loader(int64_t batch_size, int rank, int, int prefetch) const {
  PipeOptions one_pass = pipe_;
  one_pass.first_pass = evaluations_++;
  one_pass.passes = 1;
  return std::make_unique<StreamEvalLoader>(std::make_shared<PipeRecords>(one_pass), images_, batch_size, rank,
                                            prefetch, one_pass.first_pass);
}

}  // namespace sdp
