#include "train/checkpointing.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/job_spec_yaml.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "distributed/agreement.hpp"
#include "distributed/collectives.hpp"
#include "train/global_batch.hpp"

namespace sdp {

namespace {

using Clock = std::chrono::steady_clock;

std::string hex(uint64_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// The shortest text that reads back as the same double (0.04, not 0.040000000000000001).
std::string num(double v) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, v);
  return std::string(text, result.ptr);
}

const char* kOptimizerPrefix = "optimizer.";

// The optimizer's state views grouped by arena (state_tensors() lists arena after arena).
std::vector<ArenaViews> optimizer_groups(const Optimizer& optimizer, const ParameterStore& store) {
  std::vector<ArenaViews> groups;
  const std::vector<NamedTensor> views = optimizer.state_tensors();
  const std::size_t per_arena = store.params().size();
  for (std::size_t a = 0; a < optimizer.state_arenas().size(); ++a) {
    ArenaViews g{optimizer.state_arenas()[a].tensor, {}};
    for (std::size_t i = 0; i < per_arena; ++i) {
      const NamedTensor& v = views[a * per_arena + i];
      g.views.push_back({kOptimizerPrefix + v.name, v.tensor});
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace

std::vector<ArenaViews> state_groups(const nn::Model& model, const Optimizer& optimizer) {
  const ParameterStore& store = model.store();
  std::vector<ArenaViews> groups;
  groups.push_back({store.param_arena(), {}});
  for (const Param& p : store.params()) groups.back().views.push_back({p.name, p.value});
  if (!store.buffers().empty()) {
    groups.push_back({store.buffer_arena(), {}});
    for (const Buffer& b : store.buffers()) groups.back().views.push_back({b.name, b.value});
  }
  for (ArenaViews& g : optimizer_groups(optimizer, store)) groups.push_back(std::move(g));
  return groups;
}

namespace {

// Every tensor the job's state consists of, by checkpoint name (live views).
std::map<std::string, Tensor> live_tensors(nn::Model& model, const Optimizer& optimizer) {
  std::map<std::string, Tensor> all;
  for (const Param& p : model.store().params()) all[p.name] = p.value;
  for (const Buffer& b : model.store().buffers()) all[b.name] = b.value;
  for (const ArenaViews& g : optimizer_groups(optimizer, model.store()))
    for (const NamedTensor& v : g.views) all[v.name] = v.tensor;
  return all;
}

std::string cannot_resume(const Checkpoint& c) {
  return c.path + ": cannot resume from this checkpoint: ";
}
const char* kWayOut = "; use another checkpoint.dir, or checkpoint.resume: never to start afresh";

// Rank 0: the checkpoint belongs to this job's model and optimizer; copies its tensors into
// the live arenas. Throws InputError (exit 2) otherwise.
void restore_on_rank0(const Checkpoint& c, const JobSpec& spec, nn::Model& model,
                      Optimizer& optimizer) {
  if (c.meta("model") != spec.model.name)
    throw InputError(cannot_resume(c) + "it holds model '" + c.meta("model") +
                     "' but key 'model.name' is '" + spec.model.name + "'" + kWayOut);
  if (c.meta("fingerprint") != hex(model.store().fingerprint()))
    throw InputError(
        cannot_resume(c) + "its " + c.meta("model") +
        " has other parameter names or shapes than this job's (model.hidden, model.num_classes or "
        "the data's image size changed?)" +
        kWayOut);
  if (c.meta("optimizer") != optimizer.name())
    throw InputError(cannot_resume(c) + "it holds the state of optimizer '" + c.meta("optimizer") +
                     "' but key 'optimizer.name' is '" + optimizer.name() + "'" + kWayOut);
  // Every rank reads these after the broadcast: they must be present and numbers now, while
  // a bad file is still rank 0's agreed error.
  for (const char* key : {"step", "cursor_epoch", "cursor_offset", "world_size", "global_batch",
                          "steps_per_epoch", "optimizer_steps"})
    if (c.meta_int(key) < 0)
      throw InputError(c.path + ": checkpoint metadata '" + key + "' is negative");
  // amp-fp16's loss scale (fp32 and bf16 checkpoints have none): a finite number >= 1.
  if (c.metadata.count("loss_scale") > 0) {
    const std::string& text = c.meta("loss_scale");
    char* end = nullptr;
    const float scale = std::strtof(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(scale) || scale < 1.0f)
      throw InputError(c.path + ": checkpoint metadata 'loss_scale' is not a loss scale (a finite number >= 1): '" +
                       text + "'");
    if (c.meta_int("loss_scale_good_steps") < 0)
      throw InputError(c.path + ": checkpoint metadata 'loss_scale_good_steps' is negative");
  }
  std::map<std::string, const Tensor*> stored;
  for (const NamedTensor& t : c.tensors) stored[t.name] = &t.tensor;
  for (auto& [name, live] : live_tensors(model, optimizer)) {
    auto it = stored.find(name);
    if (it == stored.end())
      throw InputError(cannot_resume(c) + "it lacks tensor '" + name + "'" + kWayOut);
    const Tensor& t = *it->second;
    if (t.shape() != live.shape() || t.dtype() != live.dtype())
      throw InputError(cannot_resume(c) + "tensor '" + name + "' is " + shape_str(t.shape()) +
                       ", the job's is " + shape_str(live.shape()) + kWayOut);
    live.copy_from(t);
  }
}

// What this job changed of the job spec the checkpoint was written under: one line per key,
// so that a changed learning rate or epoch count is never taken over silently.
std::vector<std::string> job_spec_changes(const Checkpoint& c, const JobSpec& spec) {
  if (c.metadata.count("job_spec") == 0) return {};
  try {
    std::vector<std::string> lines;
    for (const JobSpecDifference& d : job_spec_differences(c.meta("job_spec"), job_spec_to_yaml(spec)))
      lines.push_back("resume: key '" + d.key + "' " +
                      (d.before.empty() ? "was not in the checkpoint's job spec" : "was " + d.before + " in the checkpoint") +
                      ", now " + d.after);
    return lines;
  } catch (const InputError& e) {
    log_warn(c.path + ": cannot compare with the job spec it holds (" + e.what() + ")");
    return {};
  }
}

}  // namespace

Checkpointer::Checkpointer(const JobSpec& spec, const World& world, nn::Model& model,
                           Optimizer& optimizer, LossScaler* scaler)
    : spec_(spec), world_(world), model_(model), optimizer_(optimizer), scaler_(scaler) {
  if (world.rank() != 0) return;
  for (const std::string& path : remove_interrupted_checkpoint_writes(spec.checkpoint.dir))
    log_warn("removed " + path +
             ": the unfinished write of a checkpoint by an earlier run that was killed");
  writer_ = std::make_unique<CheckpointWriter>();
  // The host copies are made (and their pages touched) now, before step 0, so that no
  // checkpoint pays for fresh memory in the step loop.
  for (const ArenaViews& g : state_groups(model_, optimizer_))
    copies_.emplace_back(g.arena.shape(), g.arena.dtype(), Device::cpu());
}

void Checkpointer::save(const TrainPosition& at, const LrSchedule& schedule,
                        int64_t steps_per_epoch, int64_t total_steps, bool wait,
                        Communicator& comm) {
  last_saved_step_ = at.step;
  // First, before anything on rank 0 may throw: the collective part. Every rank's buffer
  // arena reaches rank 0 (an allgather: small, BatchNorm statistics only).
  const ParameterStore& live = model_.store();
  Tensor all_buffers;
  if (world_.size() > 1 && !live.buffers().empty()) {
    const int64_t count = live.buffer_arena().numel();
    all_buffers = Tensor({count * world_.size()}, live.buffer_arena().dtype(), live.device());
    all_buffers.slice(count * world_.rank(), count).copy_from(live.buffer_arena());
    comm.allgather(CommBuffer::of(all_buffers), std::vector<int64_t>(world_.size(), count))->wait();
  }
  if (!writer_) return;
  const auto start = Clock::now();
  // The previous write reads from copies_: it must be done before they are overwritten.
  writer_->wait();
  CheckpointSnapshot snapshot;
  snapshot.dir = spec_.checkpoint.dir;
  snapshot.step = at.step;
  snapshot.keep_last = spec_.checkpoint.keep_last;
  const ParameterStore& store = model_.store();
  const GlobalBatch batch = global_batch(spec_, world_.size());
  snapshot.metadata = {
      {"format", kCheckpointFormat},
      {"version", SDP_VERSION},
      {"model", spec_.model.name},
      {"fingerprint", hex(store.fingerprint())},
      {"step", std::to_string(at.step)},
      {"cursor_epoch", std::to_string(at.cursor.epoch)},
      {"cursor_offset", std::to_string(at.cursor.offset)},
      {"world_size", std::to_string(world_.size())},
      {"batch_size", std::to_string(spec_.data.batch_size)},
      {"accumulate_steps", std::to_string(batch.accumulate)},
      {"global_batch", std::to_string(batch.size())},
      {"reference_batch", std::to_string(reference_batch(spec_))},
      {"steps_per_epoch", std::to_string(steps_per_epoch)},
      {"total_steps", std::to_string(total_steps)},
      {"optimizer", optimizer_.name()},
      {"optimizer_steps", std::to_string(optimizer_.step_count())},
      {"lr_next", num(schedule.lr_at(at.step))},
      {"peak_lr", num(schedule.peak_lr())},
      {"seed", std::to_string(spec_.seed)},
      // No generator state to save: the data order and augmentation are functions of
      // (seed, epoch, sample), dropout masks of (seed, layer, rank, step).
      {"rng", "counter-based: data (seed, epoch, sample), dropout (seed, layer, rank, step)"},
      {"job_spec", job_spec_to_yaml(spec_)},
  };
  // train.conv_algorithms: measured: the algorithms every rank computes with (rank 0's), which a
  // resumed run takes instead of timing again (timing can pick others: other bits).
  if (const std::string measured = model_.measured_conv_algorithms(); !measured.empty())
    snapshot.metadata["conv_algorithms"] = measured;
  if (scaler_ != nullptr && scaler_->enabled()) {
    snapshot.metadata["loss_scale"] = num(scaler_->scale());
    snapshot.metadata["loss_scale_good_steps"] = std::to_string(scaler_->good_steps());
  }
  const std::vector<ArenaViews> groups = state_groups(model_, optimizer_);
  copies_.resize(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) add_to_snapshot(snapshot, groups[i], &copies_[i]);
  if (all_buffers.defined() && all_buffers.numel() > 0) {
    const int64_t count = live.buffer_arena().numel();
    ArenaViews others{all_buffers, {}};
    for (int r = 1; r < world_.size(); ++r)
      for (const Buffer& b : live.buffers())
        others.views.push_back(
            {"ranks." + std::to_string(r) + "." + b.name,
             all_buffers.slice(r * count + b.offset, shape_numel(b.shape)).reshaped(b.shape)});
    add_to_snapshot(snapshot, others);
  }
  writer_->submit(std::move(snapshot));
  if (wait) writer_->wait();
  blocked_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
}

void Checkpointer::wait() {
  if (writer_) writer_->wait();
}

bool Checkpointer::stash_rank_buffers(const Checkpoint& c) {
  const ParameterStore& store = model_.store();
  if (world_.size() == 1 || store.buffers().empty() || c.meta_int("world_size") != world_.size())
    return false;
  std::map<std::string, const Tensor*> stored;
  for (const NamedTensor& t : c.tensors) stored[t.name] = &t.tensor;
  const int64_t count = store.buffer_arena().numel();
  Tensor all({count * world_.size()}, store.buffer_arena().dtype(), Device::cpu());
  for (int r = 1; r < world_.size(); ++r)
    for (const Buffer& b : store.buffers()) {
      auto it = stored.find("ranks." + std::to_string(r) + "." + b.name);
      if (it == stored.end() || it->second->shape() != b.shape) return false;  // rank 0's for all
      all.slice(r * count + b.offset, shape_numel(b.shape)).copy_from(*it->second);
    }
  rank_buffers_ = all;
  return true;
}

void Checkpointer::restore_rank_buffers(Communicator& comm) {
  if (!rank_buffers_pending_) return;
  rank_buffers_pending_ = false;
  const ParameterStore& store = model_.store();
  const int64_t count = store.buffer_arena().numel();
  Tensor all({count * world_.size()}, store.buffer_arena().dtype(), store.device());
  if (world_.rank() == 0) all.copy_from(rank_buffers_);
  run_watched(watch_, 0, "checkpoint buffer broadcast", [&] { comm.broadcast(CommBuffer::of(all), {0})->wait(); });
  // Rank 0's own slot was never filled: it keeps the buffers it restored.
  Tensor mine = store.buffer_arena();  // a view: copying into it restores the live buffers
  if (world_.rank() != 0) mine.copy_from(all.slice(count * world_.rank(), count));
  rank_buffers_ = Tensor();
}

std::string Checkpointer::last_path() const {
  return writer_ ? writer_->last_written() : std::string();
}

std::optional<ResumePoint> Checkpointer::resume(Communicator& comm, int64_t steps_per_epoch,
                                                const LrSchedule& schedule) {
  if (spec_.checkpoint.resume == "never") return std::nullopt;
  std::string chosen;  // rank 0: the checkpoint's metadata as JSON; "" = start afresh
  run_watched(watch_, 0, "checkpoint read agreement", [&] { run_on_all_ranks(world_.comm(), [&] {
    if (world_.rank() == 0) chosen = read_on_rank0();
  }); });
  if (faults_ != nullptr && faults_->stalls_in("checkpoint_broadcast"))
    FaultPlan::stall(world_.rank(), "before the checkpoint broadcast");
  run_watched(watch_, 0, "checkpoint broadcast", [&] { chosen = broadcast_string(world_.comm(), chosen, 0); });
  if (chosen.empty()) return std::nullopt;
  const auto meta = nlohmann::json::parse(chosen).get<std::map<std::string, std::string>>();
  rank_buffers_pending_ = meta.count("rank_buffers") > 0;
  auto get = [&](const char* key) { return std::stoll(meta.at(key)); };

  // Parameters and buffers reach the other ranks with every run's start-up broadcast
  // (Trainer::start_replicas); the optimizer state goes here, from the same rank 0.
  run_watched(watch_, 0, "checkpoint broadcast", [&] {
    for (const NamedTensor& arena : optimizer_.state_arenas()) comm.broadcast(CommBuffer::of(arena.tensor), {0})->wait();
  });
  optimizer_.set_step_count(get("optimizer_steps"));
  // A checkpoint of an fp32 or bf16 run has no loss scale: amp-fp16 then starts afresh.
  // (Rank 0 checked both keys before the broadcast.)
  if (scaler_ != nullptr && meta.count("loss_scale") > 0)
    scaler_->restore(std::stof(meta.at("loss_scale")), get("loss_scale_good_steps"));
  // The convolution algorithms the run measured, on every rank, before the first configure. Text
  // that does not read is no reason to lose the run: its algorithms are timed again (every rank
  // reads the same text, so all do the same).
  if (spec_.train.conv_algorithms == "measured" && meta.count("conv_algorithms") > 0) {
    std::string why;
    try {
      why = model_.use_measured_conv_algorithms(meta.at("conv_algorithms"), meta.at("path") + ": conv_algorithms");
    } catch (const InputError& e) {
      why = e.what();
    }
    if (!why.empty() && world_.rank() == 0)
      log_warn("resume: the convolution algorithms are timed again, not taken from the checkpoint (" + why +
               "): the resumed run may leave the bits of the one it resumes");
  }

  ResumePoint point = resume_point(meta, steps_per_epoch, schedule);
  for (const std::string& change : spec_changes_) log_info(change);  // rank 0's only
  return point;
}

std::string Checkpointer::read_on_rank0() {
  const std::string& mode = spec_.checkpoint.resume;
  std::optional<Checkpoint> c;
  if (mode == "auto") {
    std::vector<std::string> skipped;
    c = find_newest_checkpoint(spec_.checkpoint.dir, &skipped);
    for (const std::string& s : skipped) log_warn("skipping checkpoint " + s);
    // Checkpoints there, none of them readable: starting afresh would silently throw away the
    // run they hold (and the next checkpoints would be removed as the oldest).
    if (!c && !skipped.empty())
      throw InputError("key 'checkpoint.dir': none of the " + std::to_string(skipped.size()) + " checkpoints in '" +
                       spec_.checkpoint.dir + "' can be resumed (each is named above); restore one from a copy, " +
                       "or move them away (or set checkpoint.resume: never) to start afresh");
  } else {
    try {
      c = read_checkpoint(mode);
    } catch (const InputError& e) {
      throw InputError("key 'checkpoint.resume': " + std::string(e.what()));
    }
  }
  if (!c) return "";
  if (!c->checksummed)
    log_info("note: " + c->path + " carries no checksums (written before sdp-train checked them): loaded unverified");
  restore_on_rank0(*c, spec_, model_, optimizer_);
  nlohmann::json meta = c->metadata;
  if (stash_rank_buffers(*c)) meta["rank_buffers"] = "1";
  meta["path"] = c->path;
  spec_changes_ = job_spec_changes(*c, spec_);
  meta.erase("job_spec");  // not needed by the other ranks
  return meta.dump();
}

ResumePoint Checkpointer::resume_point(const std::map<std::string, std::string>& meta, int64_t steps_per_epoch,
                                       const LrSchedule& schedule) const {
  auto get = [&](const char* key) { return std::stoll(meta.at(key)); };
  ResumePoint point;
  point.path = meta.at("path");
  point.checkpoint_step = get("step");
  point.position.cursor = SampleCursor{get("cursor_epoch"), get("cursor_offset")};
  const int64_t old_global = get("global_batch");
  const int64_t new_global = global_batch(spec_, world_.size()).size();
  if (old_global == new_global && get("steps_per_epoch") == steps_per_epoch) {
    point.position.step = point.checkpoint_step;
  } else {
    // The step count is in global batches (optimizer steps), which changed: count the steps
    // this run would have taken to reach the same sample cursor (the LR schedule is a function
    // of it).
    point.position.step =
        point.position.cursor.epoch * steps_per_epoch + point.position.cursor.offset / new_global;
  }
  if (world_.rank() == 0) {
    std::string line = "resuming from " + point.path + ": step " +
                       std::to_string(point.checkpoint_step) + ", epoch " +
                       std::to_string(point.position.cursor.epoch + 1) + " at sample " +
                       std::to_string(point.position.cursor.offset) +
                       " of its permutation, optimizer update " + meta.at("optimizer_steps");
    // Checkpoints written before gradient accumulation existed have no accumulate_steps: 1.
    const std::string old_accumulate =
        meta.count("accumulate_steps") ? meta.at("accumulate_steps") : "1";
    const std::string new_accumulate = std::to_string(spec_.train.accumulate_steps);
    if (point.position.step != point.checkpoint_step || get("world_size") != world_.size() ||
        old_global != new_global || old_accumulate != new_accumulate)
      line += "; re-derived for this run: world size " + meta.at("world_size") + " -> " +
              std::to_string(world_.size()) +
              (old_accumulate != new_accumulate
                   ? ", accumulate_steps " + old_accumulate + " -> " + new_accumulate
                   : std::string()) +
              ", global batch " + std::to_string(old_global) + " -> " + std::to_string(new_global) +
              ", steps per epoch " + meta.at("steps_per_epoch") + " -> " +
              std::to_string(steps_per_epoch) + ", peak LR " + meta.at("peak_lr") + " -> " +
              num(schedule.peak_lr()) + ", step " + std::to_string(point.checkpoint_step) + " -> " +
              std::to_string(point.position.step);
    log_info(line);
  }
  return point;
}

}  // namespace sdp
