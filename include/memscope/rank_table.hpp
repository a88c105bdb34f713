// The cross-rank table: every rank's metrics and one reduction per key (min, max and the rank
// holding it, mean, sum, the ranks missing the key), with its text and JSON forms. No MPI:
// memscope::mpi::gather (mpi.hpp) and Python's memscope.distributed build it from what their
// transports gathered (the payload codec is rank_payload.hpp); docs/distributed.md.
//
//   auto table = memscope::reduce({{{"train_mem_gpu_peaked_delta", 3 << 20}}, {}});
//   std::fputs(table.format().c_str(), stdout);   // rank 1 is missing the key, never 0
//
// Semantics:
// - A key a rank does not report is missing on that rank, never 0: the reduction of a key
//   covers the ranks that have it (`count` of them), and `missing` lists the others.
// - argmax is the lowest rank holding the maximum.
//
// Thread safety: pure functions and plain values. Errors: none (reduce takes any input).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace memscope {

// One key's figures over the ranks that reported it.
struct Reduction {
  double min = 0;
  double max = 0;
  double mean = 0;
  double sum = 0;
  int argmax = -1;           // lowest rank holding max
  int count = 0;             // ranks that reported the key
  std::vector<int> missing;  // ranks that did not, ascending
};

struct RankTable {
  int world_size = 0;
  std::vector<std::map<std::string, double>> ranks;  // ranks[r]: the keys rank r reported
  std::map<std::string, Reduction> reductions;       // every key any rank reported

  // An aligned text table: "memscope: K metrics over N ranks", a header, then one row per key
  // with min, max, argmax, mean, sum and the ranks missing it ("1-4,7"; "-" for none). Memory
  // keys (is_memory_key(), metrics.hpp: containing "_mem_", ending in "_delta" or "_bytes") in byte
  // units ("3.00 MiB"), other integral values exactly, fractions with 6 significant digits.
  [[nodiscard]] std::string format() const;
  // {"world_size": N, "ranks": [{key: value}...], "reductions": {key: {"min", "max", "mean",
  // "sum", "argmax", "count", "missing"}}}: the field names of Python's RankTable.to_dict().
  // Integral values as JSON integers; values that are not finite (infinities) as null.
  [[nodiscard]] std::string to_json() const;
};

// The reduction of per-rank metrics (ranks[r] = rank r's metrics).
[[nodiscard]] RankTable reduce(std::vector<std::map<std::string, double>> ranks);

}  // namespace memscope
