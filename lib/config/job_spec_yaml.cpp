#include "config/job_spec_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <sstream>
#include <vector>

#include "config/job_spec_schema.hpp"
#include "core/error.hpp"

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

namespace {

YAML::Node parse_spec_map(const std::string& text, const char* which) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(std::string(which) + " job spec is not valid YAML: " + e.what());
  }
  if (!doc.IsMap()) throw InputError(std::string(which) + " job spec is not a YAML map");
  return doc;
}

// The value at parts[i...] below `node` as one line of YAML text; "" when absent. Const
// nodes throughout: yaml-cpp's non-const operator[] and operator= change the tree.
std::string value_text(const YAML::Node& node, const std::vector<std::string>& parts, std::size_t i = 0) {
  if (i < parts.size()) {
    if (!node.IsMap()) return "";
    const YAML::Node child = node[parts[i]];
    return child ? value_text(child, parts, i + 1) : "";
  }
  if (node.IsScalar()) return node.Scalar().empty() ? "\"\"" : node.Scalar();
  if (node.IsNull()) return "\"\"";
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::vector<std::string> path_parts(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  return parts;
}

}  // namespace

std::vector<JobSpecDifference> job_spec_differences(const std::string& before_yaml, const std::string& after_yaml) {
  const YAML::Node before = parse_spec_map(before_yaml, "the earlier");
  const YAML::Node after = parse_spec_map(after_yaml, "the later");
  std::vector<JobSpecDifference> differences;
  for (const JobSpecField& f : job_spec_schema()) {
    const std::vector<std::string> parts = path_parts(f.path);
    JobSpecDifference d{f.path, value_text(before, parts), value_text(after, parts)};
    if (d.before != d.after) differences.push_back(std::move(d));
  }
  return differences;
}

}  // namespace sdp
