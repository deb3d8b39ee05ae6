// JPEG encoding through TurboJPEG, for `sdp-train data convert` (data sets with real JPEGs to
// test and benchmark the decoding path, made from MNIST or CIFAR-10 without downloads).
#pragma once

#include <cstdint>
#include <vector>

namespace sdp {

// A JPEG of `pixels` (width x height, `channels` = 1 gray or 3 RGB bytes per pixel,
// interleaved), at `quality` 1-100. Colour: chroma at half resolution both ways (4:2:0, what
// cameras and ImageNet's files use), or at full resolution (`full_chroma`: 4:4:4, for tiny
// images such as CIFAR's, where halving the colour detail costs accuracy). Throws RuntimeError
// with TurboJPEG's message.
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int channels, int quality,
                                 bool full_chroma = false);

}  // namespace sdp
