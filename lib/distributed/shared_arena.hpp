// SharedArena: node-shared memory for collectives without copies. Every rank of a node
// (the `intra` communicator) owns one segment of the same size in an MPI-3 shared window
// (MPI_Win_allocate_shared) and can load/store every peer's segment directly.
//
// Use: place the gradient arena in it, so the intra-node phase of the AllReduce reduces
// straight out of the peers' gradients (shm_collectives.hpp):
//   auto arena = SharedArena::create(world.intra(), store.grad_arena().nbytes());
//   store.rebind_grad_arena(arena->owner(), arena->data());   // before the first forward
//
// create() and the destructor are collective over `intra` (the window is created and freed
// by all ranks of the node together): keep the arena alive on every rank for the same span
// of the program, and destroy it before MPI_Finalize.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/mpi_communicator.hpp"

namespace sdp {

class SharedArena : public std::enable_shared_from_this<SharedArena> {
 public:
  // `wait`: how sync() waits for the node's other ranks (MpiWait, mpi_communicator.hpp).
  static std::shared_ptr<SharedArena> create(MPI_Comm intra, int64_t bytes, MpiWait wait = default_mpi_wait());
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int64_t bytes() const { return bytes_; }
  // My segment (64-byte aligned, zero-filled at creation) and peer `r`'s.
  void* data() const { return segments_[local_rank_]; }
  void* peer_data(int r) const { return segments_[r]; }
  // Shared ownership of the whole arena, pointing at data(): hand it to
  // ParameterStore::rebind_grad_arena so the window lives as long as the gradients.
  std::shared_ptr<void> owner();

  // True when [p, p + nbytes) lies inside MY segment.
  bool holds(const void* p, int64_t nbytes) const;
  int64_t offset_of(const void* p) const { return static_cast<const char*>(p) - static_cast<const char*>(data()); }
  // `p` in my segment -> the same offset in peer r's segment.
  void* peer_address(const void* p, int r) const { return static_cast<char*>(segments_[r]) + offset_of(p); }

  // Node-wide synchronization point: when sync() returns on any rank, every store any
  // rank of the node made to the arena before ITS sync() is visible here, and no load
  // issued after it can observe an older value. Collective over the node. A rank that
  // arrives first waits as create's `wait` says: under a CPU quota it naps rather than
  // spinning on the share its host's other ranks compute with.
  void sync();
  MPI_Comm comm() const { return comm_; }

 private:
  SharedArena() = default;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  int local_rank_ = 0, local_size_ = 1;
  int64_t bytes_ = 0;
  MpiWait wait_ = MpiWait::kPoll;
  std::vector<void*> segments_;
};

}  // namespace sdp
