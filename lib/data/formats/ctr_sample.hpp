// CtrSample: one CTR sample as its LibSVM line or tf.train.Example holds it (the pairs as
// written: no padding, ids not yet checked against the table), and the one step that turns it
// into a row of CtrRecords under CtrReadOptions (fields, table_rows, id_overflow). The LibSVM
// and TFRecord readers and `data inspect` share it, so a sample is judged the same way
// whatever file it came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/formats/ctr_records.hpp"

namespace sdp {

struct CtrSample {
  float label = 0;            // 0 or 1 (a file's -1 already mapped to 0)
  std::vector<int64_t> ids;   // as written, any sign
  std::vector<float> values;  // ids.size()
};

// How an error names a pair: "field 2 (the 3rd pair)" for a LibSVM line, "field 2 (ids[2])"
// for an Example.
enum class CtrSampleSource { kLibsvmLine, kExample };

// Checks `options` against `out` and sets out.fields = options.fields: std::logic_error when
// options.fields or options.table_rows is not positive, or out.fields is set and differs. The
// readers call it first, so even an empty file leaves out.fields set.
void start_ctr_records(const CtrReadOptions& options, CtrRecords& out);

// Throws InputError (as append_ctr_sample words it) for a negative id or a value that is not
// finite: what is wrong with a sample whatever the model. For tools that read samples without
// a table (`data inspect`).
void check_ctr_sample(const CtrSample& sample, CtrSampleSource source);

// Appends `sample` to `out` as one row of options.fields pairs: padded with (id 0, value 0)
// when shorter, ids at or above options.table_rows hashed under IdOverflow::kHash. Checks and
// sets out.fields as start_ctr_records does. Updates stats.samples, padded,
// hashed_ids, max_id. Throws InputError, without the file and line (the caller adds them),
// for more pairs than fields, an id out of range under IdOverflow::kError, or what
// check_ctr_sample rejects; then neither `out` nor `stats` has changed.
void append_ctr_sample(const CtrSample& sample, const CtrReadOptions& options,
                       CtrSampleSource source, CtrRecords& out, CtrReadStats& stats);

// A bad line or record met while reading: with options.skip_bad it is counted in stats
// (skipped, and first_skipped keeps the first message); otherwise InputError(message).
void skip_or_throw(const std::string& message, const CtrReadOptions& options, CtrReadStats& stats);

// "1st", "2nd", "3rd", "4th", ..., "11th", "21st": for messages that count pairs from 1.
std::string ordinal(int64_t n);

}  // namespace sdp
