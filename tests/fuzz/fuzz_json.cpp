// Fuzzes the JSON files SageMaker (or a user) gives us, through their readers:
// read_json_file under load_resource_config (resourceconfig.json) and
// JobSpecLoader::apply_hyperparameters_file (hyperparameters.json). Byte 0 picks which
// (bit 0 clear: resource config), the rest is the file.
#include <cstdint>

#include "config/job_spec_loader.hpp"
#include "config/sagemaker_env.hpp"
#include "core/error.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    if ((data[0] & 1) == 0) {
      const std::string path = sdp::fuzz::write_file("resourceconfig.json", data + 1, size - 1);
      sdp::ResourceConfig rc = sdp::load_resource_config(path);
      if (rc.host_index() < 0 || rc.host_index() >= static_cast<int>(rc.hosts.size()))
        __builtin_trap();  // validation promised current_host is among the hosts
    } else {
      const std::string path = sdp::fuzz::write_file("hyperparameters.json", data + 1, size - 1);
      sdp::JobSpecLoader loader;
      loader.apply_hyperparameters_file(path);
      (void)loader.finish();
    }
  } catch (const sdp::InputError&) {
  }
  return 0;
}
