// The nccl-tests style table on stdout, and the same results as JSON.
#ifndef HETCCL_TOOLS_PERF_REPORT_H_
#define HETCCL_TOOLS_PERF_REPORT_H_

#include <string>
#include <vector>

#include "bench.h"
#include "options.h"

namespace perf {

class Report {
 public:
  // print: whether this rank writes (rank 0 does).
  Report(const Options& o, const hetcclCommInfo_t& info, bool print);

  void header() const;
  void row(const Row& r);
  void footer() const;
  // Returns false, with the reason on stderr, when the file cannot be written.
  bool writeJson(const std::string& path) const;

  int64_t totalWrong() const;
  double avgBusBw() const;

 private:
  std::string groupNames() const;
  const char* redopColumn() const;
  int rootColumn() const;

  const Options& o_;
  hetcclCommInfo_t info_;
  bool print_;
  std::vector<Row> rows_;
};

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_REPORT_H_
