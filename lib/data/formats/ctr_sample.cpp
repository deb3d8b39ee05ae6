#include "data/formats/ctr_sample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/error.hpp"
#include "data/formats/printable.hpp"

namespace sdp {

namespace {

std::string field_name(CtrSampleSource source, int64_t field) {
  const std::string n = std::to_string(field);
  if (source == CtrSampleSource::kLibsvmLine)
    return "field " + n + " (the " + ordinal(field + 1) + " pair)";
  return "field " + n + " (ids[" + n + "])";
}

[[noreturn]] void bad_pair(CtrSampleSource source, int64_t field, const std::string& what) {
  throw InputError(field_name(source, field) + ": " + what);
}

std::string float_text(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
  return text;
}

}  // namespace

void start_ctr_records(const CtrReadOptions& options, CtrRecords& out) {
  if (options.fields <= 0 || options.table_rows <= 0)
    throw std::logic_error("CtrReadOptions: fields (" + std::to_string(options.fields) +
                           ") and table_rows (" + std::to_string(options.table_rows) +
                           ") must be positive");
  if (out.fields != 0 && out.fields != options.fields)
    throw std::logic_error("CtrRecords: the records have " + std::to_string(out.fields) +
                           " fields, the options say " + std::to_string(options.fields));
  out.fields = options.fields;
}

std::string ordinal(int64_t n) {
  const int64_t tens = n % 100;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    switch (n % 10) {
      case 1:
        suffix = "st";
        break;
      case 2:
        suffix = "nd";
        break;
      case 3:
        suffix = "rd";
        break;
      default:
        break;
    }
  }
  return std::to_string(n) + suffix;
}

void check_ctr_sample(const CtrSample& sample, CtrSampleSource source) {
  if (sample.values.size() != sample.ids.size())
    throw std::logic_error("check_ctr_sample: " + std::to_string(sample.ids.size()) + " ids but " +
                           std::to_string(sample.values.size()) + " values");
  for (std::size_t k = 0; k < sample.ids.size(); ++k) {
    const int64_t id = sample.ids[k];
    if (id < 0)
      bad_pair(
          source, static_cast<int64_t>(k),
          "id " + std::to_string(id) + " is negative; ids are rows of the embedding table, from 0");
    if (!std::isfinite(sample.values[k]))
      bad_pair(source, static_cast<int64_t>(k),
               "value " + float_text(sample.values[k]) + " of id " + std::to_string(id) +
                   " is not finite; expected a finite number");
  }
}

void append_ctr_sample(const CtrSample& sample, const CtrReadOptions& options,
                       CtrSampleSource source, CtrRecords& out, CtrReadStats& stats) {
  start_ctr_records(options, out);
  const auto pairs = static_cast<int64_t>(sample.ids.size());
  if (pairs > options.fields) {
    const std::string count = std::to_string(pairs);
    const std::string holds = source == CtrSampleSource::kLibsvmLine
                                  ? "the line has " + count + " pairs"
                                  : printable(options.ids_key, 64) + " holds " + count + " ids";
    bad_pair(source, options.fields,
             holds + ", more than model.fields = " + std::to_string(options.fields) +
                 "; set model.fields to at least " + count + " (the longest row of the data)");
  }
  // Every pair is checked before anything is written, so a bad sample leaves no trace.
  check_ctr_sample(sample, source);
  int64_t hashed = 0, max_id = stats.max_id;
  for (int64_t k = 0; k < pairs; ++k) {
    const int64_t id = sample.ids[static_cast<size_t>(k)];
    max_id = std::max(max_id, id);
    if (id < options.table_rows) continue;
    if (options.id_overflow == IdOverflow::kError)
      bad_pair(source, k,
               "id " + std::to_string(id) +
                   " is not below model.table_rows = " + std::to_string(options.table_rows) +
                   " (the embedding table's rows); raise model.table_rows above " +
                   std::to_string(id) +
                   ", or set data.id_overflow: hash to map larger ids into the table");
    ++hashed;
  }

  const size_t base = out.ids.size();
  out.ids.resize(base + static_cast<size_t>(options.fields), 0);  // the padding: id 0, value 0
  out.values.resize(base + static_cast<size_t>(options.fields), 0.0f);
  for (int64_t k = 0; k < pairs; ++k) {
    const int64_t id = sample.ids[static_cast<size_t>(k)];
    out.ids[base + static_cast<size_t>(k)] =
        id < options.table_rows ? id : hash_id_into(id, options.table_rows);
    out.values[base + static_cast<size_t>(k)] = sample.values[static_cast<size_t>(k)];
  }
  out.labels.push_back(sample.label);

  ++stats.samples;
  if (pairs < options.fields) ++stats.padded;
  stats.hashed_ids += hashed;
  stats.max_id = max_id;
}

void skip_or_throw(const std::string& message, const CtrReadOptions& options, CtrReadStats& stats) {
  if (!options.skip_bad) throw InputError(message);
  if (stats.skipped == 0) stats.first_skipped = message;
  ++stats.skipped;
}

}  // namespace sdp
