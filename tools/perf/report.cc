#include "report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace perf {
namespace {

std::string timeText(double us) {
  char buf[32];
  snprintf(buf, sizeof(buf), us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return buf;
}

void printResult(const Result& r) {
  if (r.wrong >= 0)
    printf("  %7s  %6.2f  %6.2f  %5lld", timeText(r.timeUs).c_str(), r.algbw, r.busbw, static_cast<long long>(r.wrong));
  else
    printf("  %7s  %6.2f  %6.2f  %5s", timeText(r.timeUs).c_str(), r.algbw, r.busbw, "N/A");
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void jsonResult(FILE* f, const char* key, const Result& r) {
  fprintf(f, "\"%s\":{\"time_us\":%.6g,\"algbw\":%.6g,\"busbw\":%.6g,\"wrong\":", key, r.timeUs, r.algbw, r.busbw);
  if (r.wrong >= 0)
    fprintf(f, "%lld}", static_cast<long long>(r.wrong));
  else
    fprintf(f, "null}");
}

}  // namespace

Report::Report(const Options& o, const hetcclCommInfo_t& info, bool print) : o_(o), info_(info), print_(print) {}

std::string Report::groupNames() const {
  std::string s;
  for (int g = 0; g < info_.ngroups; ++g) s += std::string(g ? "," : "") + info_.groupName[g];
  return s;
}

const char* Report::redopColumn() const { return collReduces(o_.coll) ? redopName(o_.redop) : "none"; }

int Report::rootColumn() const { return collRooted(o_.coll) ? o_.root : -1; }

void Report::header() const {
  if (!print_) return;
  printf("# hetccl-perf: %s %s %s nranks %d groups %s transport %s\n", collName(o_.coll), typeName(o_.dtype),
         redopColumn(), info_.nranks, groupNames().c_str(), info_.transport);
  if (o_.stepBytes > 0)
    printf("#  minBytes %zu maxBytes %zu step: %zu(bytes) warmup iters: %d iters: %d validation: %d\n", o_.minBytes,
           o_.maxBytes, o_.stepBytes, o_.warmup, o_.iters, o_.check ? 1 : 0);
  else
    printf("#  minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d validation: %d\n", o_.minBytes,
           o_.maxBytes, o_.stepFactor, o_.warmup, o_.iters, o_.check ? 1 : 0);
  for (int g = 0; g < info_.ngroups; ++g)
    printf("#  group %-12s %3d ranks  backend %s\n", info_.groupName[g], info_.groupSize[g], info_.groupBackend[g]);
  printf("#\n");
  printf(
      "#                                                              out-of-place                       in-place      "
      "    \n");
  printf(
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n");
  printf(
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)   "
      "    \n");
  fflush(stdout);
}

void Report::row(const Row& r) {
  rows_.push_back(r);
  if (!print_) return;
  printf("%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, typeName(o_.dtype), redopColumn(), rootColumn());
  printResult(r.oop);
  printResult(r.ip);
  printf("\n");
  fflush(stdout);
}

int64_t Report::totalWrong() const {
  int64_t n = 0;
  for (const Row& r : rows_) n += (r.oop.wrong > 0 ? r.oop.wrong : 0) + (r.ip.wrong > 0 ? r.ip.wrong : 0);
  return n;
}

double Report::avgBusBw() const {
  double sum = 0;
  for (const Row& r : rows_) sum += r.oop.busbw + r.ip.busbw;
  return rows_.empty() ? 0.0 : sum / (2.0 * static_cast<double>(rows_.size()));
}

void Report::footer() const {
  if (!print_) return;
  int64_t wrong = totalWrong();
  printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong), wrong ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g\n", avgBusBw());
  printf("#\n");
  fflush(stdout);
}

bool Report::writeJson(const std::string& path) const {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    fprintf(stderr, "hetccl-perf: cannot write %s: %s\n", path.c_str(), strerror(errno));
    return false;
  }
  fprintf(f, "{\"op\":%s,\"dtype\":%s,\"redop\":%s,\"root\":%d,\"nranks\":%d,", jsonString(collName(o_.coll)).c_str(),
          jsonString(typeName(o_.dtype)).c_str(), jsonString(redopColumn()).c_str(), rootColumn(), info_.nranks);
  fprintf(f, "\"groups\":[");
  for (int g = 0; g < info_.ngroups; ++g) fprintf(f, "%s%s", g ? "," : "", jsonString(info_.groupName[g]).c_str());
  fprintf(f, "],\"group_sizes\":[");
  for (int g = 0; g < info_.ngroups; ++g) fprintf(f, "%s%d", g ? "," : "", info_.groupSize[g]);
  fprintf(f, "],\"transport\":%s,\"iters\":%d,\"warmup\":%d,\"check\":%s,\"rows\":[",
          jsonString(info_.transport).c_str(), o_.iters, o_.warmup, o_.check ? "true" : "false");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    fprintf(f, "%s\n  {\"bytes\":%zu,\"count\":%zu,", i ? "," : "", r.bytes, r.count);
    jsonResult(f, "oop", r.oop);
    fprintf(f, ",");
    jsonResult(f, "ip", r.ip);
    fprintf(f, "}");
  }
  fprintf(f, "],\n \"wrong_total\":%lld,\"avg_busbw\":%.6g}\n", static_cast<long long>(totalWrong()), avgBusBw());
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  if (!ok) fprintf(stderr, "hetccl-perf: writing %s failed\n", path.c_str());
  return ok;
}

}  // namespace perf
