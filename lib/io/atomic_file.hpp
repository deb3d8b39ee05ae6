// Writing a file so that a crash never leaves a partial file under its name: write to a
// temporary file in the same directory, fsync it, rename it over the target, fsync the
// directory (the rename itself must reach the disk).
#pragma once

#include <functional>
#include <string>

namespace sdp {

// `write` receives the open temporary file. Parent directories are created. Throws
// RuntimeError naming the path and the system error.
void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& write);

// fwrite that throws RuntimeError naming `path` on a short write (disk full, ...).
void write_all(std::FILE* file, const void* data, std::size_t bytes, const std::string& path);

}  // namespace sdp
