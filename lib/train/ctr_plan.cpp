#include "train/ctr_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ctr/row_exchange.hpp"

namespace sdp {

const char* to_string(RowWay way) {
  return way == RowWay::kSparse ? "sparse" : way == RowWay::kDense ? "dense" : "sharded";
}

namespace {

bool compressed(Compression c) { return c == Compression::kFp16 || c == Compression::kBf16; }

double unique_of(const CtrProfile& p, double samples) { return std::max(1.0, p.unique_among(samples)); }

}  // namespace

CtrStep predict_ctr_step(const CtrProfile& profile, const plan::Network& network, const plan::Topology& topology,
                         Compression compression, AllreduceKind table_algorithm, RowWay way) {
  CtrStep s;
  const double b = static_cast<double>(profile.batch_per_rank), r = topology.ranks_per_node, n = topology.nodes;
  const double u_rank = unique_of(profile, b), u_node = unique_of(profile, r * b),
               u_world = unique_of(profile, n * r * b);
  s.compute_s = way == RowWay::kSharded && profile.fetched_compute_s > 0 ? profile.fetched_compute_s : profile.compute_s;
  // A sharded table's owner updates its share of the world's rows.
  const double updated = way == RowWay::kSharded ? u_world / (n * r) : u_world;
  s.update_s = profile.update_rows > 0 ? profile.update_s * updated / profile.update_rows : profile.update_s;
  if (topology.ranks() <= 1) {
    s.step_s = s.compute_s + s.update_s;
    return s;
  }
  // The dense gradients, the loss and the counts: one MPI_Allreduce (flat).
  s.dense_s = plan::allreduce_seconds(AllreduceKind::kFlat, Compression::kNone,
                                      4.0 * static_cast<double>(profile.dense_floats + topology.ranks() + 2), topology,
                                      network);
  const double w = profile.width;
  if (way == RowWay::kSharded) {
    const double ranks = n * r, pairs = b * profile.fields;
    // Ids a node sends its owners elsewhere (its unique ids, deduplicated by the forwarders),
    // and the ids a rank hands its forwarders on the node; 8 + 8W bytes an id: the id, its row
    // back, its gradient.
    const double cross = (n - 1) / n * u_node, inside = (r - 1) / r * u_rank;
    s.link_bytes = cross * (8 + 8 * w);
    // The batch's ids hashed once more (in fetched_compute_s where it was measured); a
    // forwarder's hash and sums of its node's requests; an owner's rows served and summed.
    double rows = (profile.fetched_compute_s > 0 ? 0 : pairs * profile.record_s) +
                  (r > 1 ? 2 * u_rank * profile.record_s : 0) + 2 * u_node / r * profile.record_s;
    rows += inside * (8 + 8 * w) / network.intra_bytes_per_s;
    // The counts' MPI_Alltoall, then the ids, the rows back and the gradients (MPI_Alltoallv).
    if (n > 1)
      rows += network.crossing_seconds(4 * ranks * r) + network.crossing_seconds(cross * 8) +
              2 * network.crossing_seconds(cross * 4 * w);
    s.rows_s = rows;
  } else if (way == RowWay::kSparse) {
    const double record = 4 * (w + 2), wire_record = compressed(compression) ? 8 + 2 * w : record;
    double rows = 0;
    if (r > 1) {  // the only rank of its node owns its rows as they are: no (1) or (3)
      rows += (r - 1) / r * u_rank * record / network.intra_bytes_per_s + u_rank * profile.record_s;  // (1)
      rows += (r - 1) / r * u_world * record / network.intra_bytes_per_s + u_world * profile.record_s;  // (3)
    }
    if (n > 1) {  // (2)
      s.link_bytes = (n - 1) * u_node * wire_record;
      rows += (n - 1) * network.crossing_seconds(u_node * wire_record) + n * u_node / r * profile.record_s;
    }
    s.rows_s = rows;
  } else {
    const double table = 4.0 * w * static_cast<double>(profile.table_rows),
                 bitmap = 8.0 * static_cast<double>((profile.table_rows + 63) / 64);
    s.rows_s = plan::allreduce_seconds(table_algorithm, compression, table, topology, network) +
               plan::allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, bitmap, topology, network) +
               u_world * profile.record_s;
    if (n > 1) s.link_bytes = 2 * (n - 1) / n * (table * (compressed(compression) ? 0.5 : 1.0) + bitmap);
  }
  s.step_s = s.compute_s + s.dense_s + s.rows_s + s.update_s;
  return s;
}

std::vector<CtrPlanRow> make_ctr_plan(const CtrProfile& profile, const plan::Network& network,
                                      const CtrPlanSetup& setup) {
  std::vector<CtrPlanRow> rows;
  double base = 0;  // samples/s a rank on one node
  const int wire_bytes = compressed(setup.compression) ? 2 : 4;
  for (int nodes : setup.nodes) {
    CtrPlanRow row;
    row.nodes = nodes;
    row.ranks = nodes * setup.ranks_per_node;
    const plan::Topology topology{nodes, setup.ranks_per_node};
    const double b = static_cast<double>(profile.batch_per_rank);
    row.unique_rank = unique_of(profile, b);
    row.unique_world = unique_of(profile, row.ranks * b);
    row.sparse = predict_ctr_step(profile, network, topology, setup.compression,
                                  setup.table_algorithm, RowWay::kSparse);
    row.dense = predict_ctr_step(profile, network, topology, setup.compression, setup.table_algorithm,
                                 RowWay::kDense);
    row.sharded = predict_ctr_step(profile, network, topology, setup.compression, setup.table_algorithm,
                                   RowWay::kSharded);
    const double table = 4.0 * profile.width * static_cast<double>(profile.table_rows) * (1 + setup.state_floats);
    row.replicated_bytes = table;
    row.sharded_bytes = std::ceil(static_cast<double>(profile.table_rows) / row.ranks) / profile.table_rows * table;
    const ExchangeBytes bytes =
        estimate_bytes(std::vector<int>(static_cast<size_t>(row.ranks), static_cast<int>(row.unique_rank)), nodes,
                       setup.ranks_per_node, profile.width, profile.table_rows, wire_bytes);
    row.auto_way = bytes.dense < bytes.sparse ? RowWay::kDense : RowWay::kSparse;
    row.job_way = setup.exchange == "dense"    ? RowWay::kDense
                  : setup.exchange == "sparse" ? RowWay::kSparse
                                               : row.auto_way;
    if (setup.sharding == "rows") row.job_way = RowWay::kSharded;
    const auto fits = [&](double bytes) { return setup.rank_memory_bytes <= 0 || bytes < setup.rank_memory_bytes; };
    const double replicated_s = row.step(row.auto_way).step_s;
    if (fits(row.replicated_bytes) && (!fits(row.sharded_bytes) || replicated_s <= row.sharded.step_s))
      row.best = "replicated";
    else if (fits(row.sharded_bytes))
      row.best = "sharded";
    row.samples_per_s = row.ranks * b / row.job().step_s;
    if (rows.empty()) base = row.samples_per_s / row.ranks;
    row.scale = base > 0 ? row.samples_per_s / (row.ranks * base) : 0;
    rows.push_back(row);
  }
  return rows;
}

std::string format_ctr_plan(const CtrProfile& p, const CtrPlanSetup& setup, const std::vector<CtrPlanRow>& rows) {
  std::ostringstream out;
  char line[512];
  out << "# plan: " << p.model << ", batch " << p.batch_per_rank << " per rank, " << setup.ranks_per_node
      << " rank(s) per node, table " << p.table_rows << " rows x " << p.width << " floats, rows exchanged "
      << setup.exchange << " (distributed.embedding_exchange), table " << setup.sharding
      << " (model.embedding_sharding)\n";
  std::snprintf(line, sizeof line,
                "# compute per rank: the batch read %.3f ms, forward and backward %.3f ms (%.3f ms from fetched rows, the "
                "sharded table's), update %.3f ms for %.0f rows, %.3f us a received row summed (measured: %s)\n",
                p.data_s * 1e3, p.compute_s * 1e3, p.fetched_compute_s * 1e3, p.update_s * 1e3, p.update_rows,
                p.record_s * 1e6, p.measured_on.c_str());
  out << line;
  out << "# unique ids among samples (" << setup.unique_source << "):";
  for (const auto& [m, u] : p.unique) {
    std::snprintf(line, sizeof line, " %.0f: %.0f;", m, u);
    out << line;
  }
  out << "\n";
  if (setup.samples_per_epoch > 0)
    out << "# epoch: " << setup.samples_per_epoch << " samples (" << setup.epoch_source << ")\n";
  for (const std::string& m : setup.measured) out << "# measured: " << m << "\n";
  for (const std::string& a : setup.assumed) out << "# assumed: " << a << "\n";
  out << "# a step: compute, the dense gradients' MPI_Allreduce, the rows' exchange, the update on every row the "
         "world touched (none of it overlapped)\n";
  if (setup.rank_memory_bytes > 0) {
    std::snprintf(line, sizeof line, "# memory: %.3f GB a rank (this machine's memory or cgroup limit over %d rank(s))\n",
                  setup.rank_memory_bytes / 1e9, setup.ranks_per_node);
    out << line;
  }
  out << "nodes ranks   step_ms   samples/s  scale  uniq/rank uniq/world  sparse_ms   dense_ms auto   sharded_ms "
         "repl_GB shard_GB best          link_MB  rows_ms  update_ms      epoch  usd/epoch\n";
  for (const CtrPlanRow& r : rows) {
    const CtrStep& job = r.job();
    char epoch[32] = "-", usd[32] = "-";
    if (setup.samples_per_epoch > 0 && r.samples_per_s > 0) {
      const double seconds = static_cast<double>(setup.samples_per_epoch) / r.samples_per_s;
      std::snprintf(epoch, sizeof epoch, "%.1f s", seconds);
      if (setup.usd_per_node_hour > 0)
        std::snprintf(usd, sizeof usd, "%.2f", seconds / 3600 * r.nodes * setup.usd_per_node_hour);
    }
    std::snprintf(line, sizeof line,
                  "%5d %5d %9.3f %11.1f %5.1f%% %10.0f %10.0f %10.3f %10.3f %-6s %10.3f %7.3f %8.3f %-10s %10.2f %8.3f "
                  "%10.3f %10s %10s\n",
                  r.nodes, r.ranks, job.step_s * 1e3, r.samples_per_s, 100 * r.scale, r.unique_rank, r.unique_world,
                  r.sparse.step_s * 1e3, r.dense.step_s * 1e3, to_string(r.auto_way), r.sharded.step_s * 1e3,
                  r.replicated_bytes / 1e9, r.sharded_bytes / 1e9, r.best ? r.best : "neither-fits", job.link_bytes / 1e6,
                  job.rows_s * 1e3, job.update_s * 1e3, epoch, usd);
    out << line;
  }
  out << "# step_ms, samples/s, link_MB (the rows' bytes through a node's link each way), rows_ms, update_ms: the "
         "job's way ("
      << (setup.sharding == "rows" ? "sharded" : setup.exchange) << (setup.exchange == "auto" && setup.sharding != "rows" ? ": auto's choice" : "")
      << "); sparse_ms, dense_ms: the step each way with the table replicated; auto: the way with fewer bytes, as "
         "the runner chooses; sharded_ms: the step with the table's rows sharded over the ranks; repl_GB, shard_GB: "
         "a rank's table and optimizer state each placement; best: the faster placement that fits a rank's memory\n";
  out << "# not in step_ms: the batch read (measured above; the trainer's samples/s leave it out too), "
         "evaluation, checkpoints; not modelled: contention in a shared fabric, stragglers\n";
  return out.str();
}

}  // namespace sdp
