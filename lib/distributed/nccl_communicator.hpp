// NcclCommunicator: the Communicator over NCCL and device memory (docs/architecture.md, "Communicators"), the device
// twin of MpiCommunicator. Implemented in nccl_communicator_cuda.cpp, built only when CMake
// finds NCCL (SDP_HAVE_NCCL); this header names no CUDA or NCCL type, so host code may
// include it in any build. Made by make_communicator (communicator_factory.hpp), not directly.
//
// Bootstrap (collective over the MPI group, the control plane): every rank checks it can
// drive options.device and the group agrees on that before anything else (a rank without
// its GPU is an InputError on every rank, never a hang); cudaSetDevice(options.device);
// rank 0 makes the ncclUniqueId and MPI_Bcasts it; every rank calls ncclCommInitRankConfig
// with a NON-BLOCKING config, so the host never blocks inside NCCL: init is polled and
// aborted after options.init_timeout_s, and the group agrees on its outcome.
//
// Collectives are enqueued on the communicator's own non-blocking CUDA stream and return a
// Work holding a CUDA event recorded after them (communicator.hpp, device backends). Buffers
// must be device memory of options.device; anything else is refused (std::logic_error).
// Point-to-point: a lone ncclRecv blocks its stream until the message arrives (and the
// peer's ncclSend may sit behind its own ncclRecv), so send()/recv() are collected and launched
// together in one ncclGroup when one of their Works is tested or waited, or before the next
// collective: any order of posting within one round works here. The batch completes as a whole (one
// kernel), so a pipeline that waits on a message whose matching operation the peer posts only after
// waiting on a later one of its own (deep MPI-style pipelining) deadlocks: exchange in rounds. NCCL
// has no tags: options.tag is not used, pairs match by peer in call order.
//
// Threads: one thread drives a communicator at a time (communicator.hpp); its Works may be
// polled from any thread, and abort() may come from any thread (the watchdog's).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/communicator_factory.hpp"
#include "distributed/watchdog.hpp"

namespace sdp {

class NcclCommunicator : public Communicator {
 public:
  // ncclCommAbort: operations still running on the device stop, Works not yet complete (and
  // every later call) throw RuntimeError naming `reason`. Idempotent; any thread. The
  // communicator cannot be used again: a job aborts all of them and ends (see below).
  virtual void abort(const std::string& reason) = 0;
  virtual bool aborted() const = 0;
  // Throws RuntimeError naming `what` when NCCL reports an asynchronous error (a peer gone; the
  // communicator is aborted first) or the communicator was aborted: what polling a Work checks,
  // for waits on device work that holds no Work of this communicator (a replayed CUDA graph).
  virtual void check_health(const char* what) = 0;
};

// Throws InputError when this process sees no CUDA device, options.device is not one it
// can drive, or another rank of the group cannot drive its own; RuntimeError naming the
// call, the rank and NCCL's message when CUDA or NCCL fails; TimeoutError after
// options.init_timeout_s. Defined only in builds with SDP_HAVE_NCCL (the factory calls it
// only there).
std::shared_ptr<NcclCommunicator> make_nccl_communicator(MPI_Comm group,
                                                         const CommunicatorOptions& options);

// The watchdog hook. An NCCL collective that never completes leaves its kernel spinning on
// the GPU, and a thread blocked in Work::wait() (cudaEventSynchronize) with it; only
// ncclCommAbort ends both. So the trainer's on_timeout handler (watchdog.hpp) aborts every
// NCCL communicator of the job (world, intra, inter) first, then ends the job as before:
//   watchdog(options, rank, board, {}, abort_nccl_then(nccl_comms, [t](const StallReport& r) {
//     abort_on_timeout(r, t); }))
// Communicators already gone are skipped (weak pointers: the handler does not keep them).
inline Watchdog::Handler abort_nccl_then(std::vector<std::weak_ptr<NcclCommunicator>> comms,
                                         Watchdog::Handler then) {
  return [comms = std::move(comms), then = std::move(then)](const StallReport& report) {
    for (const auto& weak : comms)
      if (auto comm = weak.lock()) comm->abort(report.message());
    if (then) then(report);
  };
}

}  // namespace sdp
