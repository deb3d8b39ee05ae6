// The embedding table's gradient between data-parallel ranks (distributed.embedding_exchange):
// each rank brings its step's unique rows (duplicate ids already summed, RowAccumulator) and
// every rank leaves with the same summed rows, the same bits, whatever the arrival order.
//
// sparse (node-aware, deduplicated): each id has an owner among the ranks of a node
//   (owner = mix64(id) % local ranks). 1. Inside the node every rank sends each owner its rows,
//   and the owner sums them in local-rank order: a node's rows are deduplicated once. 2. Across
//   nodes the owners of the same ids (the ranks of one local rank) gather their node sums and
//   add them in node order: only a node's unique (id, row) pairs cross the inter-node link.
//   3. Inside the node the owners' parts are gathered: every rank holds every summed row.
//   A row's sum is (node 0's ranks in order) + (node 1's ...) + ...: fixed by id and rank.
// dense: the rows scattered into a zeroed [rows x width] buffer that the job's AllReduce
//   (allreduce.hpp: flat, hierarchical, compressed as configured) sums; a bitmap of the touched
//   ids (OR over the ranks) says which rows the optimizer updates, so both ways update the same
//   rows (a touched row whose sum is 0 still moves Adam's moments).
// auto: per step, the one that moves fewer bytes (estimate_bytes), from every rank's count of
//   unique rows, which the caller brings (the trainer sums them in the step's dense allreduce:
//   no collective of their own); every rank computes the same choice.
// Compression (distributed.compression fp16 or bf16), as the dense buckets have it: the rows
//   that cross nodes travel in 16 bits (the sparse way's step 2; the dense way's AllReduce casts
//   its own); every owner decodes every node's part, its own included, and sums them in f32 in
//   node order, so every rank still holds the same bits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "core/dtype.hpp"
#include "ctr/sparse_rows.hpp"

namespace sdp {

class AllreduceAlgorithm;
class Communicator;
class World;

enum class RowExchangeKind { kAuto, kSparse, kDense };
// "auto" | "sparse" | "dense"; InputError naming distributed.embedding_exchange otherwise.
RowExchangeKind parse_row_exchange(const std::string& value);

// Bytes a rank receives in one step each way, for `unique` rows on each rank (indexed by
// world rank), on `nodes` nodes of `local` ranks, rows of `width` floats in a table of `rows`.
// sparse counts every rank's rows as distinct (an upper bound: ranks' shared ids are summed
// on the way); dense is the ring's 2 (P - 1) / P of the table, plus the bitmap.
struct ExchangeBytes {
  double sparse = 0, dense = 0;
};
// `wire_bytes`: the bytes of a value that crosses nodes (4, or 2 compressed).
ExchangeBytes estimate_bytes(const std::vector<int>& unique, int nodes, int local, int width, int64_t rows,
                             int wire_bytes = 4);

struct RowExchangeStep {
  bool dense = false;
  int64_t rows = 0;           // summed rows every rank holds
  int64_t bytes_received = 0;  // by this rank, row data (and the bitmap for dense)
};

class RowExchange {
 public:
  // Collective over the world: makes the intra- and inter-node communicators (MPI).
  // `dense_allreduce` sums the dense buffer (the job's AllReduce).
  RowExchange(const World& world, int64_t table_rows, int width, RowExchangeKind kind,
              std::shared_ptr<AllreduceAlgorithm> dense_allreduce, Compression compression = Compression::kNone);
  ~RowExchange();

  // Collective: every rank's `mine` summed into `out` (reset here), the same rows and bits on
  // every rank. `unique` (auto only; the same on every rank): each world rank's mine.size().
  // Returns what ran.
  const RowExchangeStep& run(const SparseRows& mine, RowAccumulator& out, const std::vector<int>& unique = {});
  // Whether run() chooses its way each step (auto), and so needs the ranks' counts.
  bool needs_counts() const;
  const RowExchangeStep& last() const { return last_; }

 private:
  void run_sparse(const SparseRows& mine, RowAccumulator& out);
  void run_dense(const SparseRows& mine, RowAccumulator& out);
  // Step 2 of the sparse way in 16 bits: every node's part of the owner's ids into global_part_.
  void gather_nodes_in_16_bits(const SparseRows& node_part);

  const World& world_;
  int64_t table_rows_;
  int width_;
  RowExchangeKind kind_;
  DType wire_;  // of the rows crossing nodes: kF32, or kF16 / kBF16 compressed
  std::shared_ptr<AllreduceAlgorithm> dense_allreduce_;
  std::shared_ptr<Communicator> intra_, inter_;
  RowExchangeStep last_;
  // Scratch, kept between steps.
  std::vector<std::vector<float>> to_owner_;
  std::vector<float> received_, gathered_, dense_, decoded_;
  std::vector<uint16_t> wire16_;
  std::vector<uint64_t> touched_;
  RowAccumulator node_part_, global_part_;
};

}  // namespace sdp
