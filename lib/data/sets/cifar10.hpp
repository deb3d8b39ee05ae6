// CIFAR-10 binary batches, raw or gzip-compressed: records of 3073 bytes (a label byte
// 0-9, then the 32x32 red, green and blue planes), no header. A file whose size is not
// a multiple of 3073, an empty file, a label byte > 9 or bad gzip throws InputError
// naming the file.
#pragma once

#include <string>
#include <vector>

#include "data/sets/dataset.hpp"
#include "data/sets/split.hpp"

namespace sdp {

constexpr int kCifarRecordBytes = 1 + 3 * 32 * 32;

// Concatenates the records of `paths` in order into a 3x32x32, 10-class Dataset.
Dataset load_cifar10_files(const std::vector<std::string>& paths,
                           const std::string& name = "cifar10");

// Standard names in `dir` (each with or without ".gz"). If test_batch.bin exists:
// train = data_batch_1..5, test = test_batch. Otherwise (the shared copy lacks it):
// train = data_batch_1..4, test = data_batch_5.
Dataset load_cifar10(const std::string& dir, Split split);

}  // namespace sdp
