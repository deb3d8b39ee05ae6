#include "ctr/ctr_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ctr/counter_random.hpp"
#include "ctr/ctr_metrics.hpp"

namespace sdp {

namespace {

using ctr_random::uniform01;

uint64_t key(uint64_t a, uint64_t b, uint64_t c = 0) { return ctr_random::chain(a, b, c); }
double normal(uint64_t k) {
  const double u1 = uniform01(key(k, 1)), u2 = uniform01(key(k, 2));
  return std::sqrt(-2.0 * std::log(u1 + 1e-300)) * std::cos(6.283185307179586 * u2);
}

// Near-normal (the sum of four uniforms, Irwin-Hall, scaled to unit variance) from one key:
// the planted model evaluates F * 5 of these per sample.
double cheap_normal(uint64_t k, uint64_t i) {
  const uint64_t a = mix64(k + 2 * i), b = mix64(k + 2 * i + 1);
  const double sum = static_cast<double>(a & 0xffffffffULL) + static_cast<double>(a >> 32) +
                     static_cast<double>(b & 0xffffffffULL) + static_cast<double>(b >> 32);
  return (sum * 0x1.0p-32 - 2.0) * 1.7320508075688772;
}

constexpr int kPlantedK = 4;
constexpr int kPlantedHidden = 16;

// A Zipf(s) rank in [0, n) by inverting the continuous approximation of its CDF: cheap and
// heavy-tailed like real categorical ids (a few ids take most occurrences).
int64_t zipf_rank(double u, int64_t n, double s) {
  if (n <= 1) return 0;
  double r;
  if (std::fabs(s - 1.0) < 1e-9) {
    r = std::exp(u * std::log(static_cast<double>(n) + 1.0)) - 1.0;
  } else {
    const double a = 1.0 - s;
    r = std::pow(u * (std::pow(static_cast<double>(n) + 1.0, a) - 1.0) + 1.0, 1.0 / a) - 1.0;
  }
  return std::min<int64_t>(n - 1, std::max<int64_t>(0, static_cast<int64_t>(r)));
}

}  // namespace

void CtrRecordsSource::fill(const int64_t* indices, int64_t n, int64_t* ids, float* values, float* labels) const {
  const int f = records_.fields;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = indices[i];
    std::memcpy(ids + i * f, records_.ids.data() + s * f, sizeof(int64_t) * f);
    std::memcpy(values + i * f, records_.values.data() + s * f, sizeof(float) * f);
    labels[i] = records_.labels[s];
  }
}

PlantedCtrSource::PlantedCtrSource(const PlantedCtrOptions& options) : options_(options) {
  const uint64_t seed = options_.seed ^ 0x706c616e74ULL;
  const size_t inputs = static_cast<size_t>(options_.fields) * kPlantedK;
  hidden_.resize(kPlantedHidden * inputs);
  for (size_t i = 0; i < hidden_.size(); ++i) hidden_[i] = normal(key(seed, 100, i)) / std::sqrt(double(inputs));
  output_.resize(kPlantedHidden);
  for (size_t h = 0; h < output_.size(); ++h) output_[h] = normal(key(seed, 200, h));
}

double PlantedCtrSource::probability(int64_t, const int64_t* ids) const {
  // The planted parameters of an id come from its hash: no table in memory.
  const uint64_t seed = options_.seed ^ 0x706c616e74ULL;
  const int f = options_.fields;
  double logit = -1.2;  // about a quarter of clicks, as in CTR data
  double sums[kPlantedK] = {0, 0, 0, 0}, squares = 0;
  std::vector<double> v(static_cast<size_t>(f) * kPlantedK);
  for (int i = 0; i < f; ++i) {
    const uint64_t id_key = key(seed, static_cast<uint64_t>(ids[i]));
    logit += 0.5 * cheap_normal(id_key, 0);
    for (int k = 0; k < kPlantedK; ++k) {
      const double e = 0.35 * cheap_normal(id_key, 1 + k);
      v[static_cast<size_t>(i) * kPlantedK + k] = e;
      sums[k] += e;
      squares += e * e;
    }
  }
  for (double s : sums) logit += 0.5 * s * s;
  logit -= 0.5 * squares;
  // One hidden ReLU layer over the concatenated embeddings.
  double deep = 0;
  for (int h = 0; h < kPlantedHidden; ++h) {
    double z = 0;
    const double* w = hidden_.data() + static_cast<size_t>(h) * v.size();
    for (size_t j = 0; j < v.size(); ++j) z += v[j] * w[j];
    deep += std::max(0.0, z) * output_[static_cast<size_t>(h)];
  }
  logit += deep;
  return 1.0 / (1.0 + std::exp(-logit));
}

void PlantedCtrSource::fill(const int64_t* indices, int64_t n, int64_t* ids, float* values, float* labels) const {
  const int f = options_.fields;
  const uint64_t stream = options_.seed * 2 + options_.split;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t sample = static_cast<uint64_t>(indices[i]);
    int64_t* row = ids + i * f;
    for (int j = 0; j < f; ++j) {
      const int64_t begin = options_.rows * j / f, end = options_.rows * (j + 1) / f;
      // Zipf ranks scattered over the field's rows, so popular ids are not all adjacent.
      const int64_t rank = zipf_rank(uniform01(key(stream, sample, j)), end - begin, options_.zipf);
      row[j] = begin + static_cast<int64_t>(mix64(rank ^ (static_cast<uint64_t>(j) << 40)) %
                                            static_cast<uint64_t>(end - begin));
      values[i * f + j] = 1.0f;
    }
    const double p = probability(indices[i], row);
    labels[i] = uniform01(key(stream ^ 0x6c6162656cULL, sample)) < p ? 1.0f : 0.0f;
  }
}

double PlantedCtrSource::planted_auc() const {
  const int64_t n = options_.samples;
  const int f = options_.fields;
  std::vector<float> scores(static_cast<size_t>(n)), labels(static_cast<size_t>(n));
  std::vector<int64_t> ids(static_cast<size_t>(f));
  std::vector<float> values(static_cast<size_t>(f));
#pragma omp parallel for schedule(static) firstprivate(ids, values)
  for (int64_t i = 0; i < n; ++i) {
    fill(&i, 1, ids.data(), values.data(), &labels[static_cast<size_t>(i)]);
    scores[static_cast<size_t>(i)] = static_cast<float>(probability(i, ids.data()));
  }
  return binary_auc(scores.data(), labels.data(), n);
}

}  // namespace sdp
