#include "distributed/shared_arena.hpp"

#include <algorithm>
#include <cstring>

#include "distributed/mpi_check.hpp"
#include "distributed/world.hpp"

namespace sdp {

std::shared_ptr<SharedArena> SharedArena::create(MPI_Comm intra, int64_t bytes, MpiWait wait) {
  std::shared_ptr<SharedArena> arena(new SharedArena());
  arena->wait_ = wait;
  // A private duplicate: the arena's barriers can never match a message of another layer.
  SDP_MPI_CHECK(MPI_Comm_dup(intra, &arena->comm_));
  SDP_MPI_CHECK(MPI_Comm_rank(arena->comm_, &arena->local_rank_));
  SDP_MPI_CHECK(MPI_Comm_size(arena->comm_, &arena->local_size_));
  arena->bytes_ = bytes;
  // Whole pages per segment: segments start page aligned and never share a cache line.
  const MPI_Aint rounded = static_cast<MPI_Aint>((std::max<int64_t>(bytes, 1) + 4095) / 4096 * 4096);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* mine = nullptr;
  const int rc = MPI_Win_allocate_shared(rounded, 1, info, arena->comm_, &mine, &arena->win_);
  MPI_Info_free(&info);
  SDP_MPI_CHECK(rc);
  arena->segments_.resize(arena->local_size_);
  for (int r = 0; r < arena->local_size_; ++r) {
    MPI_Aint size = 0;
    int disp = 0;
    SDP_MPI_CHECK(MPI_Win_shared_query(arena->win_, r, &size, &disp, &arena->segments_[r]));
  }
  std::memset(mine, 0, static_cast<std::size_t>(rounded));
  // One passive-target epoch for the arena's whole life: loads and stores are plain memory
  // accesses, MPI_Win_sync orders them (see sync()).
  SDP_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, arena->win_));
  arena->sync();  // the zero fill is visible to every peer before anyone uses the arena
  return arena;
}

SharedArena::~SharedArena() {
  if (!mpi_is_initialized()) return;
  if (win_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::shared_ptr<void> SharedArena::owner() { return std::shared_ptr<void>(shared_from_this(), data()); }

bool SharedArena::holds(const void* p, int64_t nbytes) const {
  const char* begin = static_cast<const char*>(data());
  const char* q = static_cast<const char*>(p);
  return q >= begin && nbytes >= 0 && q + nbytes <= begin + bytes_;
}

void SharedArena::sync() {
  // The MPI-3 shared-memory idiom (MPI 4.0 §12.7, "unified" model that Open MPI's osc/sm
  // reports): MPI_Win_sync is a full memory barrier for the window. The first one makes my
  // earlier stores globally visible before I enter the barrier (release); the barrier orders
  // every rank's first Win_sync before every rank's second; the second keeps my later loads
  // from being satisfied before the barrier (acquire). Together: each peer's stores before
  // its sync() happen-before my loads after mine, and my loads before sync() are complete
  // before any peer's stores after its sync() (so a peer may overwrite what I read).
  SDP_MPI_CHECK(MPI_Win_sync(win_));
  if (local_size_ > 1) mpi_barrier(comm_, wait_);
  SDP_MPI_CHECK(MPI_Win_sync(win_));
}

}  // namespace sdp
