#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/parameter_store.hpp"
#include "core/tensor.hpp"
#include "core/tensor_desc.hpp"

namespace sdp {
namespace {

TEST(Tensor, AllocatesZeroedAlignedStorage) {
  Tensor t({3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
}

TEST(Tensor, SliceAndReshapeShareStorage) {
  Tensor t({4, 4});
  Tensor row = t.slice(4, 4);
  row.fill(2.0f);
  EXPECT_EQ(t.data<float>()[3], 0.0f);
  EXPECT_EQ(t.data<float>()[4], 2.0f);
  EXPECT_EQ(t.data<float>()[7], 2.0f);
  EXPECT_EQ(t.data<float>()[8], 0.0f);
  EXPECT_THROW(t.reshaped({5, 3}), std::invalid_argument);
  EXPECT_THROW(t.slice(10, 7), std::out_of_range);
}

TEST(ParameterStore, ParamsAndGradsShareOneLayout) {
  ParameterStore store;
  Param& w = store.add_parameter("fc.weight", {3, 7});
  Param& b = store.add_parameter("fc.bias", {3}, /*weight_decay=*/false);
  store.add_buffer("bn.running_mean", {5});
  store.finalize();
  EXPECT_EQ(store.num_parameters(), 24);
  EXPECT_EQ(w.offset, 0);
  EXPECT_EQ(b.offset % ParameterStore::kAlignElements, 0);
  EXPECT_EQ(w.value.data<float>(), store.param_arena().data<float>());
  EXPECT_EQ(b.grad.data<float>(), store.grad_arena().data<float>() + b.offset);
  EXPECT_FALSE(b.weight_decay);
  EXPECT_THROW(store.add_parameter("late", {1}), std::logic_error);
}

TEST(ParameterStore, GradArenaCanMoveIntoExternalMemory) {
  ParameterStore store;
  Param& w = store.add_parameter("w", {2, 3});
  Param& b = store.add_parameter("b", {3});
  store.finalize();
  w.grad.fill(1.5f);
  auto external = allocate_host(store.grad_arena().nbytes());
  store.rebind_grad_arena(external, external.get());
  EXPECT_EQ(store.grad_arena().raw(), external.get());
  EXPECT_EQ(w.grad.raw(), external.get());
  EXPECT_EQ(b.grad.data<float>(), static_cast<float*>(external.get()) + b.offset);
  EXPECT_EQ(w.grad.data<float>()[5], 1.5f);  // contents carried over
}

TEST(ParameterStore, FingerprintChangesWithShapes) {
  ParameterStore a, b, c;
  a.add_parameter("w", {3, 4});
  b.add_parameter("w", {3, 4});
  c.add_parameter("w", {4, 3});
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.fingerprint(), c.fingerprint());
}

TEST(Tensor, AllFiniteFindsNaNAndInfinityAnywhere) {
  // 1000 elements: one thread; 3M: every thread, each its own part (the last one too).
  for (int64_t n : {int64_t{1000}, int64_t{3000017}}) {
    Tensor t({n});
    t.fill(1e30f);
    EXPECT_TRUE(t.all_finite()) << n;
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()})
      for (int64_t at : {int64_t{0}, n / 2 + 1, n - 1}) {
        t.fill(-3.5f);
        t.data<float>()[at] = bad;
        EXPECT_FALSE(t.all_finite()) << bad << " at " << at << " of " << n;
      }
  }
  EXPECT_TRUE(Tensor({0}).all_finite());
}

// Loss scaling's unscale: every element times the factor, across the threads' parts.
TEST(Tensor, ScaleMultipliesEveryElement) {
  for (int64_t n : {int64_t{7}, int64_t{1000003}}) {
    Tensor t({n});
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i % 97) - 40.0f;
    t.scale(1.0f / 1024.0f);
    for (int64_t i : {int64_t{0}, n / 2, n - 1})
      EXPECT_EQ(t.data<float>()[i], (static_cast<float>(i % 97) - 40.0f) / 1024.0f) << i << " of " << n;
  }
  Tensor half({4}, DType::kF16);
  EXPECT_THROW(half.scale(2.0f), std::invalid_argument);
}

// memory_use is what the GPU summary reports (gpu_memory_peak_mb): it must follow every
// allocation and free through allocate(), Tensors included, and keep the high-water mark.
TEST(DeviceMemory, UseFollowsAllocationsAndKeepsThePeak) {
  const MemoryUse before = memory_use(DeviceKind::kCpu);
  reset_peak_memory(DeviceKind::kCpu);
  EXPECT_EQ(memory_use(DeviceKind::kCpu).peak, before.current);
  {
    std::shared_ptr<void> a = allocate(Device::cpu(), 1 << 20);
    EXPECT_EQ(memory_use(DeviceKind::kCpu).current, before.current + (1 << 20));
    {
      Tensor t({256, 1024});  // 1 MiB of floats
      EXPECT_EQ(memory_use(DeviceKind::kCpu).current, before.current + (2 << 20));
    }
    EXPECT_EQ(memory_use(DeviceKind::kCpu).current, before.current + (1 << 20)) << "the tensor's bytes came back";
    std::shared_ptr<void> copy = a;  // the last copy frees it
    a.reset();
    EXPECT_EQ(memory_use(DeviceKind::kCpu).current, before.current + (1 << 20));
  }
  const MemoryUse after = memory_use(DeviceKind::kCpu);
  EXPECT_EQ(after.current, before.current);
  EXPECT_EQ(after.peak, before.current + (2 << 20));
  EXPECT_EQ(memory_use(DeviceKind::kCuda).current, 0u) << "host allocations are not the GPU's";
  reset_peak_memory(DeviceKind::kCpu);
  EXPECT_EQ(memory_use(DeviceKind::kCpu).peak, before.current);
}

// memory_at_peak says what the memory held at the high-water mark was for: each allocation
// under the purpose of the innermost MemoryPurposeScope of its thread (none: the layers' own),
// taken when the peak was reached, not after.
TEST(DeviceMemory, ThePeakSaysWhatEachPurposeHeld) {
  const auto before = memory_at_peak(DeviceKind::kCpu);
  reset_peak_memory(DeviceKind::kCpu);
  const auto base = memory_at_peak(DeviceKind::kCpu);
  const auto arena = static_cast<int>(MemoryPurpose::kArena), params = static_cast<int>(MemoryPurpose::kParameters),
             layers = static_cast<int>(MemoryPurpose::kLayers), optimizer = static_cast<int>(MemoryPurpose::kOptimizer);
  {
    std::shared_ptr<void> a, p, l;
    {
      const MemoryPurposeScope outer(MemoryPurpose::kParameters);
      p = allocate(Device::cpu(), 3 << 20);
      {
        const MemoryPurposeScope inner(MemoryPurpose::kArena);
        a = allocate(Device::cpu(), 5 << 20);
      }
    }
    l = allocate(Device::cpu(), 1 << 20);  // no scope: the layers' own
    const auto peak = memory_at_peak(DeviceKind::kCpu);
    EXPECT_EQ(peak[arena] - base[arena], std::size_t{5} << 20);
    EXPECT_EQ(peak[params] - base[params], std::size_t{3} << 20);
    EXPECT_EQ(peak[layers] - base[layers], std::size_t{1} << 20);
    EXPECT_EQ(peak[optimizer], base[optimizer]);
    const std::string text = describe_memory_at_peak(DeviceKind::kCpu);
    EXPECT_NE(text.find("arena "), std::string::npos) << text;
    EXPECT_NE(text.find("parameters "), std::string::npos) << text;
  }
  {
    const MemoryPurposeScope scope(MemoryPurpose::kOptimizer);
    std::shared_ptr<void> small = allocate(Device::cpu(), 1 << 10);  // below the peak: no new snapshot
  }
  const auto after = memory_at_peak(DeviceKind::kCpu);
  EXPECT_EQ(after[arena] - base[arena], std::size_t{5} << 20) << "the peak's figures, not the memory held now";
  EXPECT_EQ(after[optimizer], base[optimizer]);
  (void)before;
}

// A GPU's failed allocation names the device, what was asked and held, what is left, and the
// keys that lower the need.
TEST(DeviceMemory, OutOfMemoryNamesTheDeviceTheSizesAndTheKeys) {
  const std::string m = out_of_memory_message(Device::cuda(1), std::size_t{1536} << 20,
                                              MemoryUse{std::size_t{20480} << 20, std::size_t{21000} << 20},
                                              std::size_t{512} << 20, std::size_t{81559} << 20);
  EXPECT_EQ(m.rfind("cuda:1 is out of memory: sdp-train asked for 1536.0 MB more while holding 20480.0 MB (512.0 MB "
                    "free of the GPU's 81559.0 MB",
                    0),
            0u)
      << m;
  for (const char* key : {"data.batch_size", "model.memory_plan: shared", "precision: amp-fp16"})
    EXPECT_NE(m.find(key), std::string::npos) << key << " in " << m;
}

TEST(DeviceMemory, PinnedHostMemoryIsZeroedAndWritable) {
  // Page-locked where a GPU driver grants it, ordinary host memory elsewhere: either way
  // zero-filled host memory.
  std::shared_ptr<void> p = allocate_pinned_host(1 << 20);
  ASSERT_NE(p, nullptr);
  auto* bytes = static_cast<unsigned char*>(p.get());
  for (std::size_t i : {std::size_t{0}, std::size_t{4096}, std::size_t{(1 << 20) - 1}}) EXPECT_EQ(bytes[i], 0) << i;
  bytes[12345] = 7;
  EXPECT_EQ(bytes[12345], 7);
}

TEST(Tensor, HelpersRefuseADeviceTheyCannotTouch) {
  // A view that claims GPU memory: fill() must refuse it rather than write through the
  // pointer on the host.
  auto host = allocate_host(64);
  Tensor t = Tensor::view_of(host, host.get(), {4}, DType::kF32, Device::cuda(0));
  EXPECT_THROW(t.fill(1.0f), std::invalid_argument);
}

TEST(Tensor, AllocatesOnItsDevice) {
  Tensor t({3, 5}, DType::kF32, Device::cpu());
  EXPECT_TRUE(t.device().is_cpu());
  t.fill(2.0f);
  Tensor u({15});
  u.copy_from(t);
  EXPECT_EQ(u.data<float>()[14], 2.0f);
#ifndef SDP_HAVE_CUDA
  // Without the CUDA backend a GPU tensor is a clear usage error, not a crash.
  EXPECT_THROW(Tensor({4}, DType::kF32, Device::cuda(0)), InputError);
#endif
}

TEST(ParameterStore, FinalizeOnADevice) {
  ParameterStore store;
  store.add_parameter("w", {3});
  store.finalize(Device::cpu());
  EXPECT_TRUE(store.device().is_cpu());
  EXPECT_TRUE(store.param_arena().device().is_cpu());
  EXPECT_TRUE(store.grad_arena().device().is_cpu());
}

TEST(TensorDesc, EqualityAndSize) {
  const TensorDesc a = TensorDesc::plain({2, 3, 4, 5});
  TensorDesc b = a;
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.nbytes(), 2u * 3 * 4 * 5 * 4);
  b.layout = Layout::kChannelsLast;
  EXPECT_FALSE(a == b);
  b = a;
  b.device = Device::cuda(1);
  EXPECT_FALSE(a == b);
  EXPECT_NE(a.str().find("plain"), std::string::npos);
}

}  // namespace
}  // namespace sdp
