#include "data/sets/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.hpp"
#include "data/loading/random.hpp"

namespace sdp {

namespace {

// One image of gray-level cells per class and channel, uniform in [32, 224); they depend on
// the seed only, so both splits see the same classes.
std::vector<float> class_templates(const SyntheticSpec& spec, int64_t sample) {
  std::vector<float> templates(spec.num_classes * sample);
  std::mt19937_64 trng(mix_keys(spec.seed, random_stream::kSyntheticClasses));
  const int gh = (spec.height + spec.cell - 1) / spec.cell;
  const int gw = (spec.width + spec.cell - 1) / spec.cell;
  std::vector<float> grid(gh * gw);
  for (int k = 0; k < spec.num_classes; ++k) {
    for (int c = 0; c < spec.channels; ++c) {
      for (float& g : grid) g = static_cast<float>(32 + 192 * uniform01(trng));
      float* t = templates.data() + k * sample + int64_t{c} * spec.height * spec.width;
      for (int y = 0; y < spec.height; ++y)
        for (int x = 0; x < spec.width; ++x) t[y * spec.width + x] = grid[(y / spec.cell) * gw + x / spec.cell];
    }
  }
  return templates;
}

// Per-channel mean and std from the templates and the noise model, not from the pixels, so
// the train and test splits normalize identically (clipping is ignored: close enough).
Normalization template_statistics(const SyntheticSpec& spec, const std::vector<float>& templates, int64_t sample,
                                  double noise_std) {
  Normalization n;
  const int64_t plane = int64_t{spec.height} * spec.width;
  for (int c = 0; c < spec.channels; ++c) {
    double sum = 0, sum_sq = 0, count = 0;
    for (int k = 0; k < spec.num_classes; ++k) {
      const float* t = templates.data() + k * sample + c * plane;
      for (int64_t p = 0; p < plane; ++p, ++count) {
        sum += t[p];
        sum_sq += double{t[p]} * t[p];
      }
    }
    const double mean = sum / count;
    const double var = sum_sq / count - mean * mean + noise_std * noise_std;
    n.mean.push_back(static_cast<float>(mean / 255.0));
    n.std.push_back(static_cast<float>(std::sqrt(var) / 255.0));
  }
  return n;
}

}  // namespace

Dataset make_synthetic(const SyntheticSpec& spec, Split split) {
  if (spec.count < 1 || spec.channels < 1 || spec.height < 1 || spec.width < 1 ||
      spec.num_classes < 2 || spec.cell < 1 || !(spec.noise >= 0))
    throw InputError(
        "synthetic data: count, channels, height, width and cell must be >= 1, "
        "num_classes >= 2 and noise >= 0");
  Dataset ds;
  ds.name = std::string("synthetic/") + split_name(split);
  ds.count = spec.count;
  ds.channels = spec.channels;
  ds.height = spec.height;
  ds.width = spec.width;
  ds.num_classes = spec.num_classes;
  const int64_t sample = ds.sample_bytes();
  // Template gray levels are uniform in [32, 224): std 192 / sqrt(12).
  const double noise_std = spec.noise * 192.0 / std::sqrt(12.0);
  const std::vector<float> templates = class_templates(spec, sample);

  std::mt19937_64 rng(
      mix_keys(spec.seed, split == Split::kTrain ? random_stream::kSyntheticTrain : random_stream::kSyntheticTest));
  ds.images.resize(spec.count * sample);
  ds.labels.resize(spec.count);
  for (int64_t i = 0; i < spec.count; ++i) {
    // Uniform labels: classes roughly balanced, already in random order.
    int32_t label = static_cast<int32_t>(uniform_below(rng, spec.num_classes));
    ds.labels[i] = label;
    const float* t = templates.data() + label * sample;
    uint8_t* img = ds.images.data() + i * sample;
    for (int64_t p = 0; p < sample; ++p) {
      double v = t[p] + noise_std * standard_normal(rng);
      img[p] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
    }
  }
  ds.normalization = template_statistics(spec, templates, sample, noise_std);
  return ds;
}

}  // namespace sdp
