// MNIST in its IDX distribution format, raw or gzip-compressed: big-endian u32 header
// words (magic 0x00000803 for images with count, rows, cols; 0x00000801 for labels with
// count), then one byte per pixel / label. Every defect (wrong magic, bad dimensions,
// truncation, trailing bytes, image/label count mismatch, label > 9, bad gzip) throws
// InputError naming the file.
#pragma once

#include <string>

#include "data/sets/dataset.hpp"
#include "data/sets/split.hpp"

namespace sdp {

// Reads one image file and one label file into a 1-channel, 10-class Dataset.
Dataset load_mnist_files(const std::string& images_path, const std::string& labels_path,
                         const std::string& name = "mnist");

// Finds the standard file names in `dir`: {train,t10k}-{images-idx3,labels-idx1}-ubyte,
// with or without ".gz" (the "images.idx3" spelling of some mirrors is accepted too).
Dataset load_mnist(const std::string& dir, Split split);

}  // namespace sdp
