// DataParallel's step agreement in the last bucket (data_parallel.hpp): a host job without
// wire compression agrees on the mean loss and on any rank's stop request through its last
// gradient bucket, with no collective of its own, and its gradients come out as before: the
// mean of every rank's own.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <limits>
#include <vector>

#include "config/job_spec.hpp"
#include "distributed/world.hpp"
#include "models/registry.hpp"
#include "train/data_parallel.hpp"

namespace sdp {
namespace {

models::ModelOptions small_mlp() {
  models::ModelOptions o;
  o.name = "mlp";
  o.in_channels = 1;
  o.height = o.width = 6;
  o.hidden = {16, 16};
  return o;
}

// This rank's own batch: different on every rank, so the mean differs from each one's.
struct RankBatch {
  Tensor images{{4, 1, 6, 6}};
  std::vector<int32_t> labels;
  explicit RankBatch(int rank) {
    float* x = images.data<float>();
    for (int64_t i = 0; i < images.numel(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank));
    for (int i = 0; i < 4; ++i) labels.push_back((i + rank) % 10);
  }
};

// One step of `parallel` over `model` on this rank's batch, the agreement set as given.
void step(nn::Model& model, DataParallel& parallel, const RankBatch& batch, int64_t index, double loss, bool stop) {
  parallel.begin_step(index);
  parallel.begin_micro_batch(0);
  model.forward(batch.images, batch.labels.data(), /*training=*/true);
  parallel.set_step_agreement(loss, stop);
  model.backward();
  parallel.finish_step();
}

TEST(DataParallel, TheLastBucketCarriesTheMeanLossAndAnyStopAndTheGradientsStayTheMean) {
  World world = World::create({0, std::nullopt});
  const int rank = world.rank(), size = world.size();
  if (size < 2) GTEST_SKIP() << "needs 2 ranks or more";
  const RankBatch batch(rank);

  // This rank's gradients alone, then their mean over the ranks (double sums: the reference).
  auto alone = models::make_model(small_mlp());
  alone->forward(batch.images, batch.labels.data(), /*training=*/true);
  alone->backward();
  const Tensor& own = alone->store().grad_arena();
  std::vector<double> mean(own.data<float>(), own.data<float>() + own.numel());
  MPI_Allreduce(MPI_IN_PLACE, mean.data(), static_cast<int>(mean.size()), MPI_DOUBLE, MPI_SUM, world.comm());
  for (double& g : mean) g /= size;

  auto model = models::make_model(small_mlp());
  DistributedSpec spec;
  spec.compression = Compression::kNone;
  spec.bucket_mb = 0.001;  // several buckets: the agreement rides in the last one only
  DataParallel parallel(*model, spec, world);
  ASSERT_TRUE(parallel.carries_step_agreement());
  ASSERT_GE(parallel.bucket_count(), 2);
  EXPECT_EQ(parallel.reduced_bytes(),
            static_cast<int64_t>(model->store().grad_arena().nbytes()) + 16 * static_cast<int64_t>(sizeof(float)));

  // Losses 1 .. size: their mean; only the last rank asks to stop.
  step(*model, parallel, batch, 0, rank + 1.0, rank == size - 1);
  DataParallel::StepAgreement agreed = parallel.step_agreement();
  EXPECT_DOUBLE_EQ(agreed.mean_loss, (size + 1) / 2.0);
  EXPECT_TRUE(agreed.stop);
  const Tensor& reduced = model->store().grad_arena();
  ASSERT_EQ(reduced.numel(), static_cast<int64_t>(mean.size()));
  for (int64_t i = 0; i < reduced.numel(); ++i)
    ASSERT_NEAR(reduced.data<float>()[i], mean[i], 1e-5 * (1 + std::fabs(mean[i]))) << "gradient element " << i;

  // A loss gone bad on one rank is NaN on all, so every rank skips the same update; no stop.
  step(*model, parallel, batch, 1, rank == 0 ? std::numeric_limits<double>::quiet_NaN() : 2.0, false);
  agreed = parallel.step_agreement();
  EXPECT_TRUE(std::isnan(agreed.mean_loss));
  EXPECT_FALSE(agreed.stop);
}

TEST(DataParallel, A16BitWireAgreesOverMpiInstead) {
  World world = World::create({0, std::nullopt});
  if (world.size() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  auto model = models::make_model(small_mlp());
  DistributedSpec spec;
  spec.compression = Compression::kBf16;  // would round the loss (and a large one to infinity in fp16)
  DataParallel parallel(*model, spec, world);
  EXPECT_FALSE(parallel.carries_step_agreement());
  EXPECT_EQ(parallel.reduced_bytes(), static_cast<int64_t>(model->store().grad_arena().nbytes()));
  EXPECT_THROW(parallel.set_step_agreement(1.0, false), std::logic_error);
}

}  // namespace
}  // namespace sdp
