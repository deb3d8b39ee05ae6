// `sdp-train plan` for CTR models: a DeepFM (FM, LR) step on N nodes from one rank's step as
// measured here and the unique ids a step's batches hold, measured from the job's data.
//
// A rank's step runs in order (ctr_trainer.cpp): the batch read from the set (data: left out of
// the step, as the trainer's samples/s leave it out), forward and backward with the rank's own
// row sums (compute), the dense gradients' MPI_Allreduce, the table rows' exchange
// (ctr/row_exchange.hpp), then the optimizer on the rows the world touched. With U(m) the
// unique ids among m samples, B samples a rank, r ranks a node, N nodes, W floats a row:
//   update      the measured update, times U(N r B) / U(B): the rows every rank updates
//   sparse      (1) each rank sends (r-1)/r of its U(B) rows to their owners in the node and
//               each owner sums U(B) rows; (2) the owners of every node allgather their U(r B)/r
//               node sums: (N-1) U(r B) records through each node's link, N U(r B)/r summed by
//               each owner; (3) the owners' U(N r B) summed rows are allgathered in the node.
//               With one rank a node, (1) and (3) are nothing: its rows are the node's
//   dense       the job's AllReduce of the whole table, an MPI_Allreduce of the bitmap of
//               touched rows, and the U(N r B) touched rows summed out of it
//   auto        the way estimate_bytes (row_exchange.hpp) gives fewer bytes, as the runner
//               takes it each step
//   sharded     (model.embedding_sharding: rows; ctr/sharded_rows.hpp) the compute measured on
//               fetched rows (fetched_compute_s: the B F pairs hashed, the rows gathered into a
//               block, forward and backward from it); each rank's U(B) unique ids to its node's
//               forwarders, each node's U(r B) to their owners, their rows sent back, then
//               their gradients: (N-1)/N of a node's U(r B) cross nodes, 8 + 8W bytes an id;
//               each forwarder hashes and sums about U(B), each owner serves and sums about
//               U(r B) / r rows and updates U(N r B) / (N r) of them
// A record is 8 bytes of id and the row: 4 (W + 2) bytes inside a node, 8 + 2W across nodes
// under fp16 / bf16 compression.
#pragma once

#include <string>
#include <vector>

#include "config/choices.hpp"
#include "plan/cost_model.hpp"
#include "plan/ctr_profile.hpp"

namespace sdp {

using plan::CtrProfile;

enum class RowWay { kSparse, kDense, kSharded };
const char* to_string(RowWay way);

struct CtrStep {
  double step_s = 0;
  double compute_s = 0, update_s = 0, dense_s = 0, rows_s = 0;  // its parts
  double link_bytes = 0;  // the rows' bytes through each node's link, each way
};

struct CtrPlanRow {
  int nodes = 1, ranks = 1;
  double unique_rank = 0, unique_world = 0;
  CtrStep sparse, dense, sharded;
  RowWay auto_way = RowWay::kSparse;  // what auto takes at this shape
  RowWay job_way = RowWay::kSparse;   // what the job's keys run (auto: auto_way; sharded tables: kSharded)
  double samples_per_s = 0, scale = 0;
  double replicated_bytes = 0, sharded_bytes = 0;  // a rank's table and its optimizer state
  // The faster of replicated (auto's way) and sharded among those that fit a rank's memory;
  // nullptr when neither fits.
  const char* best = nullptr;
  const CtrStep& job() const { return step(job_way); }
  const CtrStep& step(RowWay way) const {
    return way == RowWay::kSparse ? sparse : way == RowWay::kDense ? dense : sharded;
  }
};

struct CtrPlanSetup {
  std::vector<int> nodes;
  int ranks_per_node = 1;
  std::string exchange = "auto";               // distributed.embedding_exchange
  std::string sharding = "replicated";         // model.embedding_sharding
  int state_floats = 0;                        // the optimizer's floats per table float
  double rank_memory_bytes = 0;                // a rank's share of a node's memory; 0: unknown
  AllreduceKind table_algorithm = AllreduceKind::kAuto;  // distributed.allreduce: the dense way's
  Compression compression = Compression::kNone;
  std::vector<std::string> assumed, measured;  // header lines
  int64_t samples_per_epoch = 0;
  std::string epoch_source = "the training set";               // where samples_per_epoch came from
  std::string unique_source = "measured from the training set";  // where the profile's unique ids came from
  double usd_per_node_hour = 0;  // 0: no cost column
};

// The rows' exchange one way on `topology`, and the step around it.
CtrStep predict_ctr_step(const CtrProfile& profile, const plan::Network& network, const plan::Topology& topology,
                         Compression compression, AllreduceKind table_algorithm, RowWay way);

std::vector<CtrPlanRow> make_ctr_plan(const CtrProfile& profile, const plan::Network& network,
                                      const CtrPlanSetup& setup);

// The plan as a table, with its header of what was measured and assumed.
std::string format_ctr_plan(const CtrProfile& profile, const CtrPlanSetup& setup, const std::vector<CtrPlanRow>& rows);

}  // namespace sdp
