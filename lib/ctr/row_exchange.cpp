#include "ctr/row_exchange.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "data/loading/random.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/collectives.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/reduce_kernels.hpp"
#include "distributed/world.hpp"

namespace sdp {

namespace {

// A row on the wire: its id's 8 bytes as two floats, then the row.
void append_record(std::vector<float>& out, int64_t id, const float* row, int width) {
  const size_t at = out.size();
  out.resize(at + 2 + static_cast<size_t>(width));
  std::memcpy(out.data() + at, &id, sizeof id);
  std::memcpy(out.data() + at + 2, row, sizeof(float) * static_cast<size_t>(width));
}

// Adds the records of `data[0..floats)` to `out`, in order.
void add_records(const float* data, int64_t floats, int width, RowAccumulator& out) {
  const int64_t record = width + 2, ahead = 8 * record;
  for (int64_t at = 0; at < floats; at += record) {
    int64_t id;
    if (at + ahead < floats) {
      std::memcpy(&id, data + at + ahead, sizeof id);
      out.prefetch(id);
    }
    std::memcpy(&id, data + at, sizeof id);
    out.add(id, data + at + 2);
  }
}

// Where this rank's part starts in an allgather of every member's `counts`, and their total.
std::pair<int64_t, int64_t> my_offset_and_total(const std::vector<int>& counts, int me) {
  int64_t total = 0, before = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < me) before += counts[r];
    total += counts[r];
  }
  return {before, total};
}

int owner_of(int64_t id, int local) {
  return static_cast<int>(mix64(static_cast<uint64_t>(id)) % static_cast<uint64_t>(local));
}

}  // namespace

RowExchangeKind parse_row_exchange(const std::string& value) {
  if (value == "auto") return RowExchangeKind::kAuto;
  if (value == "sparse") return RowExchangeKind::kSparse;
  if (value == "dense") return RowExchangeKind::kDense;
  throw InputError("key 'distributed.embedding_exchange': '" + value + "' is not auto, sparse or dense");
}

ExchangeBytes estimate_bytes(const std::vector<int>& unique, int nodes, int local, int width, int64_t rows,
                             int wire_bytes) {
  ExchangeBytes b;
  const double ranks = static_cast<double>(unique.size());
  if (ranks <= 1) return b;
  double total = 0;
  for (int u : unique) total += u;
  const double record = 4.0 * (width + 2), l = local, per_node = total / nodes;
  const double wire_record = 8.0 + static_cast<double>(wire_bytes) * width;  // crossing nodes
  // 1. a rank receives 1/L of each other local rank's rows; 2. an owner, its part of every
  // other node's rows; 3. every other owner's part of the summed rows (at most the table).
  b.sparse = record * ((l - 1) / l * per_node / l + (l - 1) / l * std::min(total, static_cast<double>(rows))) +
             wire_record * (total - per_node) / l;
  const double table_bytes = static_cast<double>(wire_bytes) * static_cast<double>(width) * static_cast<double>(rows) +
                             8.0 * static_cast<double>((rows + 63) / 64);
  b.dense = 2.0 * (ranks - 1) / ranks * table_bytes;
  return b;
}

RowExchange::RowExchange(const World& world, int64_t table_rows, int width, RowExchangeKind kind,
                         std::shared_ptr<AllreduceAlgorithm> dense_allreduce, Compression compression)
    : world_(world),
      table_rows_(table_rows),
      width_(width),
      kind_(kind),
      wire_(compression == Compression::kFp16   ? DType::kF16
            : compression == Compression::kBf16 ? DType::kBF16
                                                : DType::kF32),
      dense_allreduce_(std::move(dense_allreduce)) {
  intra_ = make_communicator(CommBackend::kMpi, world.intra());
  if (world.nodes() > 1) inter_ = make_communicator(CommBackend::kMpi, world.inter());
}

RowExchange::~RowExchange() = default;

bool RowExchange::needs_counts() const { return kind_ == RowExchangeKind::kAuto && world_.size() > 1; }

const RowExchangeStep& RowExchange::run(const SparseRows& mine, RowAccumulator& out, const std::vector<int>& unique) {
  bool dense = kind_ == RowExchangeKind::kDense;
  if (needs_counts()) {
    if (unique.size() != static_cast<size_t>(world_.size()) || unique[static_cast<size_t>(world_.rank())] != mine.size())
      throw std::logic_error("RowExchange::run: auto needs every rank's count of unique rows");
    const ExchangeBytes bytes = estimate_bytes(unique, world_.nodes(), world_.local_size(), width_, table_rows_,
                                               static_cast<int>(dtype_size(wire_)));
    dense = bytes.dense < bytes.sparse;
  }
  last_ = RowExchangeStep{};
  last_.dense = dense;
  if (dense)
    run_dense(mine, out);
  else
    run_sparse(mine, out);
  last_.rows = out.rows().size();
  return last_;
}

void RowExchange::run_sparse(const SparseRows& mine, RowAccumulator& out) {
  const int local = world_.local_size(), me = world_.local_rank();
  const int64_t record = width_ + 2;
  // 1. Each owner receives the node's rows of its ids and sums them in local-rank order. The
  // only rank of its node owns every id: its rows (unique already) are the node's.
  if (local > 1) {
    to_owner_.resize(static_cast<size_t>(local));
    for (std::vector<float>& part : to_owner_) part.clear();
    for (int64_t i = 0; i < mine.size(); ++i)
      append_record(to_owner_[static_cast<size_t>(owner_of(mine.ids[i], local))], mine.ids[i], mine.row(i), width_);
    node_part_.reset(width_, mine.size());
    // Floats each rank sends each owner: row r of the matrix is rank r's.
    std::vector<int> sends(static_cast<size_t>(local));
    for (int j = 0; j < local; ++j) sends[static_cast<size_t>(j)] = static_cast<int>(to_owner_[static_cast<size_t>(j)].size());
    std::vector<int> matrix(static_cast<size_t>(local * local));
    SDP_MPI_CHECK(MPI_Allgather(sends.data(), local, MPI_INT, matrix.data(), local, MPI_INT, world_.intra()));
    std::vector<int64_t> from(static_cast<size_t>(local + 1), 0);
    for (int r = 0; r < local; ++r)
      from[static_cast<size_t>(r) + 1] = from[static_cast<size_t>(r)] + (r == me ? 0 : matrix[static_cast<size_t>(r * local + me)]);
    received_.resize(static_cast<size_t>(from.back()));
    std::vector<std::shared_ptr<Work>> works;
    for (int r = 0; r < local; ++r) {
      if (r == me) continue;
      const int64_t n = matrix[static_cast<size_t>(r * local + me)];
      if (n > 0) works.push_back(intra_->recv(CommBuffer::host(received_.data() + from[static_cast<size_t>(r)], n), r));
      std::vector<float>& part = to_owner_[static_cast<size_t>(r)];
      if (!part.empty())
        works.push_back(intra_->send(CommBuffer::host(part.data(), static_cast<int64_t>(part.size())), r));
    }
    for (auto& w : works) w->wait();
    last_.bytes_received += 4 * from.back();
    for (int r = 0; r < local; ++r) {
      if (r == me)
        add_records(to_owner_[static_cast<size_t>(me)].data(), static_cast<int64_t>(to_owner_[static_cast<size_t>(me)].size()),
                    width_, node_part_);
      else
        add_records(received_.data() + from[static_cast<size_t>(r)],
                    from[static_cast<size_t>(r) + 1] - from[static_cast<size_t>(r)], width_, node_part_);
    }
  }
  // 2. The owners of the same ids on every node gather their node sums and add them in node
  // order: only a node's unique rows cross.
  const SparseRows& node = local == 1 ? mine : node_part_.rows();
  const SparseRows* owned = &node;
  auto gather = [&](const std::shared_ptr<Communicator>& comm, MPI_Comm group, const SparseRows& part) {
    const int n = static_cast<int>(part.size() * record);
    const std::vector<int> counts = allgather_ints(group, n);
    const std::vector<int64_t> floats(counts.begin(), counts.end());
    const auto [before, total] = my_offset_and_total(counts, comm->rank());
    gathered_.resize(static_cast<size_t>(total));
    for (int64_t i = 0; i < part.size(); ++i) {
      std::memcpy(gathered_.data() + before + i * record, &part.ids[static_cast<size_t>(i)], sizeof(int64_t));
      std::memcpy(gathered_.data() + before + i * record + 2, part.row(i), sizeof(float) * static_cast<size_t>(width_));
    }
    comm->allgather(CommBuffer::host(gathered_.data(), total), floats)->wait();
    last_.bytes_received += 4 * (total - n);
    return total;
  };
  if (inter_) {
    if (wire_ == DType::kF32) {
      const int64_t total = gather(inter_, world_.inter(), node);
      global_part_.reset(width_, total / record);
      add_records(gathered_.data(), total, width_, global_part_);
    } else {
      gather_nodes_in_16_bits(node);
    }
    owned = &global_part_.rows();
  }
  // 3. Every rank gathers the owners' summed parts (disjoint ids). The only rank of its node
  // holds them all: the sums are handed over as they are.
  if (local == 1) {
    if (inter_) {
      std::swap(out, global_part_);
    } else {
      out.reset(width_, owned->size());
      out.add_all(*owned);
    }
    return;
  }
  const int64_t total = gather(intra_, world_.intra(), *owned);
  out.reset(width_, total / record);
  add_records(gathered_.data(), total, width_, out);
}

void RowExchange::gather_nodes_in_16_bits(const SparseRows& part) {
  // A record: the id's 8 bytes as four 16-bit words, then the row cast to wire_.
  const int64_t record = 4 + width_;
  const int n = static_cast<int>(part.size() * record);
  const std::vector<int> counts = allgather_ints(world_.inter(), n);
  const std::vector<int64_t> words(counts.begin(), counts.end());
  const auto [before, total] = my_offset_and_total(counts, inter_->rank());
  wire16_.resize(static_cast<size_t>(total));
  for (int64_t i = 0; i < part.size(); ++i) {
    uint16_t* at = wire16_.data() + before + i * record;
    std::memcpy(at, &part.ids[static_cast<size_t>(i)], sizeof(int64_t));
    convert_from_f32(wire_, at + 4, part.row(i), width_, 1.0f);
  }
  inter_->allgather(CommBuffer{wire16_.data(), total, wire_, Device::cpu()}, words)->wait();
  last_.bytes_received += 2 * (total - n);
  // Every node's part decoded, this node's too, and summed in node order.
  global_part_.reset(width_, total / record);
  decoded_.resize(static_cast<size_t>(width_));
  for (int64_t at = 0; at < total; at += record) {
    int64_t id;
    std::memcpy(&id, wire16_.data() + at, sizeof id);
    convert_to_f32(wire_, decoded_.data(), wire16_.data() + at + 4, width_, 1.0f);
    global_part_.add(id, decoded_.data());
  }
}

void RowExchange::run_dense(const SparseRows& mine, RowAccumulator& out) {
  const size_t words = static_cast<size_t>((table_rows_ + 63) / 64);
  if (dense_.empty()) {
    dense_.assign(static_cast<size_t>(table_rows_) * static_cast<size_t>(width_), 0.0f);
    touched_.assign(words, 0);
  }
  for (int64_t i = 0; i < mine.size(); ++i) {
    const int64_t id = mine.ids[static_cast<size_t>(i)];
    std::memcpy(dense_.data() + id * width_, mine.row(i), sizeof(float) * static_cast<size_t>(width_));
    touched_[static_cast<size_t>(id / 64)] |= uint64_t{1} << (id % 64);
  }
  dense_allreduce_->run(CommBuffer::host(dense_.data(), static_cast<int64_t>(dense_.size())), ReduceOp::kSum)->wait();
  // Which rows any rank touched: their union, so both exchanges update the same rows.
  SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, touched_.data(), static_cast<int>(words), MPI_UINT64_T, MPI_BOR,
                              world_.comm()));
  const double ranks = world_.size();
  last_.bytes_received =
      static_cast<int64_t>(2.0 * (ranks - 1) / ranks * (4.0 * static_cast<double>(dense_.size()) + 8.0 * words));
  int64_t count = 0;
  for (uint64_t w : touched_) count += __builtin_popcountll(w);
  out.reset(width_, count);
  // In id order; each row is zeroed again for the next step.
  for (size_t w = 0; w < words; ++w) {
    for (uint64_t bits = touched_[w]; bits != 0; bits &= bits - 1) {
      const int64_t id = static_cast<int64_t>(w * 64) + __builtin_ctzll(bits);
      float* row = dense_.data() + id * width_;
      out.add(id, row);
      std::memset(row, 0, sizeof(float) * static_cast<size_t>(width_));
    }
    touched_[w] = 0;
  }
}

}  // namespace sdp
