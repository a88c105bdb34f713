// The wire format of a cross-rank gather, shared by every transport (memscope::mpi in C++,
// torch.distributed and mpi4py in Python's memscope.distributed), so C++ and Python ranks of one
// MPI job gather together. No MPI here: a transport moves the bytes, this file says what they
// are (docs/distributed.md, "Payload").
//
// 1. The key table: the sorted union of every rank's keys, agreed by every rank together. Each
//    rank sends its keys as one blob (each key followed by a NUL byte, key_blob()); every rank
//    receives all blobs concatenated and unites them with the table it had (agree_table()), so
//    the table only grows and every rank computes the same one.
// 2. The payload: one float64 row per rank, of payload_width(K) values for a table of K keys:
//      [ keys fit the table (1/0), value per table key (NaN = missing) x K,
//        int flags x ceil(K/52) ]
//    The int flags are bit masks, 52 keys per word (a float64 holds every integer below 2^53
//    exactly), saying which values were integers. A rank with a key outside the table sends 0
//    in front; every rank sees it in the same allgather (payload_fits()), and together they
//    agree a new table and gather again.
//
// Values: an integer is exact up to 2^53 (8 PiB as bytes); a larger one is refused (pass a
// double to accept rounding).
//
// Thread safety: pure functions. Errors: UsageError naming the key (and `caller`, the function
// the user called) for a NaN value, an integer beyond 2^53 or a key holding a NUL byte
// (check_rank_metrics, which encode_payload also applies); UsageError for rows of the wrong
// length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "memscope/metrics.hpp"

namespace memscope {

// One rank's metric value as it travels: an integer or a double.
using RankValue = std::variant<std::int64_t, double>;
using RankMetrics = std::map<std::string, RankValue>;

// The numbers of a tracker's metrics; text values ({stage}_mem_{label}_mode) are left out.
[[nodiscard]] RankMetrics numeric_metrics(const Metrics& metrics);
// The same values as doubles (what RankTable holds).
[[nodiscard]] std::map<std::string, double> as_doubles(const RankMetrics& metrics);

// Throws UsageError for a value or key the payload cannot carry, naming it.
void check_rank_metrics(const RankMetrics& metrics, std::string_view caller);

// Step 1: this rank's keys as a blob, and the table agreed from every rank's blobs
// (concatenated, in any order) and the previous table.
[[nodiscard]] std::string key_blob(const RankMetrics& metrics);
[[nodiscard]] std::vector<std::string> agree_table(const std::vector<std::string>& table,
                                                   std::string_view blobs);

// Step 2: the row this rank sends, and what every rank's rows (concatenated, rank order) say.
[[nodiscard]] std::size_t payload_width(std::size_t keys);
[[nodiscard]] std::vector<double> encode_payload(const std::vector<std::string>& table,
                                                 const RankMetrics& metrics,
                                                 std::string_view caller);
// True when every rank's keys fit the table: the rows can be decoded.
[[nodiscard]] bool payload_fits(std::span<const double> rows, std::size_t keys);
// rows[r]: rank r's metrics, only the keys it sent, integers as integers.
[[nodiscard]] std::vector<RankMetrics> decode_payload(std::span<const double> rows,
                                                      const std::vector<std::string>& table);

}  // namespace memscope
