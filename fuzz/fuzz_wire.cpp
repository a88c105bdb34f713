// Fuzz target: what memscope reads from processes it does not control. The first byte picks the
// reader, the rest is its input:
//   0: a stage-mark line a watched command's tracker wrote (memscope run reads them from a pipe);
//   1: a process's environ block, for its rank variables (memscope run reads /proc/<pid>/environ);
//   2: other ranks' key blobs and payload rows (a cross-rank gather): the blobs up to the first
//      0xff byte, the rows (float64, native order) after it.
// Never a crash or undefined behaviour; what is read is consistent: a mark is timed at or after
// the start, the agreed table is sorted and unique and agreeing again changes nothing, and a
// decoded payload encodes and decodes back to itself.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/rank_env.hpp"
#include "memscope/rank_payload.hpp"
#include "memscope/run_marks.hpp"

namespace {

void check_mark(std::string_view line) {
  const std::optional<memscope::RunMark> mark = memscope::parse_mark_line(line, 0);
  if (mark && (!(mark->t >= 0.0) || (mark->kind != "begin" && mark->kind != "end"))) std::abort();
}

void check_gather(std::string_view input) {
  const std::size_t split = input.find('\xff');
  const std::string_view blobs = input.substr(0, split);
  const std::vector<std::string> table = memscope::agree_table({}, blobs);
  if (!std::is_sorted(table.begin(), table.end()) ||
      std::adjacent_find(table.begin(), table.end()) != table.end() ||
      memscope::agree_table(table, blobs) != table) {
    std::abort();
  }
  if (split == std::string_view::npos) return;
  const std::string_view bytes = input.substr(split + 1);
  std::vector<double> rows(bytes.size() / sizeof(double));
  if (!rows.empty()) std::memcpy(rows.data(), bytes.data(), rows.size() * sizeof(double));
  if (!memscope::payload_fits(rows, table.size())) return;
  try {
    const std::vector<memscope::RankMetrics> ranks = memscope::decode_payload(rows, table);
    std::vector<double> again;
    for (const memscope::RankMetrics& metrics : ranks) {
      const std::vector<double> row = memscope::encode_payload(table, metrics, "fuzz_wire");
      again.insert(again.end(), row.begin(), row.end());
    }
    if (memscope::decode_payload(again, table) != ranks) std::abort();
  } catch (const memscope::UsageError&) {  // rows that are not whole rows of the table's width
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      check_mark(input);
      break;
    case 1:
      (void)memscope::parse_rank_env(input);
      break;
    default:
      check_gather(input);
      break;
  }
  return 0;
}
