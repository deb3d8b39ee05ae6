#include "plan/plan_inputs.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <sstream>

#include "config/json_file.hpp"
#include "core/error.hpp"

namespace sdp::plan {

using nlohmann::json;

json read_plan_file(const std::string& path, const std::string& what, const std::string& kind) {
  json doc = read_json_file(path, what);
  const int version = file_field<int>(doc, "version", path);
  if (version != kPlanFileVersion)
    throw InputError(path + ": key 'version': " + std::to_string(version) + " is not a version this build reads (" +
                     std::to_string(kPlanFileVersion) + ")");
  const std::string found = file_field<std::string>(doc, "kind", path);
  if (found != kind) throw InputError(path + ": key 'kind': a " + found + ", not a " + kind);
  return doc;
}

json compute_profile_to_json(const ComputeProfile& p) {
  json params = json::array();
  for (std::size_t i = 0; i < p.params.size(); ++i)
    params.push_back({{"offset", p.params[i].offset}, {"count", p.params[i].count}, {"ready_s", p.ready_s.at(i)}});
  return {{"version", kPlanFileVersion},
          {"kind", "sdp-train compute profile"},
          {"model", p.model},
          {"precision", p.precision},
          {"device", p.device},
          {"measured_on", p.measured_on},
          {"batch_per_rank", p.batch_per_rank},
          {"forward_s", p.forward_s},
          {"backward_s", p.backward_s},
          {"optimizer_s", p.optimizer_s},
          {"arena_elements", p.arena_elements},
          {"element_size", p.element_size},
          {"params", params}};
}

ComputeProfile read_compute_profile(const std::string& path) {
  const json doc = read_plan_file(path, "compute file", "sdp-train compute profile");
  ComputeProfile p;
  p.model = file_field<std::string>(doc, "model", path);
  p.precision = file_field<std::string>(doc, "precision", path);
  p.device = file_field<std::string>(doc, "device", path);
  p.measured_on = file_field<std::string>(doc, "measured_on", path);
  p.batch_per_rank = file_field<int64_t>(doc, "batch_per_rank", path);
  p.forward_s = file_field<double>(doc, "forward_s", path);
  p.backward_s = file_field<double>(doc, "backward_s", path);
  p.optimizer_s = file_field<double>(doc, "optimizer_s", path);
  p.arena_elements = file_field<int64_t>(doc, "arena_elements", path);
  p.element_size = file_field<int64_t>(doc, "element_size", path);
  // Sizes a model could have (2^40 elements: 4 TiB of f32 gradients), times a step could take.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  const auto time_ok = [](double s) { return std::isfinite(s) && s >= 0 && s < 1e6; };
  if (p.batch_per_rank < 1 || !time_ok(p.forward_s) || !time_ok(p.backward_s) || p.backward_s <= 0 ||
      !time_ok(p.optimizer_s) || (p.element_size != 2 && p.element_size != 4) || p.arena_elements < 1 ||
      p.arena_elements > kMaxElements)
    throw InputError(path + ": a batch below 1, a time that is negative or not finite, an element size other than 2 or "
                     "4, or an arena of no or more than 2^40 elements: not a compute profile sdp-train wrote");
  const json params = file_field<json>(doc, "params", path);
  if (!params.is_array() || params.empty()) throw InputError(path + ": key 'params' must be a non-empty list");
  int64_t end = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string prefix = "params[" + std::to_string(i) + "].";
    ParamExtent extent{file_field<int64_t>(params[i], "offset", path, prefix), file_field<int64_t>(params[i], "count", path, prefix)};
    // Bounded first, so that offset + count cannot overflow.
    if (extent.offset < end || extent.count < 1 || extent.offset > p.arena_elements ||
        extent.count > p.arena_elements - extent.offset)
      throw InputError(path + ": key '" + prefix + "offset' lies outside the arena or before the previous parameter");
    end = extent.offset + extent.count;
    p.params.push_back(extent);
    const double ready = file_field<double>(params[i], "ready_s", path, prefix);
    if (!time_ok(ready)) throw InputError(path + ": key '" + prefix + "ready_s' must be a time >= 0");
    p.ready_s.push_back(ready);
  }
  return p;
}

json calibration_to_json(const Calibration& c) {
  json shared_per_byte = json::object();
  for (const auto& [kind, seconds] : c.network.shared_core.s_per_byte) shared_per_byte[to_string(kind)] = seconds;
  json link_share = json::object();
  for (const auto& [kind, share] : c.network.shared_core.link_share) link_share[to_string(kind)] = share;
  const auto points_json = [](const Curve& curve) {
    json points = json::array();
    for (const auto& [bytes, seconds] : curve.points()) points.push_back({bytes, seconds});
    return points;
  };
  const json intra = points_json(c.network.intra);
  json link = {{"measured", c.link_measured},
               {"bytes_per_s", c.network.link_bytes_per_s},
               {"latency_s", c.network.latency_s}};
  for (const auto& [key, times] : kMeasuredLinkTimes) link[key] = points_json((c.network.*times).curve);
  json doc = {{"version", kPlanFileVersion},
              {"kind", "sdp-train plan calibration"},
              {"date", c.date},
              {"hosts", c.hosts},
              {"nodes", c.nodes},
              {"ranks_per_node", c.ranks_per_node},
              {"link", link},
              {"intra", {{"measured", c.intra_measured}, {"ranks", c.network.intra_ranks}, {"points", intra}}},
              {"convert", {{"measured", c.convert_measured}, {"bytes_per_s", c.network.convert_bytes_per_s}}},
              {"shared_core", {{"measured", c.network.shared_core.measured},
                               {"latency_s", c.network.shared_core.latency_s},
                               {"s_per_byte", shared_per_byte},
                               {"link_share", link_share}}}};
  if (c.machines.count > 0)
    doc["machines"] = {{"count", c.machines.count}, {"ranks", c.machines.ranks}, {"cpus", c.machines.cpus}};
  return doc;
}

Calibration read_calibration(const std::string& path) {
  const json doc = read_plan_file(path, "calibration file", "sdp-train plan calibration");
  Calibration c;
  c.date = file_field<std::string>(doc, "date", path);
  c.hosts = file_field<std::string>(doc, "hosts", path);
  c.nodes = file_field<int>(doc, "nodes", path);
  c.ranks_per_node = file_field<int>(doc, "ranks_per_node", path);
  // Calibrations made before the machines were recorded lack them: count 0, not known.
  if (doc.contains("machines")) {
    const json machines = file_field<json>(doc, "machines", path);
    c.machines.count = file_field<int>(machines, "count", path, "machines.");
    c.machines.ranks = file_field<int>(machines, "ranks", path, "machines.");
    c.machines.cpus = file_field<int>(machines, "cpus", path, "machines.");
    if (c.machines.count < 1 || c.machines.ranks < 1 || c.machines.cpus < 1)
      throw InputError(path + ": key 'machines' must hold counts >= 1");
  }
  const json link = file_field<json>(doc, "link", path), intra = file_field<json>(doc, "intra", path),
             convert = file_field<json>(doc, "convert", path);
  c.link_measured = file_field<bool>(link, "measured", path, "link.");
  c.network.link_bytes_per_s = file_field<double>(link, "bytes_per_s", path, "link.");
  c.network.latency_s = file_field<double>(link, "latency_s", path, "link.");
  // A curve of [bytes > 0, seconds >= 0] pairs.
  const auto read_curve = [&](const json& points_doc, const std::string& key) {
    std::vector<std::pair<double, double>> points;
    for (const json& point : points_doc) {
      if (!point.is_array() || point.size() != 2 || !point[0].is_number() || !point[1].is_number() ||
          !(point[0].get<double>() > 0) || !std::isfinite(point[0].get<double>()) ||
          !(point[1].get<double>() >= 0) || !std::isfinite(point[1].get<double>()))
        throw InputError(path + ": key '" + key + "' must hold [bytes > 0, seconds >= 0] pairs");
      points.emplace_back(point[0].get<double>(), point[1].get<double>());
    }
    return Curve(std::move(points));
  };
  // Calibrations made before the message or ring-step curves existed lack them: the plan takes
  // the formula.
  for (const auto& [key, times] : kMeasuredLinkTimes)
    if (link.contains(key))
      c.network.*times =
          c.network.measured_here(read_curve(file_field<json>(link, key, path, "link."), std::string("link.") + key));
  c.intra_measured = file_field<bool>(intra, "measured", path, "intra.");
  c.network.intra_ranks = file_field<int>(intra, "ranks", path, "intra.");
  c.network.intra = read_curve(file_field<json>(intra, "points", path, "intra."), "intra.points");
  c.convert_measured = file_field<bool>(convert, "measured", path, "convert.");
  c.network.convert_bytes_per_s = file_field<double>(convert, "bytes_per_s", path, "convert.");
  // Calibrations made before the shared-core figures existed lack them: not measured.
  if (doc.contains("shared_core")) {
    const json shared = file_field<json>(doc, "shared_core", path);
    c.network.shared_core.measured = file_field<bool>(shared, "measured", path, "shared_core.");
    c.network.shared_core.latency_s = file_field<double>(shared, "latency_s", path, "shared_core.");
    const auto time_ok = [](double v) { return std::isfinite(v) && v >= 0 && v < 1e3; };
    if (!time_ok(c.network.shared_core.latency_s))
      throw InputError(path + ": key 'shared_core.latency_s' must be a time >= 0");
    const json per_byte = file_field<json>(shared, "s_per_byte", path, "shared_core."),
               link_share = file_field<json>(shared, "link_share", path, "shared_core.");
    for (AllreduceKind kind : {AllreduceKind::kFlat, AllreduceKind::kRing, AllreduceKind::kHierarchical}) {
      if (!c.network.shared_core.measured) break;  // one rank: nothing was measured
      const double seconds = file_field<double>(per_byte, to_string(kind), path, "shared_core.s_per_byte.");
      if (!time_ok(seconds))
        throw InputError(path + ": key 'shared_core.s_per_byte." + to_string(kind) + "' must be a time >= 0");
      c.network.shared_core.s_per_byte[kind] = seconds;
      const double share = file_field<double>(link_share, to_string(kind), path, "shared_core.link_share.");
      if (!std::isfinite(share) || share <= 0 || share > 1)
        throw InputError(path + ": key 'shared_core.link_share." + to_string(kind) + "' must be in (0, 1]");
      c.network.shared_core.link_share[kind] = share;
    }
  }
  const auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (c.link_measured && (!positive(c.network.link_bytes_per_s) || !std::isfinite(c.network.latency_s) ||
                          c.network.latency_s < 0))
    throw InputError(path + ": key 'link': a measured link needs bytes_per_s > 0 and latency_s >= 0");
  if (!positive(c.network.convert_bytes_per_s)) throw InputError(path + ": key 'convert.bytes_per_s' must be > 0");
  if (c.nodes < 1 || c.ranks_per_node < 1 || c.network.intra_ranks < 1)
    throw InputError(path + ": keys 'nodes', 'ranks_per_node' and 'intra.ranks' must be at least 1");
  return c;
}

InstanceTable read_instance_table(const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError("instance table '" + path + "' not found or not readable");
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  InstanceTable table;
  table.path = path;
  auto text = [&](const YAML::Node& node, const std::string& key, const std::string& where) -> YAML::Node {
    if (!node[key]) throw InputError(path + ": key '" + where + key + "' is missing");
    return node[key];
  };
  try {
    table.source = text(doc, "source", "").as<std::string>();
    table.date = text(doc, "date", "").as<std::string>();
    table.region = text(doc, "region", "").as<std::string>();
    if (doc["link_efficiency"]) table.link_efficiency = doc["link_efficiency"].as<double>();
    if (!(table.link_efficiency > 0 && table.link_efficiency <= 1))
      throw InputError(path + ": key 'link_efficiency' must lie in (0, 1]");
    const YAML::Node types = text(doc, "instances", "");
    if (!types.IsMap() || types.size() == 0) throw InputError(path + ": key 'instances' must map names to types");
    for (const auto& entry : types) {
      InstanceType t;
      t.name = entry.first.as<std::string>();
      const YAML::Node& n = entry.second;
      const std::string where = "instances." + t.name + ".";
      t.accelerators = text(n, "gpus", where).as<int>();
      t.accelerator = t.accelerators > 0 ? text(n, "gpu", where).as<std::string>() : std::string("none (CPU)");
      t.vcpus = text(n, "vcpus", where).as<int>();
      t.network_gbps = text(n, "network_gbps", where).as<double>();
      t.efa = text(n, "efa", where).as<bool>();
      t.latency_us = text(n, "latency_us", where).as<double>();
      t.node_busbw_gbs = text(n, "node_busbw_gbs", where).as<double>();
      t.usd_per_hour = text(n, "usd_per_hour", where).as<double>();
      if (!(t.network_gbps > 0) || !(t.node_busbw_gbs > 0) || !(t.usd_per_hour >= 0) || !(t.latency_us >= 0) ||
          !std::isfinite(t.network_gbps + t.node_busbw_gbs + t.usd_per_hour + t.latency_us) || t.accelerators < 0)
        throw InputError(path + ": key '" + where + "': network_gbps and node_busbw_gbs must be > 0, latency_us and "
                         "usd_per_hour >= 0, gpus >= 0, all finite");
      table.types.emplace(t.name, t);
    }
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": wrong type: " + e.msg);
  }
  return table;
}

const InstanceType& find_instance(const InstanceTable& table, const std::string& name) {
  const auto it = table.types.find(name);
  if (it != table.types.end()) return it->second;
  std::ostringstream known;
  for (const auto& [type, _] : table.types) known << (known.tellp() > 0 ? ", " : "") << type;
  throw InputError("--instance: '" + name + "' is not in " + table.path + " (known: " + known.str() +
                   "); add it there");
}

}  // namespace sdp::plan
