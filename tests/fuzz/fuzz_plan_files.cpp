// Fuzzes the files `sdp-train plan` reads (plan/plan_inputs.hpp, plan/ctr_profile.hpp): a
// compute profile, a calibration (JSON), an instance table (YAML) and a CTR job's step profile
// (JSON). Byte 0 picks which; the rest is the file. Whatever they accept must plan without
// trouble: make_plan runs on what was read, the CTR curve gives a count within the table.
#include <cstdint>

#include "core/error.hpp"
#include "fuzz_input.hpp"
#include "plan/ctr_profile.hpp"
#include "plan/plan_inputs.hpp"
#include "plan/scaling_plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    switch (data[0] % 4) {
      case 0: {
        const std::string path = sdp::fuzz::write_file("compute.json", data + 1, size - 1);
        const sdp::plan::ComputeProfile compute = sdp::plan::read_compute_profile(path);
        sdp::plan::Network network;
        network.link_bytes_per_s = 1.25e8;
        network.latency_s = 5e-5;
        sdp::plan::PlanSetup setup;
        setup.nodes = {1, 4};
        setup.ranks_per_node = 2;
        setup.samples_per_epoch = 1000;
        (void)sdp::plan::format_plan(sdp::plan::make_plan(compute, network, setup));
        break;
      }
      case 1: {
        const std::string path = sdp::fuzz::write_file("calibration.json", data + 1, size - 1);
        const sdp::plan::Calibration calibration = sdp::plan::read_calibration(path);
        for (double bytes : {1.0, 4096.0, 1e9})
          (void)sdp::plan::allreduce_seconds(sdp::AllreduceKind::kHierarchical, sdp::Compression::kFp16, bytes,
                                             {2, calibration.ranks_per_node}, calibration.network);
        break;
      }
      case 3: {
        const std::string path = sdp::fuzz::write_file("ctr.json", data + 1, size - 1);
        const sdp::plan::CtrProfile profile = sdp::plan::read_ctr_profile(path);
        for (double samples : {1.0, static_cast<double>(profile.batch_per_rank), 1e3, 1e7, 1e12}) {
          const double unique = profile.unique_among(samples);
          if (!(unique >= 0 && unique <= static_cast<double>(profile.table_rows))) __builtin_trap();
        }
        break;
      }
      default: {
        const std::string path = sdp::fuzz::write_file("instances.yaml", data + 1, size - 1);
        const sdp::plan::InstanceTable table = sdp::plan::read_instance_table(path);
        if (table.types.empty()) __builtin_trap();  // the reader promised at least one
        break;
      }
    }
  } catch (const sdp::InputError&) {
  }
  return 0;
}
