// One rank's CTR step as measured on one machine, and the unique ids among the job's samples
// (train/ctr_trainer.cpp measure_ctr_step): what the CTR plan (train/ctr_plan.hpp) prices N
// nodes from. `plan --save-compute FILE` writes it and `plan --compute FILE` reads it, so that a
// job whose set streams, or is not on this machine, is planned from a part measured elsewhere.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace sdp::plan {

struct CtrProfile {
  std::string model, measured_on;
  int64_t batch_per_rank = 0, table_rows = 0, dense_floats = 0;
  int64_t samples = 0;       // the set the unique ids were counted in
  int fields = 0;            // ids a sample
  int width = 0;             // floats of a table row
  double data_s = 0;         // the batch read from the set (shown; not in the step)
  double compute_s = 0;      // forward, backward and the rank's own row sums
  double update_s = 0;       // the optimizer on the step's rows and the dense weights
  double update_rows = 0;    // the rows update_s covered: the step's unique ids
  double record_s = 0;       // summing one received (id, row) record
  // A sharded table's compute (model.embedding_sharding: rows): the batch's ids deduplicated,
  // their rows gathered into one block as a fetch leaves them, forward and backward reading
  // that block. 0 (a file written before it was measured): compute_s and a hash of each id.
  double fetched_compute_s = 0;
  // (samples, unique ids among them), samples ascending: measured from the job's data.
  std::vector<std::pair<double, double>> unique;
  // U(samples): interpolated in log-log between measured points, extended beyond the last
  // along the last two's slope, never above the table's rows or the samples' ids.
  double unique_among(double samples) const;
};

nlohmann::json ctr_profile_to_json(const CtrProfile& profile);
// InputError naming the file and key for anything `ctr_profile_to_json` could not have written.
CtrProfile read_ctr_profile(const std::string& path);

}  // namespace sdp::plan
