#include "config/job_spec_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <sstream>
#include <vector>

#include "config/job_spec_schema.hpp"

namespace sdp {

std::string job_spec_to_yaml(const JobSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;  // section names currently open
  for (const JobSpecField& f : job_spec_schema()) {
    std::vector<std::string> parts;
    std::stringstream ss(f.path);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    std::size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common])
      ++common;
    while (open.size() > common) {
      out << YAML::EndMap;
      open.pop_back();
    }
    for (std::size_t i = common; i + 1 < parts.size(); ++i) {
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[i]);
    }
    out << YAML::Key << parts.back() << YAML::Value;
    f.emit(out, spec);
  }
  while (!open.empty()) {
    out << YAML::EndMap;
    open.pop_back();
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace sdp
