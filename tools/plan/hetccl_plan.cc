// hetccl-plan: predicts, for a cluster described in YAML, each collective's
// time by size for hetccl's plans (group steps, border, GPU copies) and for
// one flat ring over every rank (the naive alternative), and the AllReduce
// plan threshold and border chunk size the model picks
// (src/model/cost_model.h). docs/clusters.md, "Planning a cluster", describes the file.
//
//   hetccl-plan CLUSTER.yaml [--json FILE] [--sizes 8,1M,1G] [--colls allreduce,broadcast]
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/cost_model.h"

namespace {

using hetccl::model::Cluster;
using hetccl::model::Coll;
using hetccl::model::Link;
using hetccl::model::Model;

double parseBytes(const std::string& s) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  std::string unit = end ? end : "";
  if (end == s.c_str() || v < 0) throw std::invalid_argument("size '" + s + "' is not a number of bytes");
  if (unit.empty()) return v;
  const char u = static_cast<char>(toupper(unit[0]));
  if ((unit.size() == 1 || unit.substr(1) == "iB" || unit.substr(1) == "B") && strchr("KMGT", u))
    return v * static_cast<double>(1ull << (10 * (strchr("KMGT", u) - "KMGT" + 1)));
  throw std::invalid_argument("size '" + s + "': unknown unit '" + unit + "' (K, M, G, T)");
}

std::string showBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4 && static_cast<long long>(b) % 1024 == 0) b /= 1024, ++u;
  char s[32];
  snprintf(s, sizeof(s), "%.0f %s", b, units[u]);
  return s;
}

double num(const YAML::Node& n, const char* key, double dflt, const std::string& where) {
  if (!n[key]) return dflt;
  try {
    return n[key].as<double>();
  } catch (const YAML::Exception&) {
    throw std::invalid_argument(where + ": '" + key + "' is not a number");
  }
}

Link link(const YAML::Node& n, const char* gbps, const char* lat, const std::string& where) {
  return Link{num(n, gbps, 0, where), num(n, lat, 0, where)};
}

Cluster parse(const YAML::Node& y, std::vector<double>* sizes, std::vector<Coll>* colls) {
  Cluster c;
  if (!y["vendors"] || !y["vendors"].IsMap()) throw std::invalid_argument("'vendors' (a map) is missing");
  for (const auto& kv : y["vendors"]) {
    const std::string name = kv.first.as<std::string>(), where = "vendor " + name;
    hetccl::model::Vendor v;
    v.device = kv.second["device"] ? kv.second["device"].as<bool>() : name != "cpu";
    v.intra = link(kv.second, "intra_gbps", "intra_latency_us", where);
    v.hostCopy = link(kv.second, "host_gbps", "host_latency_us", where);
    v.copyGbps = num(kv.second, "copy_gbps", 0, where);
    if (v.intra.gbps <= 0) throw std::invalid_argument(where + ": intra_gbps must be > 0");
    if (v.device && v.hostCopy.gbps <= 0) throw std::invalid_argument(where + ": host_gbps must be > 0 for GPUs");
    c.vendors[name] = v;
  }
  if (y["wan"]) c.wan = link(y["wan"], "gbps", "latency_us", "wan");
  if (!y["hosts"] || !y["hosts"].IsSequence()) throw std::invalid_argument("'hosts' (a list) is missing");
  std::map<std::string, int> index;
  for (const auto& h : y["hosts"]) {
    const std::string name = h["name"] ? h["name"].as<std::string>() : "host";
    const int count = h["count"] ? h["count"].as<int>() : 1;
    if (count < 1) throw std::invalid_argument("host " + name + ": count must be >= 1");
    hetccl::model::Host host;
    host.site = h["site"] ? h["site"].as<std::string>() : "";
    host.nic = link(h, "nic_gbps", "nic_latency_us", "host " + name);
    host.nics = h["nics"] ? h["nics"].as<int>() : 1;
    host.cores = num(h, "cores", 0, "host " + name);
    if (!h["ranks"] || !h["ranks"].IsMap())
      throw std::invalid_argument("host " + name + ": 'ranks' (a map) is missing");
    for (const auto& r : h["ranks"]) host.ranks.emplace_back(r.first.as<std::string>(), r.second.as<int>());
    for (int i = 0; i < count; ++i) {
      host.name = count == 1 ? name : name + std::to_string(i);
      index[host.name] = static_cast<int>(c.hosts.size());
      c.hosts.push_back(host);
    }
  }
  if (y["links"]) {
    for (const auto& l : y["links"]) {
      const auto hosts = l["hosts"].as<std::vector<std::string>>();
      if (hosts.size() != 2 || !index.count(hosts[0]) || !index.count(hosts[1]))
        throw std::invalid_argument("links: 'hosts' must name two hosts of the list");
      int a = index[hosts[0]], b = index[hosts[1]];
      c.links[{std::min(a, b), std::max(a, b)}] = link(l, "gbps", "latency_us", "link");
    }
  }
  if (y["border_cut"]) c.borderCut = y["border_cut"].as<std::string>();
  if (c.borderCut != "size" && c.borderCut != "bandwidth")
    throw std::invalid_argument("border_cut must be size or bandwidth");
  if (y["host_levels"]) c.hostLevels = y["host_levels"].as<bool>();
  if (y["sizes"] && sizes->empty())
    for (const auto& s : y["sizes"]) sizes->push_back(parseBytes(s.as<std::string>()));
  if (y["collectives"] && colls->empty())
    for (const auto& s : y["collectives"]) {
      Coll k;
      if (!hetccl::model::collFromName(s.as<std::string>(), &k))
        throw std::invalid_argument("unknown collective '" + s.as<std::string>() + "'");
      colls->push_back(k);
    }
  return c;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

int usage() {
  fprintf(stderr,
          "usage: hetccl-plan CLUSTER.yaml [--json FILE] [--sizes 8,1M,1G] [--colls allreduce,allgather,...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file, json;
  std::vector<double> sizes;
  std::vector<Coll> colls;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if ((a == "--json" || a == "--sizes" || a == "--colls") && i + 1 >= argc) return usage();
      if (a == "--json") {
        json = argv[++i];
      } else if (a == "--sizes") {
        for (const auto& s : split(argv[++i])) sizes.push_back(parseBytes(s));
      } else if (a == "--colls") {
        for (const auto& s : split(argv[++i])) {
          Coll k;
          if (!hetccl::model::collFromName(s, &k)) throw std::invalid_argument("unknown collective '" + s + "'");
          colls.push_back(k);
        }
      } else if (a == "-h" || a == "--help") {
        return usage();
      } else if (file.empty()) {
        file = a;
      } else {
        return usage();
      }
    }
    if (file.empty()) return usage();
    YAML::Node y = YAML::LoadFile(file);
    Model m(parse(y, &sizes, &colls));
    if (sizes.empty()) sizes = {8, 65536, 1 << 20, 16 << 20, 256 << 20, 1 << 30};
    if (colls.empty()) colls = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast};
    const double big = sizes.back();
    printf("# hetccl-plan %s: %d ranks on %zu hosts in %d groups, border cut %s\n", file.c_str(), m.nranks(),
           m.cluster().hosts.size(), m.ngroups(), m.cluster().borderCut.c_str());
    if (m.ngroups() > 1) {
      const double chunk = m.chunkBytes(big);
      printf("# AllReduce across groups: bandwidth plan from %s (HETCCL_SMALL_BYTES); border chunks at %s: %s\n",
             showBytes(m.smallBytes()).c_str(), showBytes(big).c_str(),
             chunk > 0 ? showBytes(chunk).c_str() : "one piece");
    }
    printf("%-14s %10s %12s %-12s %12s %12s %12s %7s %12s %9s\n", "collective", "bytes", "hetccl_us", "plan",
           "group_us", "border_us", "stage_us", "border%", "flat_ring_us", "ring/hetccl");
    FILE* out = json.empty() ? nullptr : fopen(json.c_str(), "w");
    if (!json.empty() && !out) throw std::invalid_argument("cannot write " + json);
    if (out)
      fprintf(out, "{\"ranks\": %d, \"hosts\": %zu, \"groups\": %d, \"small_bytes\": %.0f, \"rows\": [", m.nranks(),
              m.cluster().hosts.size(), m.ngroups(), m.smallBytes());
    bool first = true;
    for (Coll k : colls)
      for (double b : sizes) {
        const auto p = m.predict(k, b);
        printf("%-14s %10.0f %12.1f %-12s %12.1f %12.1f %12.1f %6.1f%% %12.1f %9.2f\n", hetccl::model::collName(k), b,
               p.us, p.plan, p.groupUs, p.borderUs, p.stageUs, 100 * p.borderShare(), p.flatRingUs,
               p.us > 0 ? p.flatRingUs / p.us : 0);
        if (out)
          fprintf(out,
                  "%s\n  {\"coll\": \"%s\", \"bytes\": %.0f, \"us\": %.3f, \"plan\": \"%s\", \"group_us\": %.3f, "
                  "\"border_us\": %.3f, \"stage_us\": %.3f, \"flat_ring_us\": %.3f}",
                  first ? "" : ",", hetccl::model::collName(k), b, p.us, p.plan, p.groupUs, p.borderUs, p.stageUs,
                  p.flatRingUs);
        first = false;
      }
    if (out) fprintf(out, "\n]}\n"), fclose(out);
  } catch (const YAML::Exception& e) {
    fprintf(stderr, "hetccl-plan: %s: %s\n", file.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    fprintf(stderr, "hetccl-plan: %s\n", e.what());
    return 2;
  }
  return 0;
}
