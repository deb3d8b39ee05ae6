// Training, evaluating and scoring the CTR models (deepfm, fm, lr; docs/ctr.md) on the CPU,
// data parallel: every rank holds the dense model; each step every rank takes its share of
// one global batch, the dense gradients are summed by an allreduce and the tables' sparse
// gradients (each rank's unique rows) are gathered and summed in rank order, so every replica
// applies the same update to the same bits. The table is whole on every rank, or its rows are
// sharded over the ranks (model.embedding_sharding: rows; ctr/sharded_rows.hpp), each rank
// updating its own.
#pragma once

#include <string>

#include "train/ctr_plan.hpp"
#include "train/job_setup.hpp"

namespace sdp {

// The plan's lines that are the CTR model's own (model, tables, exchange), after the ranks.
std::string describe_ctr_plan(const JobSetup& setup);

void train_ctr(JobSetup& setup);

// `sdp-train plan`'s measure of a CTR job: every rank of the launch runs `steps` training
// steps of the job's model on its own batches of the training set (after `warmup` more),
// none exchanged, all at once (ranks sharing a machine share it as in the job); the slowest
// rank's times. The unique ids among 1, 2, 4, ... batches are counted from the set in the
// job's shuffled order. The set is read into memory: a streamed or Pipe-mode set is exit 2.
// Collective over the world.
CtrProfile measure_ctr_step(const JobSetup& setup, int64_t steps, int64_t warmup);
// A profile from `path` (`plan --compute`), or InputError when it was measured for another
// model, batch, table or field count than the job's.
CtrProfile read_ctr_profile_for(const JobSpec& spec, const std::string& path);

// `sdp-train evaluate` of a CTR model: test log loss and AUC over the whole test set.
void evaluate_ctr_model(JobSetup& setup, const std::string& model_path);

// `sdp-train predict`: one click probability per input sample, in order, written to `output`
// ("-": stdout) by rank 0.
void predict_ctr(JobSetup& setup, const std::string& model_path, const std::string& input, const std::string& output);

}  // namespace sdp
