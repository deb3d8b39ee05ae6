// Which rows of a CTR model's table a rank holds (model.embedding_sharding): under rows, rank
// `index` of `count` holds the ids with id % count == index, the id's row at local row
// id / count. The modulo deals Zipf-skewed ids evenly: the hot ids are small numbers only after
// a frequency-ordered remap, and then consecutive hot ids land on consecutive ranks (a range
// split would put them all on rank 0). replicated is the shard 0 of 1: every row, row = id.
#pragma once

#include <cstdint>
#include <numeric>

namespace sdp {

struct TableShard {
  int index = 0;
  int count = 1;

  // Rows this shard holds of a table of `table_rows`.
  int64_t rows(int64_t table_rows) const {
    return table_rows > index ? (table_rows - index + count - 1) / count : 0;
  }
  int owner(int64_t id) const { return static_cast<int>(id % count); }
  int64_t local_row(int64_t id) const { return id / count; }
  int64_t global_id(int64_t local_row) const { return index + local_row * count; }
  bool whole() const { return count == 1; }
  // Whether some id is in both shards (of any counts): reading another world size's parts,
  // a rank skips those that hold none of its ids.
  bool shares_ids_with(TableShard other) const {
    const int common = std::gcd(count, other.count);
    return ((other.index - index) % common + common) % common == 0;
  }
};

}  // namespace sdp
