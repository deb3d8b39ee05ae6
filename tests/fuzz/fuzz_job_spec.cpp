// Fuzzes the YAML job spec: JobSpecLoader::apply_yaml_text (YAML parsing, the schema walk,
// type conversion of every key) and finish() (${VAR} expansion, validation). The text is
// passed in memory: apply_yaml_file only reads the file and checks it is not empty.
#include <cstdint>
#include <string>

#include "config/job_spec_loader.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    sdp::JobSpecLoader loader;
    loader.apply_yaml_text(text, "fuzz.yaml");
    (void)loader.finish();
  } catch (const sdp::InputError&) {
  }
  return 0;
}
