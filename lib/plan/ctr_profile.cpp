#include "plan/ctr_profile.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "plan/plan_inputs.hpp"

namespace sdp::plan {

namespace {
constexpr const char* kKind = "sdp-train CTR step profile";
}

double CtrProfile::unique_among(double m) const {
  const double most = std::min(static_cast<double>(table_rows), m * std::max(1, fields));
  if (unique.empty() || m <= 0) return std::max(0.0, std::min(most, m));
  if (unique.size() == 1 || m <= unique.front().first)
    return std::min(most, unique.front().second * m / unique.front().first);
  // log-log between the points around m (beyond the last: along the last two's slope)
  size_t i = 1;
  while (i + 1 < unique.size() && unique[i].first < m) ++i;
  const auto [m0, u0] = unique[i - 1];
  const auto [m1, u1] = unique[i];
  const double slope = std::log(u1 / u0) / std::log(m1 / m0);
  return std::min(most, u0 * std::pow(m / m0, slope));
}

nlohmann::json ctr_profile_to_json(const CtrProfile& p) {
  nlohmann::json unique = nlohmann::json::array();
  for (const auto& [m, u] : p.unique) unique.push_back({m, u});
  return {{"version", kPlanFileVersion},
          {"kind", kKind},
          {"model", p.model},
          {"measured_on", p.measured_on},
          {"batch_per_rank", p.batch_per_rank},
          {"table_rows", p.table_rows},
          {"fields", p.fields},
          {"width", p.width},
          {"dense_floats", p.dense_floats},
          {"samples", p.samples},
          {"data_s", p.data_s},
          {"compute_s", p.compute_s},
          {"update_s", p.update_s},
          {"update_rows", p.update_rows},
          {"record_s", p.record_s},
          {"fetched_compute_s", p.fetched_compute_s},
          {"unique", unique}};
}

CtrProfile read_ctr_profile(const std::string& path) {
  const nlohmann::json doc = read_plan_file(path, "compute file", kKind);
  CtrProfile p;
  p.model = file_field<std::string>(doc, "model", path);
  p.measured_on = file_field<std::string>(doc, "measured_on", path);
  p.batch_per_rank = file_field<int64_t>(doc, "batch_per_rank", path);
  p.table_rows = file_field<int64_t>(doc, "table_rows", path);
  p.fields = file_field<int>(doc, "fields", path);
  p.width = file_field<int>(doc, "width", path);
  p.dense_floats = file_field<int64_t>(doc, "dense_floats", path);
  p.samples = file_field<int64_t>(doc, "samples", path);
  // Sizes a job could have (2^40 rows, 2^20 fields or floats a row), times a step could take.
  constexpr int64_t kMaxRows = int64_t{1} << 40, kMaxWidth = 1 << 20;
  const auto bad = [&](const std::string& key, const std::string& why) {
    return InputError(path + ": key '" + key + "' " + why + ": not a CTR profile sdp-train wrote");
  };
  if (p.batch_per_rank < 1 || p.batch_per_rank > kMaxRows) throw bad("batch_per_rank", "is below 1 or above 2^40");
  if (p.table_rows < 1 || p.table_rows > kMaxRows) throw bad("table_rows", "is below 1 or above 2^40");
  if (p.fields < 1 || p.fields > kMaxWidth) throw bad("fields", "is below 1 or above 2^20");
  if (p.width < 1 || p.width > kMaxWidth) throw bad("width", "is below 1 or above 2^20");
  if (p.dense_floats < 0 || p.dense_floats > kMaxRows) throw bad("dense_floats", "is negative or above 2^40");
  if (p.samples < p.batch_per_rank || p.samples > kMaxRows) throw bad("samples", "is below one batch or above 2^40");
  const auto time = [&](const char* key, double* to) {
    *to = file_field<double>(doc, key, path);
    if (!std::isfinite(*to) || *to < 0 || *to >= 1e6) throw bad(key, "is not a time in [0, 1e6) s");
  };
  time("data_s", &p.data_s);
  time("compute_s", &p.compute_s);
  time("update_s", &p.update_s);
  time("record_s", &p.record_s);
  if (doc.contains("fetched_compute_s")) time("fetched_compute_s", &p.fetched_compute_s);
  if (p.compute_s <= 0) throw bad("compute_s", "is 0");
  p.update_rows = file_field<double>(doc, "update_rows", path);
  if (!std::isfinite(p.update_rows) || p.update_rows < 0 || p.update_rows > static_cast<double>(p.table_rows))
    throw bad("update_rows", "is negative or above table_rows");
  const nlohmann::json unique = file_field<nlohmann::json>(doc, "unique", path);
  if (!unique.is_array() || unique.empty()) throw bad("unique", "is not a non-empty list");
  for (size_t i = 0; i < unique.size(); ++i) {
    const std::string key = "unique[" + std::to_string(i) + "]";
    if (!unique[i].is_array() || unique[i].size() != 2 || !unique[i][0].is_number() || !unique[i][1].is_number())
      throw bad(key, "is not a pair [samples, unique ids]");
    const double m = unique[i][0].get<double>(), u = unique[i][1].get<double>();
    // The curve is interpolated in log-log: samples ascending, ids at least 1 and never fewer
    // among more samples, never more than the samples' ids.
    if (!std::isfinite(m) || !std::isfinite(u) || m < 1 || m > static_cast<double>(p.samples) || u < 1 ||
        u > m * p.fields || (!p.unique.empty() && (m <= p.unique.back().first || u < p.unique.back().second)))
      throw bad(key, "is not a count of unique ids among samples, ascending, within the set");
    p.unique.emplace_back(m, u);
  }
  return p;
}

}  // namespace sdp::plan
