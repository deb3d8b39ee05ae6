#include "train/ctr_trainer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sys/resource.h>
#include <fstream>
#include <iomanip>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>


#include "config/model_names.hpp"
#include "config/sagemaker_env.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/cpu_dispatch.hpp"
#include "core/crc32c.hpp"
#include "core/device_info.hpp"
#include "core/floating_point.hpp"
#include "core/log.hpp"
#include "ctr/ctr_data.hpp"
#include "ctr/ctr_metrics.hpp"
#include "ctr/ctr_model.hpp"
#include "ctr/ctr_optimizer.hpp"
#include "ctr/ctr_stream.hpp"
#include "ctr/row_exchange.hpp"
#include "ctr/sharded_rows.hpp"
#include "ctr/table_shard.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/data_files.hpp"
#include "data/formats/libsvm.hpp"
#include "data/sets/open_data.hpp"
#include "data/sets/pipe_channel.hpp"
#include "data/sets/stream_source.hpp"
#include "distributed/agreement.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/collectives.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/watchdog.hpp"
#include "io/atomic_file.hpp"
#include "io/checkpoint.hpp"
#include "io/model_index.hpp"
#include "io/safetensors.hpp"
#include "nn/threads.hpp"
#include "obs/metrics.hpp"
#include "obs/timeline.hpp"
#include "train/fault_plan.hpp"
#include "train/interruption.hpp"
#include "train/output_check.hpp"
#include "train/global_batch.hpp"
#include "train/training_setup.hpp"

namespace sdp {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format_double(double v, int precision = 6) {
  std::ostringstream out;
  out << std::setprecision(precision) << v;
  return out.str();
}

CtrModelShape model_shape(const ModelSpec& m) {
  CtrModelShape shape;
  shape.kind = ctr_model_kind(m.name);
  shape.fields = m.fields;
  shape.rows = m.table_rows;
  shape.embedding_size = m.embedding_size;
  shape.hidden = m.hidden;
  shape.dropout = static_cast<float>(m.dropout);
  shape.batch_norm = m.batch_norm;
  shape.batch_norm_decay = static_cast<float>(m.batch_norm_decay);
  return shape;
}

CtrReadOptions read_options(const JobSpec& spec) {
  CtrReadOptions o;
  o.fields = spec.model.fields;
  o.table_rows = spec.model.table_rows;
  o.id_overflow = spec.data.id_overflow == "hash" ? IdOverflow::kHash : IdOverflow::kError;
  o.skip_bad = spec.data.on_bad_record == "skip";
  // data.label_key's default names an image label; a CTR record's is "label" (the sample's).
  o.label_key = spec.data.label_key == DataSpec{}.label_key ? "label" : spec.data.label_key;
  o.ids_key = spec.data.ids_key;
  o.values_key = spec.data.values_key;
  return o;
}

// How a split's samples are read (data.load).
enum class CtrLoad {
  kMemory,  // every rank reads the whole set (or it is generated: synthetic)
  kFiles,   // each rank streams its share of the files
  kPipe,    // each rank streams what its host's reader of a SageMaker pipe deals it
};

CtrLoad ctr_load(const JobSpec& spec, const std::string& path) {
  if (spec.data.format == DataFormat::kSynthetic) return CtrLoad::kMemory;
  const auto channel = channel_config(path);
  if (channel && channel->input_mode == "Pipe") {
    if (spec.data.load == "memory")
      throw InputError("key 'data.load': memory reads every file on every rank, but " + path +
                       " is a channel in Pipe mode, which one reader per host streams: use auto or stream");
    return CtrLoad::kPipe;
  }
  if (spec.data.load == "stream") return CtrLoad::kFiles;
  const bool host_shards = resolve_data_shard(spec.data.shard, path) == DataShard::kHost;
  if (spec.data.load == "memory") {
    if (host_shards)
      throw InputError("key 'data.load': memory reads the whole set on every rank, but " + path +
                       " is split by host (data.shard host, or a ShardedByS3Key channel): use auto or stream");
    return CtrLoad::kMemory;
  }
  return host_shards ? CtrLoad::kFiles : CtrLoad::kMemory;
}

struct LoadedSet {
  CtrLoad load = CtrLoad::kMemory;
  std::unique_ptr<CtrSource> source;           // kMemory
  std::shared_ptr<const StreamSource> files;   // kFiles
  std::optional<PipeOptions> pipe;             // kPipe
  int reader = 0, readers = 1;                 // kFiles: who shares `files` (the world, or the host's ranks)
  // Samples in an epoch of the ranks that share the set: the set's (memory; files split by
  // rank), this host's (files split by host), data.samples_per_epoch (a training pipe), -1 (a
  // test pipe: unknown).
  int64_t samples = 0;
  std::string summary;  // for the log
  double planted_auc = -1;
  mutable int64_t pipe_passes = 0;  // a test pipe: the FIFO the next evaluation reads

  // The rank's records: training (shuffled shards, every pass) or one evaluation's pass.
  std::shared_ptr<RankRecords> records(uint64_t seed, bool training) const {
    if (load == CtrLoad::kFiles) return std::make_shared<ShardRecords>(files, seed, reader, readers, training);
    PipeOptions o = *pipe;
    if (!training) {
      o.first_pass = pipe_passes++;
      o.passes = 1;
    }
    return std::make_shared<PipeRecords>(o);
  }
};

StreamSourceOptions stream_options(const JobSpec& spec) {
  StreamSourceOptions o;
  o.format = spec.data.format == DataFormat::kLibsvm ? StreamFormat::kLibsvm : StreamFormat::kCtrTfRecord;
  o.ctr = read_options(spec);
  return o;
}

// Reads every file of `path` (a file or a directory) in name order, makes the planted set, or
// opens the files or the pipe to stream.
LoadedSet load_ctr_set(const JobSpec& spec, const World& world, const std::string& token, const std::string& path,
                       bool test) {
  LoadedSet set;
  const DataSpec& d = spec.data;
  set.load = ctr_load(spec, path);
  if (set.load == CtrLoad::kPipe) {
    PipeOptions o = channel_pipe(path, *channel_config(path), data_readers(world, token), spec.distributed.timeout_s,
                                 stream_options(spec));
    o.role = test ? "test" : "train";
    set.pipe = o;
    if (!test && d.samples_per_epoch < 1)
      throw InputError("key 'data.samples_per_epoch': " + path +
                       " is a channel in Pipe mode, whose size cannot be counted before it is read: set it to the "
                       "training samples of an epoch");
    set.samples = test ? -1 : d.samples_per_epoch;
    set.summary = std::string(stream_format_name(o.records.format)) + " pipe " + path + " (one reader a host, " +
                  (o.host_sharded ? "each host its own part" : "every host the whole set, each keeping 1/hosts") +
                  (test ? ")" : "; " + std::to_string(set.samples) + " samples an epoch (data.samples_per_epoch))");
    return set;
  }
  if (set.load == CtrLoad::kFiles) {
    set.files = std::make_shared<StreamSource>(path, stream_options(spec));
    const auto [reader, readers] = data_reader(spec, path, world);
    set.reader = reader;
    set.readers = readers;
    set.samples = set.files->total();
    std::ostringstream out;
    out << set.samples << " samples in " << set.files->num_shards() << " file(s) under " << path
        << (readers < world.size() ? " on this host" : "") << ", streamed";
    if (!test) out << " through a shuffle buffer of " << d.shuffle_buffer << " records";
    out << " (" << (set.files->num_shards() >= readers ? "each rank reads its files" : "each rank keeps 1/" +
                                                                                            std::to_string(readers) +
                                                                                            " of every file's records")
        << ")";
    set.summary = out.str();
    return set;
  }
  if (d.format == DataFormat::kSynthetic) {
    PlantedCtrOptions o;
    o.samples = test ? d.synthetic.test_samples : d.synthetic.train_samples;
    o.fields = spec.model.fields;
    o.rows = spec.model.table_rows;
    o.zipf = d.synthetic.zipf;
    o.seed = spec.seed;
    o.split = test ? 1 : 0;
    auto planted = std::make_unique<PlantedCtrSource>(o);
    if (test) set.planted_auc = planted->planted_auc();
    set.summary = std::to_string(o.samples) + " synthetic samples (planted DeepFM, Zipf " + format_double(o.zipf, 3) +
                  " ids)";
    set.samples = o.samples;
    set.source = std::move(planted);
    return set;
  }
  const CtrReadOptions options = read_options(spec);
  CtrRecords records;
  records.fields = options.fields;
  CtrReadStats total;
  const std::vector<std::string> files = list_data_files(path, test ? "data.test" : "data.train");
  for (const std::string& file : files) {
    const CtrReadStats s = d.format == DataFormat::kLibsvm ? read_libsvm(file, options, records)
                                                           : read_ctr_tfrecord(file, options, records);
    total.samples += s.samples;
    total.skipped += s.skipped;
    total.padded += s.padded;
    total.hashed_ids += s.hashed_ids;
    total.max_id = std::max(total.max_id, s.max_id);
    if (total.first_skipped.empty()) total.first_skipped = s.first_skipped;
  }
  if (records.size() == 0)
    throw InputError(path + ": no samples in " + std::to_string(files.size()) + " file(s) (data." +
                     (test ? "test" : "train") + ")");
  std::ostringstream out;
  out << records.size() << " samples from " << files.size() << " file(s) under " << path << " (largest id "
      << total.max_id << ", " << total.padded << " rows padded to " << options.fields << " fields";
  if (total.hashed_ids > 0) out << ", " << total.hashed_ids << " ids hashed into model.table_rows";
  if (total.skipped > 0) out << ", " << total.skipped << " bad records skipped; the first: " << total.first_skipped;
  out << ")";
  set.summary = out.str();
  set.samples = records.size();
  set.source = std::make_unique<CtrRecordsSource>(std::move(records));
  return set;
}

// Loads on every rank and agrees: a bad file is one error, exit 2, on every rank. `token`
// names the job's sockets between a host's ranks (a pipe).
LoadedSet load_agreed(const JobSpec& spec, const World& world, const std::string& token, const std::string& path,
                      bool test) {
  LoadedSet set;
  run_on_all_ranks(world.comm(), [&] { set = load_ctr_set(spec, world, token, path, test); });
  // Ranks that share a set must count it alike; hosts' own sets (host shards) and pipes differ.
  const bool shared = set.load == CtrLoad::kMemory || (set.load == CtrLoad::kFiles && set.readers == world.size());
  const int differs = shared ? first_rank_differing(world.comm(), static_cast<uint64_t>(set.samples)) : -1;
  if (differs >= 0)
    throw CollectiveFailure(ExitCode::kUsage,
                            "rank " + std::to_string(differs) + " read a different number of " +
                                (test ? "test" : "training") + " samples from " + path +
                                " than rank 0: every rank must see the same files",
                            world.rank() == 0);
  return set;
}

// Epoch `epoch`'s order of the set's `n` samples: the same permutation on every rank, from
// (seed, epoch), so that a resumed run continues it.
void epoch_permutation(uint64_t seed, int64_t epoch, int64_t n, std::vector<int64_t>& order) {
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  uint64_t state = seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch) + 1;
  for (int64_t i = n - 1; i > 0; --i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const int64_t j = static_cast<int64_t>(state % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
}

// A batch's storage.
struct BatchBuffers {
  std::vector<int64_t> ids, samples;
  std::vector<float> values, labels, prob;
  void resize(int64_t b, int fields) {
    ids.resize(static_cast<size_t>(b * fields));
    values.resize(static_cast<size_t>(b * fields));
    labels.resize(static_cast<size_t>(b));
    samples.resize(static_cast<size_t>(b));
    prob.resize(static_cast<size_t>(b));
  }
  CtrBatch batch(int64_t b) const { return {b, ids.data(), values.data(), labels.data(), samples.data()}; }
};

// Scores samples [begin, end) of `source` in batches; appends probabilities and labels.
void score_range(CtrModel& model, const CtrSource& source, int64_t begin, int64_t end, std::vector<float>& prob,
                 std::vector<float>& labels) {
  const int64_t chunk = 4096;
  BatchBuffers buffers;
  buffers.resize(chunk, source.fields());
  for (int64_t at = begin; at < end; at += chunk) {
    const int64_t b = std::min(chunk, end - at);
    std::iota(buffers.samples.begin(), buffers.samples.begin() + b, at);
    source.fill(buffers.samples.data(), b, buffers.ids.data(), buffers.values.data(), buffers.labels.data());
    CtrBatch batch = buffers.batch(b);
    batch.labels = nullptr;
    model.forward(batch, /*training=*/false, 0, buffers.prob.data());
    prob.insert(prob.end(), buffers.prob.begin(), buffers.prob.begin() + b);
    labels.insert(labels.end(), buffers.labels.begin(), buffers.labels.begin() + b);
  }
}

std::string pack_floats(const std::vector<float>& a, const std::vector<float>& b) {
  std::string s(sizeof(float) * (a.size() + b.size()), '\0');
  std::memcpy(s.data(), a.data(), sizeof(float) * a.size());
  std::memcpy(s.data() + sizeof(float) * a.size(), b.data(), sizeof(float) * b.size());
  return s;
}

struct ScoredSet {
  std::vector<float> prob, labels;  // rank 0: every sample, in order; others: empty
};

// Rank 0 gets every rank's scores, in rank order.
ScoredSet gather_scores(ScoredSet mine, const World& world) {
  if (world.size() == 1) return mine;
  // Probabilities then labels, per rank (control-plane sized: 8 bytes a sample).
  const std::vector<std::string> parts = gather_strings(world.comm(), pack_floats(mine.prob, mine.labels));
  ScoredSet all;
  for (const std::string& part : parts) {
    const size_t count = part.size() / (2 * sizeof(float));
    const float* f = reinterpret_cast<const float*>(part.data());
    all.prob.insert(all.prob.end(), f, f + count);
    all.labels.insert(all.labels.end(), f + count, f + 2 * count);
  }
  return all;
}

// A row-sharded table's scoring: every fetch is a collective, so each rank reads its share first
// (a range of a set in memory, or what it reads of one streamed pass), the ranks agree on the
// most chunks any of them has, and a rank with fewer fetches nothing for the rest.
ScoredSet score_sharded(CtrModel& model, ShardedRows& rows, const LoadedSet& set, const JobSpec& spec,
                        const World& world) {
  const int fields = spec.model.fields;
  const int64_t chunk = 4096;
  BatchBuffers buffers;
  std::vector<int64_t> ids;
  std::vector<float> values, labels;
  int64_t begin = 0, count = 0;
  if (set.source) {
    const int64_t n = set.source->size();
    begin = n * world.rank() / world.size();
    count = n * (world.rank() + 1) / world.size() - begin;
    buffers.resize(chunk, fields);
  } else {
    run_on_all_ranks(world.comm(), [&] {
      for_each_ctr_batch(set.records(0, /*training=*/false), 0, fields, chunk,
                         [&](int64_t n, const int64_t* i, const float* v, const float* l) {
                           ids.insert(ids.end(), i, i + n * fields);
                           values.insert(values.end(), v, v + n * fields);
                           labels.insert(labels.end(), l, l + n);
                         });
    });
    count = static_cast<int64_t>(labels.size());
  }
  int64_t chunks = (count + chunk - 1) / chunk;
  SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &chunks, 1, MPI_INT64_T, MPI_MAX, world.comm()));
  ScoredSet mine;
  std::vector<float> prob(static_cast<size_t>(chunk));
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t at = c * chunk, b = std::max<int64_t>(0, std::min(chunk, count - at));
    const int64_t* batch_ids = ids.data() + at * fields;
    const float* batch_values = values.data() + at * fields;
    const float* batch_labels = labels.data() + at;
    if (set.source && b > 0) {
      std::iota(buffers.samples.begin(), buffers.samples.begin() + b, begin + at);
      set.source->fill(buffers.samples.data(), b, buffers.ids.data(), buffers.values.data(), buffers.labels.data());
      batch_ids = buffers.ids.data();
      batch_values = buffers.values.data();
      batch_labels = buffers.labels.data();
    }
    rows.fetch(batch_ids, b * fields, model.table().data());
    if (b == 0) continue;
    model.read_rows_from(rows.rows());
    model.forward(CtrBatch{b, rows.slots(), batch_values, nullptr, nullptr}, /*training=*/false, 0, prob.data());
    mine.prob.insert(mine.prob.end(), prob.begin(), prob.begin() + b);
    mine.labels.insert(mine.labels.end(), batch_labels, batch_labels + b);
  }
  return gather_scores(std::move(mine), world);
}

// Every rank scores its share (in memory: a contiguous range; streamed: what it reads of one
// pass); rank 0 gets all of them, in order for a set in memory. `sharded`: the job's sharded
// table's traffic (nullptr: the table is whole on every rank).
ScoredSet score_all(CtrModel& model, const LoadedSet& set, const JobSpec& spec, const World& world,
                    ShardedRows* sharded = nullptr) {
  if (sharded != nullptr) return score_sharded(model, *sharded, set, spec, world);
  ScoredSet mine;
  if (set.source) {
    const int64_t n = set.source->size();
    score_range(model, *set.source, n * world.rank() / world.size(), n * (world.rank() + 1) / world.size(), mine.prob,
                mine.labels);
  } else {
    std::vector<float> prob;
    run_on_all_ranks(world.comm(), [&] {
      for_each_ctr_batch(set.records(0, /*training=*/false), 0, spec.model.fields, 4096,
                         [&](int64_t n, const int64_t* ids, const float* values, const float* labels) {
                           prob.resize(static_cast<size_t>(n));
                           const CtrBatch batch{n, ids, values, nullptr, nullptr};
                           model.forward(batch, /*training=*/false, 0, prob.data());
                           mine.prob.insert(mine.prob.end(), prob.begin(), prob.end());
                           mine.labels.insert(mine.labels.end(), labels, labels + n);
                         });
    });
  }
  return gather_scores(std::move(mine), world);
}

struct TestMetrics {
  double logloss = std::nan(""), auc = std::nan("");
  int64_t samples = 0;
};

TestMetrics test_metrics(CtrModel& model, const LoadedSet& set, const JobSpec& spec, const World& world,
                         ShardedRows* sharded = nullptr) {
  const ScoredSet scored = score_all(model, set, spec, world, sharded);
  double values[3] = {0, 0, 0};
  if (world.rank() == 0) {
    const auto n = static_cast<int64_t>(scored.prob.size());
    values[0] = binary_log_loss(scored.prob.data(), scored.labels.data(), n);
    values[1] = binary_auc(scored.prob.data(), scored.labels.data(), n);
    values[2] = static_cast<double>(n);
  }
  // Rank 0's figures on every rank (NaN survives a broadcast, not a sum).
  const std::string text = broadcast_string(world.comm(), std::string(reinterpret_cast<char*>(values), sizeof values));
  std::memcpy(values, text.data(), sizeof values);
  return {values[0], values[1], static_cast<int64_t>(values[2])};
}

std::string describe_optimizer(const JobSpec& s) {
  const OptimizerSpec& o = s.optimizer;
  std::string text = to_string(o.name) + ", lazy on the table's rows";
  if (o.name == OptimizerKind::kSgd && o.momentum > 0) text += ", momentum " + format_double(o.momentum);
  if (o.name == OptimizerKind::kAdagrad || o.name == OptimizerKind::kFtrl)
    text += ", initial accumulator " + format_double(o.initial_accumulator);
  if (s.model.l2 > 0) text += "; L2 " + format_double(s.model.l2) + " on the MLP's weights and the touched rows";
  return text;
}

// The model file's metadata: enough to rebuild the model (evaluate, predict) and to check it.
std::map<std::string, std::string> model_metadata(const JobSpec& spec) {
  std::string hidden;
  for (int h : spec.model.hidden) hidden += (hidden.empty() ? "" : ",") + std::to_string(h);
  return {{"model", spec.model.name},
          {"fields", std::to_string(spec.model.fields)},
          {"table_rows", std::to_string(spec.model.table_rows)},
          {"embedding_size", std::to_string(spec.model.embedding_size)},
          {"hidden", hidden}};
}


// The rows of the table this rank holds (model.embedding_sharding).
TableShard table_shard(const JobSpec& spec, const World& world) {
  if (spec.model.embedding_sharding != "rows") return {};
  return {world.rank(), world.size()};
}

// Bytes of this rank's table and its optimizer state.
int64_t table_bytes_per_rank(const JobSpec& spec, const World& world) {
  const int64_t rows = table_shard(spec, world).rows(spec.model.table_rows);
  return rows * model_shape(spec.model).width() * static_cast<int64_t>(sizeof(float)) *
         (1 + CtrOptimizer::table_state_floats(spec.optimizer));
}

// The memory a rank of this node may use: its share of the node's.
int64_t rank_memory_bytes(const World& world) { return usable_memory_bytes() / std::max(1, world.local_size()); }

std::string gigabytes(double bytes) { return format_double(bytes / 1e9, 3) + " GB"; }

// A table that cannot fit is exit 2 on every rank before any memory is taken.
void check_table_fits(const JobSpec& spec, const World& world) {
  run_on_all_ranks(world.comm(), [&] {
    const int64_t needs = table_bytes_per_rank(spec, world), has = rank_memory_bytes(world);
    if (has <= 0 || needs < has) return;
    const bool sharded = spec.model.embedding_sharding == "rows";
    throw InputError("key 'model.table_rows': " + std::to_string(spec.model.table_rows) +
                     " rows with the optimizer's state need " + gigabytes(static_cast<double>(needs)) +
                     " a rank (" +
                     (sharded ? "sharded over " + std::to_string(world.size()) + " ranks" : "replicated") +
                     ", model.embedding_sharding), more than the " + gigabytes(static_cast<double>(has)) +
                     " a rank has on " + world.node_name() + " (its memory or cgroup limit over " +
                     std::to_string(world.local_size()) + " rank(s)): " +
                     (sharded ? "add hosts" : "shard the table over the ranks (model.embedding_sharding: rows)") +
                     " or lower model.table_rows");
  });
}

// A part of a checkpoint that does not read (missing, damaged): the set is not whole.
struct DamagedCheckpointPart : InputError {
  using InputError::InputError;
};

// A part's name for its rows in a model written in parts (save_model): "table.shard-00002-of-00004",
// each name once in the index's weight_map.
std::string part_tensor_name(const std::string& name, int index, int count) {
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".shard-%05d-of-%05d", index + 1, count);
  return name + suffix;
}

std::string model_part_file(int index, int count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", index + 1, count);
  return name;
}

// Copies into `views` (this shard's rows as held: the model's "table" [rows, width], each row w
// then v, and the optimizer's "optimizer.<slot>.table" [rows, width]) the rows of shard `from`
// that shard `to` holds, from `source`: a tensor of the same name, or for "table" the pair
// first_order.weight [rows, 1] and embedding.weight [rows, K] (a whole model or a replicated
// checkpoint). Straight into the live arrays: no second copy of a shard in memory.
void take_rows(const std::vector<NamedTensor>& source, TableShard from, TableShard to, int64_t table_rows,
               const std::vector<NamedTensor>& views, const std::string& what) {
  const int64_t from_rows = from.rows(table_rows);
  const auto find = [&](const std::string& name) -> const NamedTensor* {
    for (const NamedTensor& t : source)
      if (t.name == name) return &t;
    return nullptr;
  };
  struct Piece {
    const NamedTensor* src;
    int64_t stride, column;
  };
  for (const NamedTensor& dst : views) {
    const int64_t width = dst.tensor.dim(1);
    std::vector<Piece> pieces;
    if (const NamedTensor* same = find(dst.name)) {
      pieces.push_back({same, width, 0});
    } else if (dst.name == "table") {
      if (const NamedTensor* first = find("first_order.weight")) pieces.push_back({first, 1, 0});
      if (width > 1)
        if (const NamedTensor* v = find("embedding.weight")) pieces.push_back({v, width - 1, 1});
      if (static_cast<int64_t>(pieces.size()) != (width > 1 ? 2 : 1))
        throw InputError(what + ": no tensor 'first_order.weight'" + std::string(width > 1 ? " or 'embedding.weight'" : "") +
                         " (nor 'table')");
    } else {
      throw InputError(what + ": no tensor '" + dst.name + "'");
    }
    for (const Piece& piece : pieces)
      if (piece.src->tensor.dtype() != DType::kF32 || piece.src->tensor.numel() != from_rows * piece.stride)
        throw InputError(what + ": tensor '" + piece.src->name + "' has " + std::to_string(piece.src->tensor.numel()) +
                         " values; shard " + std::to_string(from.index + 1) + " of " + std::to_string(from.count) +
                         " of this job's table holds " + std::to_string(from_rows * piece.stride) +
                         " (model.table_rows, model.embedding_size, optimizer.name)");
    float* o = dst.tensor.data<float>();
    for (const Piece& piece : pieces) {
      const float* in = piece.src->tensor.data<float>();
      const size_t bytes = sizeof(float) * static_cast<size_t>(piece.stride);
      for (int64_t i = 0; i < from_rows; ++i) {
        const int64_t id = from.global_id(i);
        if (to.owner(id) == to.index) std::memcpy(o + to.local_row(id) * width + piece.column, in + i * piece.stride, bytes);
      }
    }
  }
}

class CtrRun {
 public:
  explicit CtrRun(JobSetup& setup)
      : spec_(setup.spec),
        world_(*setup.world),
        metrics_(world_.rank() == 0, spec_.output.metrics, tensorboard_directory(spec_.output)),
        model_(model_shape(spec_.model), spec_.seed, table_shard(spec_, world_)),
        optimizer_(spec_.optimizer, spec_.model.l2, model_),
        faults_(FaultPlan::from_environment(world_.rank())) {
    if (world_.size() > 1) {
      comm_ = make_communicator(CommBackend::kMpi, world_.comm());
      // The dense way of the rows' exchange: the job's AllReduce over host memory.
      AllreduceSetup dense_way;
      dense_way.algorithm = spec_.distributed.allreduce;
      dense_way.compression = resolve_compression(spec_.distributed.compression, spec_.precision);
      std::shared_ptr<AllreduceAlgorithm> allreduce = make_allreduce(world_, dense_way);
      // Every collective of the step is watched: a rank that stops taking part ends the job
      // (exit 3) naming the collective and the ranks that never arrived.
      watchdog_ = std::make_unique<Watchdog>(
          WatchdogOptions{spec_.distributed.stall_warning_s, spec_.distributed.timeout_s}, world_.rank(),
          ProgressBoard::create(world_));
      if (model_.shard().whole())
        rows_exchange_ = std::make_unique<RowExchange>(world_, spec_.model.table_rows, model_.shape().width(),
                                                       parse_row_exchange(spec_.distributed.embedding_exchange),
                                                       std::move(allreduce), dense_way.compression);
      else
        sharded_rows_ = std::make_unique<ShardedRows>(world_, model_.shape().width());
    }
  }

  void run();

 private:
  void load_data();
  void resume();
  double train_step(int64_t epoch, int64_t step_in_epoch);
  void exchange(double* loss_sum, bool* stop);
  void start_timeline();
  void write_timeline();
  void evaluate(int64_t epoch);
  void save_checkpoint();
  void save_model();
  void check_replicas();
  double largest_rss_mb() const;
  const std::vector<int64_t>& epoch_order(int64_t epoch);
  // Loads the checkpoint, its table rows dealt to this rank's shard: from its own tensors (a
  // replicated table) or from its parts (a sharded one, of any world size).
  void load_checkpoint(const Checkpoint& c);
  // Rank 0: the model's tensors with the whole table (each rank's shard gathered); others: {}.
  std::vector<NamedTensor> gather_model_tensors();

  const JobSpec& spec_;
  const World& world_;
  MetricsLog metrics_;
  CtrModel model_;
  CtrOptimizer optimizer_;
  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<RowExchange> rows_exchange_;  // more than one rank, the table replicated
  std::unique_ptr<ShardedRows> sharded_rows_;   // more than one rank, the table sharded
  std::unique_ptr<Watchdog> watchdog_;          // more than one rank
  std::unique_ptr<Timeline> timeline_;          // output.timeline
  FaultPlan faults_;                            // the e2e tests' SDP_TEST_* faults
  int64_t dense_exchanges_ = 0;                 // steps whose rows went the dense way
  LoadedSet train_, test_;
  std::unique_ptr<CtrTrainStream> stream_;  // a streamed training set
  int64_t batch_ = 0, global_batch_ = 0, steps_per_epoch_ = 0, total_steps_ = 0;
  std::unique_ptr<LrSchedule> schedule_;
  int64_t step_ = 0;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  BatchBuffers buffers_;
  std::vector<float> dense_grad_;
  RowAccumulator local_rows_, merged_rows_;
  std::vector<int> unique_counts_;  // every rank's unique rows this step (auto's choice)
  double train_seconds_ = 0, data_seconds_ = 0;
  // Parts of train_seconds_: the MLP's matrix products (and their operations), the exchange
  // between ranks, the optimizer's update.
  double gemm_seconds_ = 0, gemm_flops_ = 0, exchange_seconds_ = 0, update_seconds_ = 0;
  int64_t exchanged_bytes_ = 0;
  TestMetrics last_test_;
  bool interrupted_ = false;
};

void CtrRun::load_data() {
  const auto t0 = Clock::now();
  const std::string token = job_token(world_);
  train_ = load_agreed(spec_, world_, token, spec_.data.train, false);
  test_ = load_agreed(spec_, world_, token, spec_.data.test, true);
  if (world_.rank() == 0) {
    log_info("training data: " + train_.summary);
    log_info("test data: " + test_.summary + " (read in " + format_double(seconds_since(t0), 3) + " s)");
    if (test_.planted_auc >= 0)
      log_info("the planted model's own test AUC is " + format_double(test_.planted_auc, 5) +
               ": the best any model can reach on this synthetic set");
  }
  batch_ = spec_.data.batch_size;
  global_batch_ = batch_ * world_.size();
  // The ranks that share the set take a global batch's share of it a step: the world, or a
  // host's ranks when each host reads its own files.
  const int sharing = train_.load == CtrLoad::kFiles ? train_.readers : world_.size();
  steps_per_epoch_ = train_.samples / (batch_ * sharing);
  if (sharing < world_.size()) {
    // The hosts' sets differ in size, and every rank must run the same steps: the fewest.
    const std::vector<int> steps = allgather_ints(world_.comm(), static_cast<int>(steps_per_epoch_));
    steps_per_epoch_ = *std::min_element(steps.begin(), steps.end());
  }
  if (steps_per_epoch_ == 0)
    throw CollectiveFailure(ExitCode::kUsage,
                            "data.batch_size " + std::to_string(batch_) + " x " + std::to_string(sharing) +
                                " rank(s) = " + std::to_string(batch_ * sharing) + " is more than the " +
                                std::to_string(train_.samples) + " training samples" +
                                (sharing < world_.size() ? " of a host" : "") + ": lower data.batch_size",
                            world_.rank() == 0);
  total_steps_ = steps_per_epoch_ * spec_.train.epochs;
  if (spec_.train.max_steps > 0 && (total_steps_ == 0 || spec_.train.max_steps < total_steps_))
    total_steps_ = spec_.train.max_steps;
  schedule_ = std::make_unique<LrSchedule>(make_schedule(spec_, world_.size(), steps_per_epoch_, total_steps_));
  buffers_.resize(batch_, spec_.model.fields);
  if (!train_.source)
    run_on_all_ranks(world_.comm(), [&] {
      stream_ = std::make_unique<CtrTrainStream>(train_.records(spec_.seed, /*training=*/true), spec_.model.fields,
                                                 batch_, spec_.seed, world_.rank(), spec_.data.shuffle_buffer);
    });
}

void CtrRun::start_timeline() {
  if (spec_.output.timeline.empty()) return;
  // Time 0 of every rank's trace right after a barrier: the ranks' traces line up to within
  // the barrier's skew, even across hosts whose clocks are not comparable.
  if (world_.size() > 1)
    watchdog_->watch(step_, "timeline barrier", [&] { SDP_MPI_CHECK(MPI_Barrier(world_.comm())); });
  timeline_ = std::make_unique<Timeline>(world_.rank(), Clock::now());
  // Room for every event of the run, allocated now: the step path never allocates. Per step on
  // the main track: step, data wait, table fetch, forward, backward, allreduce, table rows,
  // optimizer; the
  // checkpoints and evaluations.
  const auto steps = static_cast<std::size_t>(std::max<int64_t>(total_steps_ - step_, 0));
  const std::size_t checkpoints =
      spec_.checkpoint.every_steps > 0 ? steps / static_cast<std::size_t>(spec_.checkpoint.every_steps) : 0;
  const auto capped = [](std::size_t n) { return std::min<std::size_t>(n, kMaxTraceEvents); };
  timeline_->reserve(TraceTrack::kMain,
                     capped(steps * 8 + checkpoints + 4 * static_cast<std::size_t>(spec_.train.epochs + 4)));
}

void CtrRun::write_timeline() {
  if (!timeline_) return;
  const std::string other = "{\"world_size\":" + std::to_string(world_.size()) +
                            ",\"steps\":" + std::to_string(step_) + ",\"model\":\"" + spec_.model.name + "\"}";
  const auto write = [&] { write_job_timeline(*timeline_, spec_.output.timeline, world_, other); };
  if (watchdog_)
    watchdog_->watch(step_, "timeline gather", write);
  else
    write();
}

const std::vector<int64_t>& CtrRun::epoch_order(int64_t epoch) {
  if (order_epoch_ == epoch) return order_;
  epoch_permutation(spec_.seed, epoch, train_.source->size(), order_);
  order_epoch_ = epoch;
  return order_;
}

void CtrRun::exchange(double* loss_sum, bool* stop) {
  const size_t dense = dense_grad_.size();
  const std::vector<float>& batch_stats = model_.batch_stats();
  if (world_.size() == 1) {
    if (!batch_stats.empty()) model_.update_running_stats(batch_stats.data());
    return;
  }
  // Dense: the gradients, BatchNorm's batch statistics (averaged, so that every replica keeps
  // the same running statistics), the loss sum, the stop flag and (auto's choice of the rows'
  // way) each rank's count of unique rows, in its own slot, in one allreduce.
  dense_grad_.insert(dense_grad_.end(), batch_stats.begin(), batch_stats.end());
  const size_t counts_at = dense_grad_.size();
  const bool counts = rows_exchange_ && rows_exchange_->needs_counts();
  if (counts) {
    dense_grad_.resize(counts_at + static_cast<size_t>(world_.size()), 0.0f);
    dense_grad_[counts_at + static_cast<size_t>(world_.rank())] = static_cast<float>(local_rows_.rows().size());
  }
  dense_grad_.push_back(static_cast<float>(*loss_sum));
  dense_grad_.push_back(*stop ? 1.0f : 0.0f);
  if (faults_.stalls_at(step_)) FaultPlan::stall(world_.rank(), "at step " + std::to_string(step_));
  const auto t_dense = Clock::now();
  watchdog_->watch(step_, "dense gradient allreduce", [&] {
    comm_->allreduce(CommBuffer::host(dense_grad_.data(), static_cast<int64_t>(dense_grad_.size())))->wait();
  });
  const auto t_rows = Clock::now();
  const int64_t dense_bytes = static_cast<int64_t>(sizeof(float) * dense_grad_.size());
  *stop = dense_grad_.back() > 0.0f;
  *loss_sum = dense_grad_[dense_grad_.size() - 2];
  unique_counts_.clear();
  if (counts)
    for (int r = 0; r < world_.size(); ++r)  // sums of one count and zeros: exact below 2^24
      unique_counts_.push_back(static_cast<int>(dense_grad_[counts_at + static_cast<size_t>(r)]));
  if (!batch_stats.empty()) {
    float* stats = dense_grad_.data() + dense;
    for (size_t i = 0; i < batch_stats.size(); ++i) stats[i] /= static_cast<float>(world_.size());
    model_.update_running_stats(stats);
  }
  dense_grad_.resize(dense);
  exchanged_bytes_ += static_cast<int64_t>(sizeof(float) * 2 * dense);
  if (faults_.stalls_in("rows_exchange")) FaultPlan::stall(world_.rank(), "before the table rows' exchange");
  if (sharded_rows_) {
    // The fetched rows' gradients to their owners, summed there.
    watchdog_->watch(step_, "table rows gradients to their owners",
                     [&] { sharded_rows_->reduce(local_rows_.rows(), merged_rows_); });
    exchanged_bytes_ += sharded_rows_->bytes_received();
    if (timeline_) {
      timeline_->record(TraceTrack::kMain, "allreduce", t_dense, t_rows, step_, dense_bytes);
      timeline_->record(TraceTrack::kMain, "table_rows", t_rows, Clock::now(), step_, sharded_rows_->bytes_received(),
                        -1, "sharded", merged_rows_.rows().size());
    }
    return;
  }
  // The table's rows: every rank's unique rows, summed the same way on every rank.
  watchdog_->watch(step_, "table rows exchange",
                   [&] { rows_exchange_->run(local_rows_.rows(), merged_rows_, unique_counts_); });
  const RowExchangeStep& step = rows_exchange_->last();
  exchanged_bytes_ += step.bytes_received;
  if (step.dense) ++dense_exchanges_;
  if (timeline_) {
    timeline_->record(TraceTrack::kMain, "allreduce", t_dense, t_rows, step_, dense_bytes);
    timeline_->record(TraceTrack::kMain, "table_rows", t_rows, Clock::now(), step_, step.bytes_received, -1,
                      step.dense ? "dense" : "sparse", step.rows);
  }
}

double CtrRun::train_step(int64_t epoch, int64_t step_in_epoch) {
  const auto t_data = Clock::now();
  if (stream_) {
    // A bad record met here ends the job from this rank (main's one-rank abort, exit 2).
    stream_->next(buffers_.ids.data(), buffers_.values.data(), buffers_.labels.data(), buffers_.samples.data());
  } else {
    const std::vector<int64_t>& order = epoch_order(epoch);
    const int64_t first = step_in_epoch * global_batch_ + world_.rank() * batch_;
    std::copy(order.begin() + first, order.begin() + first + batch_, buffers_.samples.begin());
    train_.source->fill(buffers_.samples.data(), batch_, buffers_.ids.data(), buffers_.values.data(),
                        buffers_.labels.data());
  }
  const auto t_step = Clock::now();
  data_seconds_ += std::chrono::duration<double>(t_step - t_data).count();
  if (timeline_) timeline_->record(TraceTrack::kMain, "data_wait", t_data, t_step, step_);
  CtrBatch batch = buffers_.batch(batch_);
  if (sharded_rows_) {
    // The rows this batch reads, from their owners; the batch's ids become their slots.
    const auto t_fetch = Clock::now();
    watchdog_->watch(step_, "table rows fetch", [&] {
      sharded_rows_->fetch(batch.ids, batch_ * spec_.model.fields, model_.table().data());
    });
    model_.read_rows_from(sharded_rows_->rows());
    batch.ids = sharded_rows_->slots();
    exchange_seconds_ += seconds_since(t_fetch);
    if (timeline_) timeline_->record(TraceTrack::kMain, "table_fetch", t_fetch, Clock::now(), step_);
  }
  const CtrModel::GemmTally gemm_before = model_.gemm_tally();
  double loss_sum;
  {
    TraceScope forward(timeline_.get(), "forward", step_);
    loss_sum = model_.forward(batch, /*training=*/true, step_, buffers_.prob.data());
  }
  local_rows_.reset(model_.shape().width(),
                    sharded_rows_ ? sharded_rows_->unique() : batch_ * spec_.model.fields);
  {
    // Each rank's gradient is of its losses over the global batch: summed over ranks, the mean.
    TraceScope backward(timeline_.get(), "backward", step_);
    model_.backward(batch, 1.0f / static_cast<float>(global_batch_), dense_grad_, local_rows_);
  }
  bool stop = interruption_requested();
  const auto t_exchange = Clock::now();
  exchange(&loss_sum, &stop);
  exchange_seconds_ += seconds_since(t_exchange);
  const double mean_loss = loss_sum / static_cast<double>(global_batch_);
  if (!std::isfinite(mean_loss))
    throw CollectiveFailure(ExitCode::kRuntime,
                            "step " + std::to_string(step_) + " (epoch " + std::to_string(epoch) +
                                "): the training loss is not finite; lower optimizer.lr",
                            world_.rank() == 0);
  // One rank: its own rows are the step's.
  const SparseRows& rows = world_.size() == 1 ? local_rows_.rows() : merged_rows_.rows();
  const auto t_update = Clock::now();
  optimizer_.step(static_cast<float>(schedule_->lr_at(step_)), dense_grad_, rows);
  const auto t_end = Clock::now();
  update_seconds_ += std::chrono::duration<double>(t_end - t_update).count();
  train_seconds_ += std::chrono::duration<double>(t_end - t_step).count();
  if (timeline_) {
    timeline_->record(TraceTrack::kMain, "optimizer", t_update, t_end, step_);
    timeline_->record(TraceTrack::kMain, "step", t_data, t_end, step_);
  }
  gemm_seconds_ += model_.gemm_tally().seconds - gemm_before.seconds;
  gemm_flops_ += model_.gemm_tally().flops - gemm_before.flops;
  if (stop) interrupted_ = true;
  return mean_loss;
}

void CtrRun::resume() {
  const CheckpointSpec& c = spec_.checkpoint;
  if (c.resume == "never") return;
  std::optional<Checkpoint> found;
  run_on_all_ranks(world_.comm(), [&] {
    if (c.resume != "auto") {
      found = read_checkpoint(c.resume);
      return;
    }
    std::vector<std::string> skipped;
    found = find_newest_checkpoint(c.dir, &skipped);
    if (world_.rank() == 0)
      for (const std::string& s : skipped) log_warn("skipped checkpoint " + s);
  });
  const int differs = first_rank_differing(world_.comm(), found ? static_cast<uint64_t>(found->step) + 1 : 0);
  if (differs >= 0)
    throw CollectiveFailure(ExitCode::kUsage,
                            "rank " + std::to_string(differs) + " found another newest checkpoint in " + c.dir +
                                " than rank 0: the ranks must share the checkpoint directory",
                            world_.rank() == 0);
  if (!found) return;
  // A checkpoint is whole or skipped: one whose part some rank cannot read (lost, damaged) is
  // passed over for the next older one under auto, and is exit 2 when named.
  bool partly_loaded = false;
  while (true) {
    std::string damaged;
    run_on_all_ranks(world_.comm(), [&] {
      if (found->meta("model") != spec_.model.name)
        throw InputError(found->path + ": a checkpoint of model " + found->meta("model") + ", not " + spec_.model.name);
      try {
        load_checkpoint(*found);
      } catch (const DamagedCheckpointPart& e) {
        damaged = e.what();
      }
    });
    const std::vector<std::string> reports = allgather_strings(world_.comm(), damaged);
    const auto bad = std::find_if(reports.begin(), reports.end(), [](const std::string& r) { return !r.empty(); });
    if (bad == reports.end()) break;
    const std::string why = "rank " + std::to_string(bad - reports.begin()) + ": " + *bad;
    if (c.resume != "auto")
      throw CollectiveFailure(ExitCode::kUsage, found->path + " is not whole: " + why, world_.rank() == 0);
    if (world_.rank() == 0) log_warn("skipped checkpoint " + found->path + ": " + why);
    partly_loaded = true;
    const int64_t newer = found->step;
    found.reset();
    run_on_all_ranks(world_.comm(), [&] {
      for (const auto& [step, path] : list_checkpoints(c.dir)) {
        if (step >= newer) continue;
        try {
          found = read_checkpoint(path);
          return;
        } catch (const Error& e) {
          if (world_.rank() == 0) log_warn(std::string("skipped checkpoint ") + e.what());
        }
      }
    });
    if (!found && partly_loaded)  // the model holds some of a damaged checkpoint's rows: no fresh start
      throw CollectiveFailure(ExitCode::kUsage,
                              "no checkpoint in " + c.dir + " is whole: remove them to start afresh, or set "
                              "checkpoint.resume: never",
                              world_.rank() == 0);
    if (!found) return;
  }
  // Samples seen, so that a run on another world size (another global batch) goes on from
  // the same place in the same epoch's order.
  const int64_t samples = found->meta_int("samples_seen");
  const int64_t per_epoch_old = found->meta_int("samples_per_epoch");
  const int64_t epoch = per_epoch_old > 0 ? samples / per_epoch_old : 0;
  const int64_t in_epoch = per_epoch_old > 0 ? samples % per_epoch_old : 0;
  step_ = epoch * steps_per_epoch_ + in_epoch / global_batch_;
  if (world_.rank() == 0) {
    std::string note = "resuming from " + found->path + " (step " + std::to_string(found->step) + ")";
    if (in_epoch % global_batch_ != 0 || found->meta_int("global_batch") != global_batch_)
      note += "; the global batch changed from " + found->meta("global_batch") + " to " +
              std::to_string(global_batch_) + ": continuing at step " + std::to_string(step_) + " of this run";
    log_info(note);
  }
  metrics_.continue_file();
}

void CtrRun::save_checkpoint() {
  TraceScope trace(timeline_.get(), "checkpoint", step_);
  CheckpointSnapshot snapshot;
  snapshot.dir = spec_.checkpoint.dir;
  snapshot.step = step_;
  snapshot.keep_last = spec_.checkpoint.keep_last;
  snapshot.metadata = model_metadata(spec_);
  snapshot.metadata["format"] = kCheckpointFormat;
  snapshot.metadata["step"] = std::to_string(step_);
  const int64_t per_epoch = steps_per_epoch_ * global_batch_;
  snapshot.metadata["samples_per_epoch"] = std::to_string(per_epoch);
  snapshot.metadata["samples_seen"] = std::to_string((step_ / steps_per_epoch_) * per_epoch +
                                                     (step_ % steps_per_epoch_) * global_batch_);
  snapshot.metadata["global_batch"] = std::to_string(global_batch_);
  snapshot.tensors = model_.named_tensors(/*table=*/!sharded_rows_);
  for (NamedTensor& t : optimizer_.state_tensors(/*table=*/!sharded_rows_)) snapshot.tensors.push_back(std::move(t));
  if (sharded_rows_) {
    // Each rank writes its rows and their state, from the live arrays (a table too large for
    // one rank has no room for a copy; the write ends before the next step); rank 0 then writes
    // the rest, which makes the set a checkpoint (io/checkpoint.hpp), once every part is on disk.
    std::vector<NamedTensor> part = optimizer_.table_state_views();
    part.insert(part.begin(), model_.table_view());
    snapshot.metadata["table_shards"] = std::to_string(world_.size());
    std::map<std::string, std::string> part_metadata = model_metadata(spec_);
    part_metadata["format"] = kCheckpointFormat;
    part_metadata["step"] = std::to_string(step_);
    part_metadata["table_shard"] = std::to_string(world_.rank());
    part_metadata["table_shards"] = std::to_string(world_.size());
    run_on_all_ranks(world_.comm(), [&] {
      std::filesystem::create_directories(snapshot.dir);
      save_safetensors(checkpoint_part_path(snapshot.dir, step_, world_.rank(), world_.size()), part, part_metadata);
    });
  }
  // Rank 0 writes (every replica holds the same bits); all agree on its success.
  run_on_all_ranks(world_.comm(), [&] {
    if (world_.rank() == 0) write_checkpoint(snapshot);
  });
}

void CtrRun::load_checkpoint(const Checkpoint& c) {
  const int64_t parts = c.metadata.count("table_shards") ? c.meta_int("table_shards") : 1;
  if (parts < 1 || parts > (int64_t{1} << 20))
    throw InputError(c.path + ": checkpoint metadata 'table_shards' is " + std::to_string(parts) +
                     ": a table is held by 1 or more ranks");
  model_.load(c.tensors, c.path, /*table=*/false);
  optimizer_.load_state(c.tensors, c.path, /*table=*/false);
  std::vector<NamedTensor> views = optimizer_.table_state_views();
  views.insert(views.begin(), model_.table_view());
  const TableShard mine = model_.shard();
  const int64_t rows = spec_.model.table_rows;
  if (parts == 1) {
    take_rows(c.tensors, TableShard{}, mine, rows, views, c.path);
    return;
  }
  const auto count = static_cast<int>(parts);
  const std::string dir = std::filesystem::path(c.path).parent_path().string();
  for (int p = 0; p < count; ++p) {
    if (!mine.shares_ids_with(TableShard{p, count})) continue;
    Checkpoint part;
    try {
      part = read_checkpoint(checkpoint_part_path(dir, c.step, p, count));
    } catch (const InputError& e) {
      throw DamagedCheckpointPart(e.what());
    }
    if (part.meta_int("table_shard") != p || part.meta_int("table_shards") != parts)
      throw InputError(part.path + ": holds table shard " + part.meta("table_shard") + " of " +
                       part.meta("table_shards") + ", its name says " + std::to_string(p) + " of " +
                       std::to_string(parts));
    take_rows(part.tensors, TableShard{p, count}, mine, rows, views, part.path);
  }
}

std::vector<NamedTensor> CtrRun::gather_model_tensors() {
  if (!sharded_rows_) return world_.rank() == 0 ? model_.named_tensors() : std::vector<NamedTensor>{};
  std::vector<NamedTensor> tensors = world_.rank() == 0 ? model_.named_tensors(/*table=*/false) : std::vector<NamedTensor>{};
  // Rank 0 receives every other rank's rows in turn, in pieces MPI's int counts can carry.
  const int width = model_.shape().width(), k = model_.shape().k();
  const int64_t table_rows = spec_.model.table_rows;
  constexpr int64_t kPiece = int64_t{1} << 26;
  if (world_.rank() != 0) {
    const std::vector<float>& mine = model_.table();
    for (int64_t at = 0; at < static_cast<int64_t>(mine.size()); at += kPiece)
      SDP_MPI_CHECK(MPI_Send(mine.data() + at, static_cast<int>(std::min<int64_t>(kPiece, mine.size() - at)),
                             MPI_FLOAT, 0, 0, world_.comm()));
    return tensors;
  }
  Tensor first(Shape{table_rows, 1}, DType::kF32, Device::cpu());
  Tensor v(Shape{table_rows, k}, DType::kF32, Device::cpu());
  std::vector<float> shard_rows;
  for (int r = 0; r < world_.size(); ++r) {
    const TableShard from{r, world_.size()};
    const int64_t n = from.rows(table_rows) * width;
    const float* rows = model_.table().data();
    if (r > 0) {
      shard_rows.resize(static_cast<size_t>(n));
      for (int64_t at = 0; at < n; at += kPiece)
        SDP_MPI_CHECK(MPI_Recv(shard_rows.data() + at, static_cast<int>(std::min(kPiece, n - at)), MPI_FLOAT, r, 0,
                               world_.comm(), MPI_STATUS_IGNORE));
      rows = shard_rows.data();
    }
    for (int64_t i = 0; i < from.rows(table_rows); ++i) {
      const int64_t id = from.global_id(i);
      first.data<float>()[id] = rows[i * width];
      if (k > 0) std::memcpy(v.data<float>() + id * k, rows + i * width + 1, sizeof(float) * k);
    }
  }
  // In named_tensors()'s order: bias, the table, the rest.
  std::vector<NamedTensor> table = {{"first_order.weight", first}};
  if (k > 0) table.push_back({"embedding.weight", v});
  tensors.insert(tensors.begin() + 1, table.begin(), table.end());
  return tensors;
}

void CtrRun::save_model() {
  if (spec_.output.model_dir.empty()) return;
  std::map<std::string, std::string> metadata = model_metadata(spec_);
  metadata["steps"] = std::to_string(step_);
  if (std::isfinite(last_test_.auc)) metadata["test_auc"] = format_double(last_test_.auc, 6);
  if (std::isfinite(last_test_.logloss)) metadata["test_logloss"] = format_double(last_test_.logloss, 6);
  // One file when rank 0 can hold the whole table beside what it holds already (its peak so
  // far); else each rank writes its part and rank 0 an index, as sharded safetensors models are.
  int whole = 1;
  if (sharded_rows_) {
    const double table = 4.0 * model_.shape().width() * static_cast<double>(spec_.model.table_rows);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    whole = 1024.0 * static_cast<double>(usage.ru_maxrss) + 1.25 * table < static_cast<double>(rank_memory_bytes(world_));
    SDP_MPI_CHECK(MPI_Bcast(&whole, 1, MPI_INT, 0, world_.comm()));
  }
  if (whole) {
    std::vector<NamedTensor> tensors;
    run_on_all_ranks(world_.comm(), [&] { tensors = gather_model_tensors(); });
    run_on_all_ranks(world_.comm(), [&] {
      if (world_.rank() != 0) return;
      std::filesystem::create_directories(spec_.output.model_dir);
      save_safetensors(spec_.output.model_dir + "/model.safetensors", tensors, metadata);
    });
    return;
  }
  const int rank = world_.rank(), count = world_.size();
  // The rows as they are held (no copy: rank 0 has no room for one), [rows, 1 + K]: each row
  // the first-order weight then the embedding.
  NamedTensor rows = model_.table_view();
  std::vector<NamedTensor> part = {{part_tensor_name(rows.name, rank, count), rows.tensor}};
  if (rank == 0)
    for (NamedTensor& t : model_.named_tensors(/*table=*/false)) part.push_back(std::move(t));
  std::map<std::string, std::string> part_metadata = metadata;
  part_metadata["table_shard"] = std::to_string(rank);
  part_metadata["table_shards"] = std::to_string(count);
  const std::vector<std::string> names = [&] {
    std::string mine;
    for (const NamedTensor& t : part) mine += t.name + "\n";
    return gather_strings(world_.comm(), mine);
  }();
  run_on_all_ranks(world_.comm(), [&] {
    std::filesystem::create_directories(spec_.output.model_dir);
    save_safetensors(spec_.output.model_dir + "/" + model_part_file(rank, count), part, part_metadata);
  });
  run_on_all_ranks(world_.comm(), [&] {
    if (rank != 0) return;
    ModelIndex index;
    index.metadata = metadata;
    index.metadata["table_shards"] = std::to_string(count);
    index.metadata["total_size"] = std::to_string(
        4 * (static_cast<int64_t>(model_.dense().size()) + model_.shape().width() * spec_.model.table_rows));
    for (int r = 0; r < count; ++r) {
      std::istringstream lines(names[static_cast<size_t>(r)]);
      for (std::string name; std::getline(lines, name);) index.weight_map[name] = model_part_file(r, count);
    }
    const std::string text = model_index_json(index);
    write_file_atomically(spec_.output.model_dir + "/model.safetensors.index.json",
                          [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  });
  if (rank == 0)
    log_info("the table does not fit rank 0's memory whole: the model is in " + std::to_string(count) +
             " parts, " + spec_.output.model_dir + "/model.safetensors.index.json");
}

void CtrRun::evaluate(int64_t epoch) {
  TraceScope trace(timeline_.get(), "evaluation", step_);
  last_test_ = test_metrics(model_, test_, spec_, world_, sharded_rows_.get());
  metrics_.emit("eval", "epoch " + std::to_string(epoch + 1),
                {{"epoch", static_cast<double>(epoch + 1)},
                 {"step", static_cast<double>(step_)},
                 {"test_logloss", last_test_.logloss},
                 {"test_auc", last_test_.auc},
                 {"test_samples", static_cast<double>(last_test_.samples)}});
}

// distributed.check_every_steps: every rank's parameters (table and dense) are the same bits.
// A sharded table is each rank's own: only the dense parameters are compared.
void CtrRun::check_replicas() {
  uint32_t crc = sharded_rows_ ? 0 : crc32c(model_.table().data(), model_.table().size() * sizeof(float));
  crc = crc32c_extend(crc, model_.dense().data(), model_.dense().size() * sizeof(float));
  const int differs = first_rank_differing(world_.comm(), crc);
  if (differs >= 0)
    throw CollectiveFailure(ExitCode::kRuntime,
                            "step " + std::to_string(step_) + ": the parameters of rank " + std::to_string(differs) +
                                " differ from rank 0's: the replicas drifted apart",
                            world_.rank() == 0);
}

// The largest peak resident set of any rank so far, in MB. Collective.
double CtrRun::largest_rss_mb() const {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  double mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mb, 1, MPI_DOUBLE, MPI_MAX, world_.comm()));
  return mb;
}

void CtrRun::run() {
  load_data();
  resume();
  start_timeline();
  if (stream_) stream_->start(step_);
  if (!spec_.checkpoint.dir.empty() && world_.rank() == 0)
    for (const std::string& removed : remove_interrupted_checkpoint_writes(spec_.checkpoint.dir))
      log_warn("removed " + removed + ": the unfinished write of a run that was killed");
  for (const std::string& note : spec_.source_notes)
    if (world_.rank() == 0) log_info(note);
  metrics_.emit("start", "start",
                {{"world_size", static_cast<double>(world_.size())},
                 {"batch_per_rank", static_cast<double>(batch_)},
                 {"global_batch", static_cast<double>(global_batch_)},
                 {"steps_per_epoch", static_cast<double>(steps_per_epoch_)},
                 {"total_steps", static_cast<double>(total_steps_)},
                 {"table_rows", static_cast<double>(spec_.model.table_rows)},
                 {"dense_parameters", static_cast<double>(model_.dense().size())}},
                {{"model", spec_.model.name}});
  const int64_t log_every = std::max(1, spec_.train.log_every);
  double window_loss = 0, window_seconds = 0;
  int64_t window_steps = 0;
  while (step_ < total_steps_ && !interrupted_) {
    const int64_t epoch = step_ / steps_per_epoch_;
    const double seconds_before = train_seconds_;
    const double loss = train_step(epoch, step_ % steps_per_epoch_);
    const double lr = schedule_->lr_at(step_);
    ++step_;
    window_loss += loss;
    window_seconds += train_seconds_ - seconds_before;
    ++window_steps;
    if (step_ % log_every == 0 || step_ == total_steps_) {
      metrics_.emit("train", "step " + std::to_string(step_),
                    {{"epoch", static_cast<double>(epoch + 1)},
                     {"step", static_cast<double>(step_)},
                     {"train_loss", window_loss / static_cast<double>(window_steps)},
                     {"lr", lr},
                     {"samples_per_sec",
                      window_seconds > 0 ? static_cast<double>(window_steps * global_batch_) / window_seconds : 0.0},
                     {"exchanged_mb_per_step",
                      static_cast<double>(exchanged_bytes_) / 1e6 / static_cast<double>(std::max<int64_t>(1, step_))},
                     {"exchanged_rows", static_cast<double>(rows_exchange_  ? rows_exchange_->last().rows
                                                            : sharded_rows_ ? merged_rows_.rows().size()
                                                                            : 0)},
                     {"dense_exchange_steps", static_cast<double>(dense_exchanges_)}});
      window_loss = window_seconds = 0;
      window_steps = 0;
    }
    const int64_t check_every = spec_.distributed.check_every_steps;
    if (world_.size() > 1 && check_every > 0 && step_ % check_every == 0) check_replicas();
    if (interrupted_) break;
    const bool epoch_end = step_ % steps_per_epoch_ == 0;
    const int64_t every = spec_.checkpoint.every_steps;
    if (every > 0 && step_ % every == 0 && step_ < total_steps_) save_checkpoint();
    if (epoch_end && spec_.train.eval_every_epochs > 0 && step_ < total_steps_ &&
        (step_ / steps_per_epoch_) % spec_.train.eval_every_epochs == 0)
      evaluate(epoch);
  }
  if (interrupted_) {
    save_checkpoint();
    write_timeline();
    if (world_.rank() == 0)
      log_info("interrupted (SIGTERM or SIGINT on at least one rank): stopped at step " + std::to_string(step_) +
               " with checkpoint " + checkpoint_path(spec_.checkpoint.dir, step_) +
               "; every rank exits 0; run the same job again to continue (checkpoint.resume: auto)");
    return;
  }
  evaluate((std::max<int64_t>(step_, 1) - 1) / steps_per_epoch_);
  if (!spec_.checkpoint.dir.empty()) save_checkpoint();
  // Before the model is written: rank 0 may gather a sharded table whole for model.safetensors.
  const double train_peak_rss_mb = largest_rss_mb();
  save_model();
  write_timeline();
  const double seen = static_cast<double>(step_) * static_cast<double>(global_batch_);
  const double peak_rss_mb = largest_rss_mb();
  metrics_.emit("done", "done",
                {{"steps", static_cast<double>(step_)},
                 {"train_seconds", train_seconds_},
                 {"samples_per_sec", train_seconds_ > 0 ? seen / train_seconds_ : 0.0},
                 {"data_seconds", data_seconds_},
                 {"mlp_gemm_seconds", gemm_seconds_},
                 {"mlp_gemm_gflops", gemm_seconds_ > 0 ? gemm_flops_ / gemm_seconds_ / 1e9 : 0.0},
                 {"exchange_seconds", exchange_seconds_},
                 {"update_seconds", update_seconds_},
                 {"test_auc", last_test_.auc},
                 {"test_logloss", last_test_.logloss},
                 {"exchanged_mb_per_step",
                  static_cast<double>(exchanged_bytes_) / 1e6 / static_cast<double>(std::max<int64_t>(1, step_))},
                 {"dense_exchange_steps", static_cast<double>(dense_exchanges_)},
                 {"train_peak_rss_mb", train_peak_rss_mb},
                 {"peak_rss_mb", peak_rss_mb}});
}

// Rebuilds the job's model and loads `path`: a model.safetensors, a checkpoint, or the index of
// a model written in parts (model.safetensors.index.json); each rank takes its shard's rows.
void load_model_file(CtrModel& model, const JobSpec& spec, const World& world, const std::string& path) {
  const auto check_model = [&](const SafetensorsContent& content, const std::string& file) {
    if (auto it = content.metadata.find("model"); it != content.metadata.end() && it->second != spec.model.name)
      throw InputError(file + ": a " + it->second + " model, but the job's model.name is " + spec.model.name);
  };
  run_on_all_ranks(world.comm(), [&] {
    const std::vector<NamedTensor> views = {model.table_view()};
    const TableShard mine = model.shard();
    if (!ends_with(path, ".index.json")) {
      const SafetensorsContent content = load_safetensors(path);
      check_model(content, path);
      model.load(content.tensors, path, /*table=*/false);
      take_rows(content.tensors, TableShard{}, mine, spec.model.table_rows, views, path);
      return;
    }
    const ModelIndex index = read_model_index(path);
    const auto shards = index.metadata.find("table_shards");
    int count = 0;
    if (shards != index.metadata.end()) try {
        count = std::stoi(shards->second);
      } catch (const std::logic_error&) {
      }
    if (count < 1 || count > (1 << 20))
      throw InputError(path + ": metadata 'table_shards' must be the number of parts (1 or more)");
    const std::string dir = std::filesystem::path(path).parent_path().string();
    for (int p = 0; p < count; ++p) {
      const bool mine_in_it = mine.shares_ids_with(TableShard{p, count});
      if (p != 0 && !mine_in_it) continue;  // part 0 has the dense tensors
      const std::string rows_name = part_tensor_name("table", p, count);
      const auto file = index.weight_map.find(rows_name);
      if (file == index.weight_map.end()) throw InputError(path + ": no 'weight_map." + rows_name + "'");
      const std::string part = (dir.empty() ? "" : dir + "/") + file->second;
      SafetensorsContent content = load_safetensors(part);
      check_model(content, part);
      for (NamedTensor& t : content.tensors)
        if (t.name == rows_name) t.name = "table";
      if (p == 0) model.load(content.tensors, part, /*table=*/false);
      if (mine_in_it) take_rows(content.tensors, TableShard{p, count}, mine, spec.model.table_rows, views, part);
    }
  });
}

// How the training split is read, for the plan (data.load).
std::string describe_load(const JobSpec& s, const World& w, const std::string& path) {
  if (s.data.format == DataFormat::kSynthetic) return "generated per sample";
  CtrLoad load;
  try {
    load = ctr_load(s, path);
  } catch (const InputError&) {
    return "data.load does not fit this set (loading it says why)";  // one agreed error, at loading
  }
  switch (load) {
    case CtrLoad::kMemory: return "read whole by every rank, a global permutation each epoch (data.load)";
    case CtrLoad::kPipe: return "streamed from SageMaker's pipe, one reader a host, shuffle buffer " +
                                std::to_string(s.data.shuffle_buffer) + " (data.load)";
    case CtrLoad::kFiles: break;
  }
  const bool host = data_reader(s, path, w).second < w.size();
  return std::string("streamed, each rank its share of ") + (host ? "its host's" : "the") +
         " files, shuffle buffer " + std::to_string(s.data.shuffle_buffer) + " (data.load)";
}

}  // namespace

std::string describe_ctr_plan(const JobSetup& setup) {
  const JobSpec& s = setup.spec;
  const World& w = *setup.world;
  const CtrModelShape shape = model_shape(s.model);
  std::ostringstream out;
  out << "  model        : " << s.model.name << " (" << s.model.fields << " fields, table " << s.model.table_rows
      << " rows x " << shape.width() << " floats [w";
  if (shape.k() > 0) out << " | v of " << shape.k();
  out << "]";
  if (shape.kind == CtrModelKind::kDeepFm) {
    out << ", MLP";
    for (size_t i = 0; i < s.model.hidden.size(); ++i) out << (i ? "-" : " ") << s.model.hidden[i];
    out << "-1";
    if (s.model.batch_norm) out << ", BatchNorm (decay " << s.model.batch_norm_decay << ", statistics averaged over the ranks)";
    if (s.model.dropout > 0) out << ", dropout " << s.model.dropout;
  }
  out << ")\n";
  out << "  math         : f32 on the CPU; MLP on oneDNN's sgemm; own kernels " << cpu_isa_name(cpu_kernel_isa())
      << " (detected " << cpu_isa_name(detected_cpu_isa()) << ")\n";
  out << "  data         : " << to_string(s.data.format);
  if (s.data.format != DataFormat::kSynthetic) out << " (train " << s.data.train << ", test " << s.data.test << ")";
  out << ", " << describe_load(s, w, s.data.train) << "; ids >= model.table_rows: " << s.data.id_overflow << "\n";
  out << "  batch        : " << s.data.batch_size << " per rank, " << s.data.batch_size * w.size() << " global\n";
  out << "  learning rate: " << describe_lr_rule(s, w.size()) << ", schedule " << to_string(s.optimizer.schedule)
      << "\n";
  out << "  optimizer    : " << describe_optimizer(s) << "\n";
  out << "  table        : ";
  {
    const int64_t bytes = table_bytes_per_rank(s, w), has = rank_memory_bytes(w);
    if (s.model.embedding_sharding == "rows" && w.size() > 1)
      out << "rows sharded over the " << w.size() << " ranks (model.embedding_sharding: rows; rank r holds id % "
          << w.size() << " == r)";
    else
      out << "whole on every rank (model.embedding_sharding: " << s.model.embedding_sharding << ")";
    out << "; with the optimizer's state " << gigabytes(static_cast<double>(bytes)) << " a rank";
    if (has > 0) out << " of " << gigabytes(static_cast<double>(has));
    out << "\n";
  }
  out << "  exchange     : ";
  if (w.size() == 1) {
    out << "none (one rank)\n";
  } else if (s.model.embedding_sharding == "rows") {
    const double unique = static_cast<double>(std::min<int64_t>(s.data.batch_size * s.model.fields, s.model.table_rows));
    out << "dense gradients by allreduce over mpi; table rows fetched from their owners and their gradients sent "
           "back (MPI_Alltoallv, at most "
        << format_double(unique * (8 + 8 * shape.width()) * (w.size() - 1) / w.size() / 1e6, 3)
        << " MB a rank a step each way)\n";
  } else {
    // The upper bound of a step's unique rows: every id of the batch distinct.
    const int unique = static_cast<int>(std::min<int64_t>(s.data.batch_size * s.model.fields, s.model.table_rows));
    const Compression compression = resolve_compression(s.distributed.compression, s.precision);
    const ExchangeBytes bytes =
        estimate_bytes(std::vector<int>(static_cast<size_t>(w.size()), unique), w.nodes(), w.local_size(),
                       shape.width(), s.model.table_rows, compression == Compression::kNone ? 4 : 2);
    out << "dense gradients by allreduce over mpi; table rows " << s.distributed.embedding_exchange
        << " (distributed.embedding_exchange): sparse (each node's rows summed once, then across " << w.nodes()
        << " node(s); at most " << format_double(bytes.sparse / 1e6, 3) << " MB a rank a step) or dense (an allreduce of "
        << "the table, " << format_double(bytes.dense / 1e6, 3) << " MB a rank a step)";
    if (s.distributed.embedding_exchange == "auto")
      out << "; auto takes the fewer bytes each step, from the step's unique rows (here at most " << unique
          << " a rank: " << (bytes.dense < bytes.sparse ? "dense" : "sparse") << ")";
    if (compression != Compression::kNone)
      out << "; across nodes in " << to_string(compression) << " (distributed.compression)";
    out << "\n";
  }
  out << "  checkpoints  : " << s.checkpoint.dir << " (every " << s.checkpoint.every_steps << " steps, keep "
      << s.checkpoint.keep_last << ", resume " << s.checkpoint.resume << ")\n";
  out << "  outputs      : model " << s.output.model_dir << "/model.safetensors\n";
  return out.str();
}

CtrProfile measure_ctr_step(const JobSetup& setup, int64_t steps, int64_t warmup) {
  const JobSpec& spec = setup.spec;
  const World& world = *setup.world;
  nn::set_num_threads(setup.device.threads);
  set_flush_denormals(spec.numerics.flush_denormals);
  const LoadedSet train = load_agreed(spec, world, job_token(world), spec.data.train, false);
  if (!train.source)
    throw CollectiveFailure(ExitCode::kUsage,
                            "plan: a CTR job's step and unique ids are measured from its training set in memory, but " +
                                spec.data.train + " is " + (train.load == CtrLoad::kPipe ? "a Pipe-mode channel" : "streamed") +
                                ": measure them on a part of it with --set data.load=memory --set data.train=PART "
                                "--save-compute FILE, then plan this job with --compute FILE",
                            world.rank() == 0);
  const CtrSource& source = *train.source;
  const int64_t batch = spec.data.batch_size, samples = source.size();
  if (samples < batch)
    throw CollectiveFailure(ExitCode::kUsage,
                            "plan: " + spec.data.train + " holds " + std::to_string(samples) +
                                " samples, fewer than one batch (data.batch_size " + std::to_string(batch) + ")",
                            world.rank() == 0);
  CtrModel model(model_shape(spec.model), spec.seed);
  CtrOptimizer optimizer(spec.optimizer, spec.model.l2, model);
  const int fields = spec.model.fields, width = model.shape().width();
  BatchBuffers buffers;
  buffers.resize(batch, fields);
  std::vector<float> dense_grad;
  RowAccumulator rows, received;
  // The job's shuffled order (epoch 0), as the trainer deals it: rank r's batches at r.
  std::vector<int64_t> order;
  epoch_permutation(spec.seed, 0, samples, order);
  const int64_t batches = samples / batch;
  double data_s = 0, compute_s = 0, update_s = 0, update_rows = 0, record_s = 0, records = 0, fetched_s = 0;
  // A sharded table's step (ShardedRows::fetch without its traffic): the batch's unique ids,
  // their rows in one block, forward and backward reading it.
  RowAccumulator dedupe, fetched_grad;
  std::vector<float> fetched;
  std::vector<int64_t> slots;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    const int64_t first = ((step * world.size() + world.rank()) % batches) * batch;
    const auto t_data = Clock::now();
    std::copy(order.begin() + first, order.begin() + first + batch, buffers.samples.begin());
    source.fill(buffers.samples.data(), batch, buffers.ids.data(), buffers.values.data(), buffers.labels.data());
    const CtrBatch b = buffers.batch(batch);
    const auto t0 = Clock::now();
    model.forward(b, /*training=*/true, step, buffers.prob.data());
    rows.reset(width, batch * fields);
    model.backward(b, 1.0f / static_cast<float>(batch), dense_grad, rows);
    const auto t1 = Clock::now();
    optimizer.step(static_cast<float>(spec.optimizer.lr), dense_grad, rows.rows());
    const auto t2 = Clock::now();
    // What the exchange pays a record it receives: its id found or placed, its row added.
    const SparseRows& mine = rows.rows();
    received.reset(width, mine.size());
    for (int64_t i = 0; i < mine.size(); ++i) received.add(mine.ids[static_cast<size_t>(i)], mine.row(i));
    const auto t3 = Clock::now();
    {
      const int64_t pairs = batch * fields;
      dedupe.reset(0, pairs);
      const uint32_t* first_seen = dedupe.assign_slots(b.ids, pairs);
      const std::vector<int64_t>& unique = dedupe.rows().ids;
      fetched.resize(unique.size() * static_cast<size_t>(width));
      for (size_t u = 0; u < unique.size(); ++u)
        std::memcpy(fetched.data() + u * width, model.table().data() + unique[u] * width, sizeof(float) * width);
      slots.resize(static_cast<size_t>(pairs));
      for (int64_t p = 0; p < pairs; ++p) slots[p] = first_seen[p] & ~RowAccumulator::kNewSlot;
      CtrBatch compact = b;
      compact.ids = slots.data();
      model.read_rows_from(fetched.data());
      model.forward(compact, /*training=*/true, step, buffers.prob.data());
      fetched_grad.reset(width, static_cast<int64_t>(unique.size()));
      model.backward(compact, 1.0f / static_cast<float>(batch), dense_grad, fetched_grad);
      model.read_rows_from(nullptr);
    }
    const auto t4 = Clock::now();
    if (step < warmup) continue;
    fetched_s += std::chrono::duration<double>(t4 - t3).count();
    data_s += std::chrono::duration<double>(t0 - t_data).count();
    compute_s += std::chrono::duration<double>(t1 - t0).count();
    update_s += std::chrono::duration<double>(t2 - t1).count();
    update_rows += static_cast<double>(mine.size());
    record_s += std::chrono::duration<double>(t3 - t2).count();
    records += static_cast<double>(mine.size());
  }
  const double n = static_cast<double>(steps);
  std::vector<double> figures = {data_s / n, compute_s / n, update_s / n, record_s / std::max(1.0, records),
                                 fetched_s / n};
  MPI_Allreduce(MPI_IN_PLACE, figures.data(), static_cast<int>(figures.size()), MPI_DOUBLE, MPI_MAX, world.comm());

  CtrProfile p;
  p.model = spec.model.name;
  p.batch_per_rank = batch;
  p.samples = samples;
  p.table_rows = spec.model.table_rows;
  p.fields = fields;
  p.width = width;
  p.dense_floats = static_cast<int64_t>(dense_grad.size() + model.batch_stats().size());
  p.data_s = figures[0];
  p.compute_s = figures[1];
  p.update_s = figures[2];
  p.update_rows = update_rows / n;
  p.record_s = figures[3];
  p.fetched_compute_s = figures[4];
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  p.measured_on = std::string(host) + ", cpu, " + std::to_string(setup.device.threads) + " thread(s), " +
                  std::to_string(steps) + " steps" +
                  (world.size() > 1 ? ", slowest of " + std::to_string(world.size()) + " ranks running at once" : "");
  // Unique ids among the first 1, 2, 4, ... batches of the order, up to the set.
  std::vector<int64_t> ids;
  for (int64_t m = batch; m <= samples; m *= 2) {
    buffers.resize(m, fields);
    std::copy(order.begin(), order.begin() + m, buffers.samples.begin());
    source.fill(buffers.samples.data(), m, buffers.ids.data(), buffers.values.data(), buffers.labels.data());
    ids.assign(buffers.ids.begin(), buffers.ids.begin() + m * fields);
    std::sort(ids.begin(), ids.end());
    const double unique = static_cast<double>(std::unique(ids.begin(), ids.end()) - ids.begin());
    p.unique.emplace_back(static_cast<double>(m), unique);
    if (m > samples / 2) break;
  }
  return p;
}

CtrProfile read_ctr_profile_for(const JobSpec& spec, const std::string& path) {
  CtrProfile p = plan::read_ctr_profile(path);
  const auto differs = [&](const std::string& what, const std::string& file, const std::string& job) {
    return InputError("--compute: " + path + " was measured for " + what + " " + file + ", the job's is " + job);
  };
  if (p.model != spec.model.name) throw differs("model", p.model, spec.model.name);
  if (p.batch_per_rank != spec.data.batch_size)
    throw differs("batch", std::to_string(p.batch_per_rank), std::to_string(spec.data.batch_size) + " (data.batch_size)");
  if (p.table_rows != spec.model.table_rows)
    throw differs("a table of", std::to_string(p.table_rows) + " rows",
                  std::to_string(spec.model.table_rows) + " (model.table_rows)");
  if (p.fields != spec.model.fields)
    throw differs("fields", std::to_string(p.fields), std::to_string(spec.model.fields) + " (model.fields)");
  const int width = model_shape(spec.model).width();
  if (p.width != width)
    throw differs("rows of", std::to_string(p.width) + " floats", std::to_string(width) + " (model.embedding_size + 1)");
  p.measured_on = "from " + path + ": " + p.measured_on;
  return p;
}

void train_ctr(JobSetup& setup) {
  install_interruption_handlers();
  check_output_locations(setup.spec, *setup.world);
  check_table_fits(setup.spec, *setup.world);
  nn::set_num_threads(setup.device.threads);
  set_flush_denormals(setup.spec.numerics.flush_denormals);
  CtrRun(setup).run();
}

void evaluate_ctr_model(JobSetup& setup, const std::string& model_path) {
  nn::set_num_threads(setup.device.threads);
  const JobSpec& spec = setup.spec;
  check_table_fits(spec, *setup.world);
  CtrModel model(model_shape(spec.model), spec.seed, table_shard(spec, *setup.world));
  load_model_file(model, spec, *setup.world, model_path);
  const LoadedSet test = load_agreed(spec, *setup.world, job_token(*setup.world), spec.data.test, true);
  std::unique_ptr<ShardedRows> sharded;
  if (!model.shard().whole()) sharded = std::make_unique<ShardedRows>(*setup.world, model.shape().width());
  const TestMetrics m = test_metrics(model, test, spec, *setup.world, sharded.get());
  if (setup.world->rank() == 0)
    std::printf("[evaluate] model=%s test_samples=%lld test_logloss=%.6f test_auc=%.6f\n", model_path.c_str(),
                static_cast<long long>(m.samples), m.logloss, m.auc);
}

void predict_ctr(JobSetup& setup, const std::string& model_path, const std::string& input, const std::string& output) {
  nn::set_num_threads(setup.device.threads);
  const JobSpec& spec = setup.spec;
  const World& world = *setup.world;
  check_table_fits(spec, world);
  CtrModel model(model_shape(spec.model), spec.seed, table_shard(spec, world));
  load_model_file(model, spec, world, model_path);
  std::unique_ptr<ShardedRows> sharded;
  if (!model.shard().whole()) sharded = std::make_unique<ShardedRows>(world, model.shape().width());
  // In memory whatever data.load says: the probabilities come out in the file's order.
  JobSpec in_order = spec;
  in_order.data.load = "memory";
  in_order.data.shard = DataShard::kRank;
  const LoadedSet set = load_agreed(in_order, world, "", input, true);
  const ScoredSet scored = score_all(model, set, spec, world, sharded.get());
  run_on_all_ranks(world.comm(), [&] {
    if (world.rank() != 0) return;
    std::FILE* file = output == "-" ? stdout : std::fopen(output.c_str(), "w");
    if (file == nullptr) throw InputError(output + ": cannot write the predictions: " + std::strerror(errno));
    for (float p : scored.prob) std::fprintf(file, "%.7g\n", p);
    if (file != stdout && std::fclose(file) != 0)
      throw RuntimeError(output + ": writing the predictions failed: " + std::strerror(errno));
    if (file == stdout) std::fflush(stdout);
  });
  if (world.rank() == 0 && output != "-")
    log_info("wrote " + std::to_string(scored.prob.size()) + " probabilities to " + output);
}

}  // namespace sdp
