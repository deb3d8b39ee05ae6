#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/floating_point.hpp"
#include "data/loading/batch_assembler.hpp"
#include "data/loading/data_loader.hpp"
#include "data/loading/prefetcher.hpp"
#include "data/sets/synthetic.hpp"

namespace sdp {
namespace {

Dataset small_synthetic(int64_t n = 250, int channels = 3, int size = 8) {
  SyntheticSpec spec;
  spec.count = n;
  spec.channels = channels;
  spec.height = spec.width = size;
  spec.seed = 3;
  return make_synthetic(spec, Split::kTrain);
}

bool same_batch(const Batch& a, const Batch& b) {
  return a.labels == b.labels && a.indices == b.indices && a.images.shape() == b.images.shape() &&
         std::memcmp(a.images.raw(), b.images.raw(), a.images.nbytes()) == 0;
}

// Copies what the loader hands out (its buffers are reused).
Batch clone(const Batch& b) {
  Batch c = b;
  c.storage = Tensor(b.images.shape());
  c.storage.copy_from(b.images);
  c.images = c.storage;
  return c;
}

std::vector<Batch> drain(TrainLoader& loader) {
  std::vector<Batch> out;
  while (const Batch* b = loader.next()) out.push_back(clone(*b));
  return out;
}

TEST(TrainLoader, PrefetchedEqualsSynchronousAndDirectAssembly) {
  Dataset ds = small_synthetic();
  LoaderOptions opt;
  opt.batch_size = 16;
  opt.seed = 9;
  opt.rank = 1;
  opt.world = 2;
  opt.augment.enabled = true;
  opt.prefetch = 3;
  IndexedTrainLoader async(ds, opt);
  opt.prefetch = 0;
  IndexedTrainLoader sync(ds, opt);
  for (int64_t epoch : {0, 1}) {
    async.start_epoch(epoch);
    sync.start_epoch(epoch);
    auto a = drain(async), s = drain(sync);
    ASSERT_EQ(a.size(), 7u);  // floor(250 / 32)
    ASSERT_EQ(s.size(), a.size());
    AugmentOptions aug = opt.augment;
    aug.seed = opt.seed;
    BatchAssembler assembler(ds, aug);
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(same_batch(a[i], s[i])) << "epoch " << epoch << " batch " << i;
      Batch direct;
      assembler.assemble(async.sampler().batch_indices(epoch, i), epoch, direct);
      EXPECT_TRUE(same_batch(a[i], direct)) << "epoch " << epoch << " batch " << i;
      EXPECT_EQ(a[i].step, static_cast<int64_t>(i));
      EXPECT_EQ(a[i].cursor, (SampleCursor{epoch, static_cast<int64_t>(i) * 32}));
    }
    EXPECT_EQ(a.back().next_cursor, (SampleCursor{epoch + 1, 0}));
  }
}

// The batches a GPU model reads come from page-locked memory (where the driver grants it):
// the same values as pageable batches.
TEST(TrainLoader, PinnedBatchesHoldTheSameValues) {
  Dataset ds = small_synthetic();
  LoaderOptions opt;
  opt.batch_size = 16;
  opt.augment.enabled = true;
  IndexedTrainLoader pageable(ds, opt);
  opt.pinned = true;
  IndexedTrainLoader pinned(ds, opt);
  pageable.start_epoch(0);
  pinned.start_epoch(0);
  int batches = 0;
  while (const Batch* p = pinned.next()) {
    EXPECT_TRUE(p->pinned);
    const Batch* q = pageable.next();
    ASSERT_NE(q, nullptr);
    EXPECT_FALSE(q->pinned);
    EXPECT_TRUE(same_batch(*p, *q)) << "batch " << batches;
    ++batches;
  }
  EXPECT_EQ(batches, 15);  // floor(250 / 16)
  EXPECT_EQ(pageable.next(), nullptr);
}

TEST(TrainLoader, StartAtACursorContinuesTheEpoch) {
  Dataset ds = small_synthetic();
  LoaderOptions opt;
  opt.batch_size = 10;
  IndexedTrainLoader loader(ds, opt);
  loader.start_epoch(2);
  auto full = drain(loader);
  loader.start(full[3].next_cursor);  // as if resumed from a checkpoint after step 3
  auto rest = drain(loader);
  ASSERT_EQ(rest.size(), full.size() - 4);
  for (std::size_t i = 0; i < rest.size(); ++i) EXPECT_TRUE(same_batch(rest[i], full[i + 4]));
  loader.start(SampleCursor{2, 0}, /*max_steps=*/2);
  EXPECT_EQ(drain(loader).size(), 2u);
}

TEST(TrainLoader, MicroBatchesOfAStepShareItsCursors) {
  // 2 ranks x 3 micro-batches of 10: 4 steps of 60 samples (250 - 240 dropped), 12 batches.
  Dataset ds = small_synthetic();
  LoaderOptions opt;
  opt.batch_size = 10;
  opt.rank = 1;
  opt.world = 2;
  opt.accumulate = 3;
  IndexedTrainLoader loader(ds, opt);
  EXPECT_EQ(loader.steps_per_epoch(), 4);
  loader.start_epoch(1);
  auto batches = drain(loader);
  ASSERT_EQ(batches.size(), 12u);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const int64_t step = static_cast<int64_t>(i) / 3;
    EXPECT_EQ(batches[i].step, step);
    EXPECT_EQ(batches[i].micro, static_cast<int>(i % 3));
    EXPECT_EQ(batches[i].cursor, (SampleCursor{1, step * 60}));
    std::vector<int64_t> want;
    loader.sampler().batch_indices(batches[i].cursor, batches[i].micro, want);
    EXPECT_EQ(batches[i].indices, want);
  }
  EXPECT_EQ(batches.back().next_cursor, (SampleCursor{2, 0}));
  // Resumed after step 1; max_steps counts steps, not micro-batches.
  loader.start(batches[3].next_cursor, /*max_steps=*/1);
  auto rest = drain(loader);
  ASSERT_EQ(rest.size(), 3u);
  for (std::size_t i = 0; i < rest.size(); ++i) EXPECT_TRUE(same_batch(rest[i], batches[i + 6]));
}

TEST(TrainLoader, DestroyedMidEpochWithoutHanging) {
  Dataset ds = small_synthetic(2000, 3, 32);
  LoaderOptions opt;
  opt.batch_size = 8;
  opt.prefetch = 4;
  for (int i = 0; i < 20; ++i) {
    IndexedTrainLoader loader(ds, opt);
    loader.start_epoch(i);
    if (i % 2) ASSERT_NE(loader.next(), nullptr);
    // Restarting mid-epoch is also clean.
    if (i % 3 == 0) loader.start_epoch(i + 1);
  }
}

TEST(Prefetcher, PropagatesProducerExceptionsAfterEarlierBatches) {
  for (int depth : {0, 1, 3}) {
    Prefetcher prefetcher(depth);
    int made = 0;
    prefetcher.start([&made](Batch& b) {
      if (made == 2) throw std::runtime_error("decode failed at batch 2");
      b.step = made++;
      return true;
    });
    ASSERT_NE(prefetcher.next(), nullptr);
    const Batch* second = prefetcher.next();
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(second->step, 1);
    try {
      prefetcher.next();
      ADD_FAILURE() << "expected the producer's exception (depth " << depth << ")";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "decode failed at batch 2");
    }
  }
}

TEST(Prefetcher, StaysBoundedAndStopsASlowProducer) {
  std::atomic<int> made{0};
  {
    Prefetcher prefetcher(2);
    prefetcher.start([&made](Batch& b) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      b.step = made++;
      return true;  // endless stream
    });
    EXPECT_EQ(prefetcher.next()->step, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // One held by us + at most `depth` ready.
    EXPECT_LE(made.load(), 3);
  }  // the destructor stops the endless producer
  EXPECT_LE(made.load(), 4);
}

// The loader's worker decodes and normalises: it computes in the job's floating-point mode
// (numerics.flush_denormals), a subnormal input flushed to 0 with the flag on, kept with it off.
TEST(Prefetcher, WorkerComputesInTheJobsFloatingPointMode) {
  for (bool flush : {true, false}) {
    set_flush_denormals(flush);
    Prefetcher prefetcher(1);
    float result = -1.0f;
    prefetcher.start([&result](Batch& b) {
      volatile float tiny = 1e-39f, one = 1.0f;
      result = tiny * one;
      b.step = 0;
      return false;
    });
    EXPECT_EQ(prefetcher.next(), nullptr);
    EXPECT_EQ(result, flush ? 0.0f : 1e-39f) << "flush_denormals " << flush;
  }
  set_flush_denormals(true);
}

TEST(EvalLoader, EverySampleOnceWithThePartialLastBatch) {
  Dataset ds = small_synthetic(103);
  IndexedEvalLoader single(ds, 25);
  EXPECT_EQ(single.num_batches(), 5);
  single.start();
  std::vector<int64_t> sizes, seen;
  while (const Batch* b = single.next()) {
    sizes.push_back(b->size());
    seen.insert(seen.end(), b->indices.begin(), b->indices.end());
    for (int64_t i = 0; i < b->size(); ++i) EXPECT_EQ(b->labels[i], ds.labels[b->indices[i]]);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{25, 25, 25, 25, 3}));
  for (int64_t i = 0; i < 103; ++i) EXPECT_EQ(seen[i], i);

  std::multiset<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    IndexedEvalLoader shard(ds, 10, r, 4, 1);
    shard.start();
    while (const Batch* b = shard.next()) all.insert(b->indices.begin(), b->indices.end());
  }
  ASSERT_EQ(all.size(), 103u);
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 103u);
}

// Decode throughput, printed for the report (not an assertion).
TEST(TrainLoader, ThroughputReport) {
  Dataset ds = small_synthetic(8192, 3, 32);
  LoaderOptions opt;
  opt.batch_size = 128;
  opt.augment.enabled = true;
  IndexedTrainLoader loader(ds, opt);
  auto t0 = std::chrono::steady_clock::now();
  int64_t batches = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    loader.start_epoch(epoch);
    while (loader.next()) ++batches;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[          ] CIFAR-shaped 128-batches with crop+flip: " << batches / s
            << " batches/s (" << batches * 128 / s << " images/s)\n";
  EXPECT_EQ(batches, 4 * 64);
}

}  // namespace
}  // namespace sdp
