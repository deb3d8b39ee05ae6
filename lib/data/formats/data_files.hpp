// The data files of a path, as every reader of sharded data sets lists them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sdp {

// `path` itself when it is a file; a directory's regular files sorted by name (every rank and
// every run sees one order), hidden files and `.idx` index files left out. Throws InputError
// naming `who` and the path when it does not exist or holds no data file.
std::vector<std::string> list_data_files(const std::string& path, const std::string& who);

// Index files beside data files (<file>.idx: TFRecord offsets, stream shard sample counts).
// The text of `index_path` when it is a regular file of at most `max_bytes` bytes modified
// after `data_path` (equal times count as stale: file times are coarse, so the data may have
// been rewritten just after the index); nullopt otherwise, and the caller rescans.
std::optional<std::string> read_fresh_index(const std::string& data_path, const std::string& index_path,
                                            uint64_t max_bytes);
// Writes `text` to `path` through a hidden .<name>.tmp.<pid> beside it, renamed over it, so that
// readers, and ranks writing the same index at once, see either the old file or the whole new
// one, and ranks listing the directory never see the temporary file.
// Throws RuntimeError when it cannot (a read-only data directory).
void write_file_atomically(const std::string& path, const std::string& text);

bool data_file_exists(const std::string& path);
// The first of `names` (joined to `dir`) that exists; throws InputError listing every
// path it looked for when none does.
std::string find_first_file(const std::string& dir, const std::vector<std::string>& names,
                            const std::string& what);

}  // namespace sdp
