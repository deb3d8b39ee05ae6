// The data files of a path, as every reader of sharded data sets lists them.
#pragma once

#include <string>
#include <vector>

namespace sdp {

// `path` itself when it is a file; a directory's regular files sorted by name (every rank and
// every run sees one order), hidden files and `.idx` index files left out. Throws InputError
// naming `who` and the path when it does not exist or holds no data file.
std::vector<std::string> list_data_files(const std::string& path, const std::string& who);

}  // namespace sdp
